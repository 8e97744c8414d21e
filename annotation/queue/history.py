"""An annotator's own history in a project: their votes, newest first, as they gave them (the
side as it was on their screen, never A/B or a model's name), and their speed. Whether a vote
matched the consensus is told only where the project's curators chose it
(``Project.history_shows_consensus``) and only for pairs whose decision is final: it is a
summary of the other annotators' votes (docs/curators.md, "An annotator's own history")."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from annotation.core.scales import on_screen_vote, option_label
from annotation.core.search import text_parts
from annotation.models import PairStatus, Project, Side, Vote

# Rows on one page of the history.
HISTORY_PAGE_SIZE = 50
# The speed is read from the annotator's latest votes in the project, at most this many: a
# bounded read whatever the length of their history.
SPEED_WINDOW_VOTES = 1000
# Votes further apart than this belong to two sessions.
SESSION_GAP_MINUTES = 30
SESSION_GAP = timedelta(minutes=SESSION_GAP_MINUTES)
# The sessions the speed shows, newest first.
SPEED_SESSIONS = 10

MATCHED, DIFFERED, TIE = "matched", "differed", "tie"
CONSENSUS_WORDS = {
    MATCHED: "Matched the consensus",
    DIFFERED: "Differed from the consensus",
    TIE: "The consensus was a tie",
}


class HistoryInputError(ValueError):
    """A history filter that cannot be used: ``field`` and what is wrong with it."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class HistoryFilter:
    """Which votes to list: those given on the days ``since`` to ``until`` (both included,
    in the site's time zone), before the vote ``before`` (a page's last row), any of them
    left out."""

    since: date | None = None
    until: date | None = None
    before: int | None = None

    def __post_init__(self) -> None:
        if self.since and self.until and self.since > self.until:
            raise HistoryInputError("until", "must be on or after the day in since")


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def own_votes(*, project: Project, annotator, history: HistoryFilter | None = None):
    """The annotator's votes in the project, newest first (then by id), with their pair and
    prompt: a walk of ``vote_annotator_idx`` (annotator, created_at) backwards. A ``before``
    that is not one of their votes in the project raises ``HistoryInputError``."""
    history = history or HistoryFilter()
    votes: QuerySet[Vote] = (
        Vote.objects.filter(annotator=annotator, pair__project=project, is_adjudication=False)
        .select_related("pair__prompt")
        .only(
            "id",
            "created_at",
            "side",
            "value",
            "left_is_a",
            "rationale",
            "pair__status",
            "pair__is_gold",
            "pair__consensus_label",
            "pair__prompt__content",
        )
        .order_by("-created_at", "-id")
    )
    if history.since:
        votes = votes.filter(created_at__gte=_day_start(history.since))
    if history.until:
        votes = votes.filter(created_at__lt=_day_start(history.until + timedelta(days=1)))
    if history.before is not None:
        last = (
            Vote.objects.filter(pk=history.before, annotator=annotator, pair__project=project)
            .values_list("created_at", flat=True)
            .first()
        )
        if last is None:
            raise HistoryInputError("before", "not one of your votes in this project")
        # The first condition alone bounds the index walk; the second breaks ties by id.
        votes = votes.filter(
            Q(created_at__lte=last), Q(created_at__lt=last) | Q(id__lt=history.before)
        )
    return votes


def consensus_outcome(vote: Vote, *, project: Project) -> str | None:
    """Whether ``vote`` matched its pair's consensus (``matched``, ``differed``, or ``tie``
    when the consensus was a tie and the vote took a side), or None: the project does not
    show it, or the pair's decision is not final (still collecting votes, disputed, or a gold
    pair, which has no consensus)."""
    pair = vote.pair
    if not project.history_shows_consensus or pair.is_gold:
        return None
    if pair.status != PairStatus.CONSENSUS or not pair.consensus_label:
        return None
    if vote.side == pair.consensus_label:
        return MATCHED
    return TIE if pair.consensus_label == Side.TIE else DIFFERED


def history_rows(votes: Iterable[Vote], *, project: Project) -> list[dict]:
    """Each vote as its annotator gave it: ``id``, ``created_at``, the ``prompt``'s text,
    the on-screen ``choice`` (or likert6 ``value``) with its option's ``label``, the
    ``rationale``, and ``consensus`` (``consensus_outcome``)."""
    rows = []
    for vote in votes:
        shown = on_screen_vote(
            scale=project.scale, left_is_a=vote.left_is_a, side=vote.side, value=vote.value
        )
        rows.append(
            {
                "id": vote.pk,
                "created_at": vote.created_at,
                "prompt": "\n\n".join(text_parts(vote.pair.prompt.content)),
                **shown,
                "label": option_label(project.scale, **shown),
                "rationale": vote.rationale,
                "consensus": consensus_outcome(vote, project=project),
            }
        )
    return rows


def _session(votes: list[tuple[datetime, datetime | None]]) -> dict:
    """One session's figures from its (voted, served) times, oldest first: it starts when
    its first pair was served (or at its first vote) and ends at its last vote."""
    started = votes[0][1] or votes[0][0]
    ended = votes[-1][0]
    hours = (ended - started).total_seconds() / 3600
    return {
        "started_at": started,
        "ended_at": ended,
        "votes": len(votes),
        "votes_per_hour": round(len(votes) / hours, 1) if hours > 0 else None,
    }


def annotator_speed(*, project: Project, annotator) -> dict:
    """The annotator's speed in the project, from their latest ``SPEED_WINDOW_VOTES`` votes:
    ``median_seconds_per_vote`` from the moment each pair was served to them (their lease's
    start, the server's clock) to their vote, over ``timed_votes``; their last
    ``SPEED_SESSIONS`` ``sessions`` (votes less than ``SESSION_GAP`` apart), newest first,
    each with its ``votes_per_hour``, and ``votes_per_hour`` over those sessions together;
    ``votes``: the votes read. One query, a walk of ``vote_annotator_idx`` that stops after
    the window (no count of a long history)."""
    latest = list(
        Vote.objects.filter(annotator=annotator, pair__project=project, is_adjudication=False)
        .order_by("-created_at", "-id")
        .values_list("created_at", "assignment__created_at")[:SPEED_WINDOW_VOTES]
    )
    latest.reverse()
    seconds = [
        (voted - served).total_seconds()
        for voted, served in latest
        if served is not None and served <= voted
    ]
    sessions: list[list[tuple[datetime, datetime | None]]] = []
    for voted, served in latest:
        if not sessions or voted - sessions[-1][-1][0] > SESSION_GAP:
            sessions.append([])
        sessions[-1].append((voted, served))
    shown = [_session(session) for session in sessions[-SPEED_SESSIONS:]]
    shown.reverse()
    timed = [s for s in shown if s["votes_per_hour"] is not None]
    hours = sum((s["ended_at"] - s["started_at"]).total_seconds() for s in timed) / 3600
    return {
        "votes": len(latest),
        "timed_votes": len(seconds),
        "median_seconds_per_vote": round(statistics.median(seconds), 1) if seconds else None,
        "votes_per_hour": round(sum(s["votes"] for s in timed) / hours, 1) if hours else None,
        "sessions": shown,
    }
