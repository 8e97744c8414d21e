"""My votes: an annotator's own history in a project (``annotation.queue.history``), newest
first a page at a time, filtered by day, with their speed and a chart of their latest sessions."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from annotation.charts.bars import bars
from annotation.charts.markup import Bar, Chart
from annotation.core.access import get_project_for_user
from annotation.models import Role
from annotation.queue.history import (
    CONSENSUS_WORDS,
    HISTORY_PAGE_SIZE,
    SESSION_GAP_MINUTES,
    SPEED_WINDOW_VOTES,
    HistoryFilter,
    HistoryInputError,
    annotator_speed,
    history_rows,
    own_votes,
)

TEMPLATE = "annotation/vote_history.html"


class HistoryFilterForm(forms.Form):
    since = forms.DateField(
        required=False, label="Since", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label="Until", widget=forms.DateInput(attrs={"type": "date"})
    )
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def clean(self) -> dict:
        super().clean()
        data = self.cleaned_data
        if not self.errors:
            try:
                data["history"] = HistoryFilter(
                    since=data.get("since"), until=data.get("until"), before=data.get("before")
                )
            except HistoryInputError as exc:
                self.add_error(exc.field, exc.message)
        return data


def _sessions_chart(sessions: list[dict]) -> Chart | None:
    """Votes per hour in each of the latest sessions, oldest at the top."""
    timed = [s for s in reversed(sessions) if s["votes_per_hour"] is not None]
    if not timed:
        return None
    items = [
        Bar(
            label=timezone.localtime(s["started_at"]).strftime("%Y-%m-%d %H:%M"),
            value=s["votes_per_hour"],
        )
        for s in timed
    ]
    return bars(
        items,
        title="Votes per hour in your latest sessions",
        label_header="session started",
        value_header="votes per hour",
        domain=(0.0, max(item.value or 0.0 for item in items)),
        chart_id="history-speed",
    )


@require_GET
@never_cache
@login_required
def vote_history(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=(Role.ANNOTATOR,))
    if role != Role.ANNOTATOR:  # a superuser acts as a curator, who has no votes of their own
        raise PermissionDenied("Only annotators of this project have a history of votes here")
    form = HistoryFilterForm(request.GET)
    rows: list[dict] = []
    older = None
    status = 200
    if form.is_valid():
        history = form.cleaned_data["history"]
        try:
            votes = own_votes(project=project, annotator=request.user, history=history)
            rows = history_rows(votes[: HISTORY_PAGE_SIZE + 1], project=project)
        except HistoryInputError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        if len(rows) > HISTORY_PAGE_SIZE:
            rows = rows[:HISTORY_PAGE_SIZE]
            older = rows[-1]["id"]
        for row in rows:
            row["consensus_words"] = CONSENSUS_WORDS.get(row["consensus"] or "")
    if form.errors:
        status = 400
    speed = annotator_speed(project=project, annotator=request.user)
    context = {
        "project": project,
        "form": form,
        "rows": rows,
        "older": older,
        "paged": bool(request.GET.get("before")),
        "speed": speed,
        "chart": _sessions_chart(speed["sessions"]),
        "session_gap_minutes": SESSION_GAP_MINUTES,
        "speed_window_votes": SPEED_WINDOW_VOTES,
        "shows_consensus": project.history_shows_consensus,
    }
    return render(request, TEMPLATE, context, status=status)
