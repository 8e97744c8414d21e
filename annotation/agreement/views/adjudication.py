"""The adjudication queue (docs/agreement.md, "Consensus in the app"): the project's disputed
pairs, oldest first; a pair's page with its content, every vote and rationale, its prior
annotations, model names behind a button, and the curator's decision (A, B or tie, with a
note). Curators decide and re-apply the rule; researchers read. Annotators get 403.
"""

from __future__ import annotations

import logging

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotation.agreement.prior_ratings import ratings_by_response
from annotation.agreement.selectors import (
    ADJUDICATION_PAGE_SIZE,
    disputed_pairs,
    pair_for_adjudication,
)
from annotation.core.access import CURATORS, STAFF_ROLES, get_project_for_user
from annotation.core.errors import DomainError
from annotation.core.limits import MAX_ADJUDICATION_NOTE_CHARS
from annotation.core.scales import CANONICAL_WORDS, screen_numbers
from annotation.core.shown import pair_page_context
from annotation.decisions.services import consensus_reapply, pair_adjudicate
from annotation.models import Pair, PairStatus, Project, Role, Scale, Side
from config.errors import status_for

logger = logging.getLogger(__name__)

QUEUE_PAGE = "annotation/adjudication.html"
PAIR_PAGE = "annotation/adjudication_pair.html"
# The decision's keys, A on the left as on the page: 1 A, 2 tie, 3 B (binary: 1 A, 2 B). The
# votes and prior annotations are numbered the same way, the screen's (``screen_numbers``):
# never by their canonical values, where 3 (likert6 6) is A.
_LABEL_WORDS = {Side.A: "A is better", Side.TIE: "Tie", Side.B: "B is better"}


def _labels(project: Project) -> list[dict]:
    sides = [Side.A, Side.B] if project.scale == Scale.BINARY else [Side.A, Side.TIE, Side.B]
    return [
        {"key": str(key), "value": side, "label": _LABEL_WORDS[side]}
        for key, side in enumerate(sides, start=1)
    ]


class AdjudicationForm(forms.Form):
    label = forms.ChoiceField(choices=Side.choices)
    note = forms.CharField(max_length=MAX_ADJUDICATION_NOTE_CHARS, strip=True)


def _staff_project(request, slug: str) -> tuple[Project, str]:
    return get_project_for_user(request.user, slug, roles=STAFF_ROLES)


def _staff_pair(request, slug: str, pair_id: int) -> tuple[Project, str, Pair]:
    """The project, the user's role in it and the pair of it that staff may look at."""
    project, role = _staff_project(request, slug)
    return project, role, pair_for_adjudication(project=project, pair_id=pair_id)


@require_GET
@never_cache
@login_required
def adjudication_queue(request, slug: str):
    project, role = _staff_project(request, slug)
    pairs = disputed_pairs(project=project)
    context = {
        "project": project,
        "role": role,
        "pairs": pairs[:ADJUDICATION_PAGE_SIZE],
        "total": pairs.count(),
        "page_size": ADJUDICATION_PAGE_SIZE,
    }
    return render(request, QUEUE_PAGE, context)


def _render_pair(
    request,
    project: Project,
    role: str,
    pair: Pair,
    *,
    form: AdjudicationForm | None = None,
    revealed: bool = False,
    status: int = 200,
):
    words = CANONICAL_WORDS[project.scale]
    numbers = screen_numbers(project.scale)
    adjudications = list(pair.adjudications.all())
    priors = list(pair.prior_annotations.all())
    live = next((a for a in adjudications if a.superseded_at is None), None)
    numbering = sorted((number, words[value]) for value, number in numbers.items())
    context = {
        **pair_page_context(project, role, pair, request=request),
        "votes": [
            {"vote": vote, "number": numbers.get(vote.value), "words": words[vote.value]}
            for vote in pair.votes.all()
        ],
        "numbering": {"first": numbering[0], "last": numbering[-1]},
        "priors": [
            {
                "prior": prior,
                "number": numbers.get(prior.value or 0),
                "words": words.get(prior.value or 0, prior.label),
            }
            for prior in priors
            if not prior.rating
        ],
        "prior_ratings": ratings_by_response((p.response, p.rating) for p in priors),
        "adjudications": adjudications,
        "live_adjudication": live,
        "can_decide": role == Role.CURATOR
        and (pair.status == PairStatus.DISPUTED or live is not None),
        "labels": _labels(project),
        "form": form or AdjudicationForm(initial={"label": live.label} if live else None),
        "revealed": revealed,
    }
    return render(request, PAIR_PAGE, context, status=status)


@require_GET
@never_cache
@login_required
def adjudication_pair(request, slug: str, pair_id: int):
    project, role, pair = _staff_pair(request, slug, pair_id)
    return _render_pair(request, project, role, pair)


@require_POST
@never_cache
@login_required
def adjudication_reveal(request, slug: str, pair_id: int):
    """Shows the pair's model names: the names fragment for htmx, else the whole page."""
    project, role, pair = _staff_pair(request, slug, pair_id)
    logger.info(
        "model names revealed",
        extra={"project": project.slug, "pair": pair.external_id, "user": request.user.pk},
    )
    if request.htmx:
        return render(request, f"{PAIR_PAGE}#model_names", {"pair": pair, "revealed": True})
    return _render_pair(request, project, role, pair, revealed=True)


@require_POST
@never_cache
@login_required
def adjudication_decide(request, slug: str, pair_id: int):
    """The curator's decision; then the next disputed pair, or the queue when none is left."""
    project, role = get_project_for_user(request.user, slug, roles=CURATORS)
    pair = pair_for_adjudication(project=project, pair_id=pair_id)
    form = AdjudicationForm(request.POST)
    if form.is_valid():
        try:
            pair_adjudicate(
                pair=pair,
                curator=request.user,
                label=form.cleaned_data["label"],
                note=form.cleaned_data["note"],
            )
        except DomainError as exc:
            form.add_error(None, str(exc))
            return _render_pair(request, project, role, pair, form=form, status=status_for(exc))
        messages.success(request, f"Pair {pair.external_id} decided: {form.cleaned_data['label']}.")
        following = disputed_pairs(project=project).first()
        if following is not None:
            return redirect("adjudication-pair", slug=project.slug, pair_id=following.pk)
        return redirect("adjudication", slug=project.slug)
    return _render_pair(request, project, role, pair, form=form, status=400)


@require_POST
@never_cache
@login_required
def adjudication_reapply(request, slug: str):
    """Re-applies the project's current rule to its decided pairs (``apply_consensus``)."""
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    result = consensus_reapply(project=project, actor=request.user)
    messages.success(request, result.summary())
    return redirect("adjudication", slug=project.slug)
