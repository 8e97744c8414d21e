"""Reads of projects: the projects a user sees, a project's overview and next steps, its tasks
and criteria."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import (
    Count,
    Q,
    Sum,
)
from django.db.models.functions import Least
from django.template.defaultfilters import pluralize
from django.utils import timezone

from annotation.core.navigation import project_url
from annotation.models import (
    Membership,
    Pair,
    PairStatus,
    Project,
    Role,
    Vote,
)
from annotation.queue.selectors import WAITING_DISPUTE, local_midnight, pairs_left
from annotation.queue.serving import ANNOTATION_STATUSES, OPEN_STATUSES


def projects_for_user(user) -> list[dict]:
    """The user's projects with their role; staff rows carry the project's pair counts,
    annotator rows only the pairs ``left`` for the user (annotators see no project totals).
    One query, plus one per project the user annotates."""
    memberships = (
        Membership.objects.filter(user=user)
        .select_related("project")
        .annotate(
            pairs_total=Count("project__pairs"),
            pairs_open=Count("project__pairs", filter=Q(project__pairs__status__in=OPEN_STATUSES)),
        )
        .order_by("project__name")
    )
    rows: list[dict] = []
    for m in memberships:
        if m.role == Role.ANNOTATOR:
            left = pairs_left(project=m.project, annotator=user)
            rows.append({"project": m.project, "role": m.role, "left": left})
        else:
            rows.append(
                {
                    "project": m.project,
                    "role": m.role,
                    "pairs_total": m.pairs_total,
                    "pairs_open": m.pairs_open,
                }
            )
    if user.is_superuser:
        member_of = {row["project"].pk for row in rows}
        others = Project.objects.exclude(pk__in=member_of).annotate(
            pairs_total=Count("pairs"),
            pairs_open=Count("pairs", filter=Q(pairs__status__in=OPEN_STATUSES)),
        )
        rows += [
            {
                "project": p,
                "role": Role.CURATOR,
                "pairs_total": p.pairs_total,
                "pairs_open": p.pairs_open,
            }
            for p in others
        ]
    return rows


def project_overview(*, project: Project, now=None) -> dict:
    """The Overview for curators and researchers: pairs by status (every status, zeros
    included), per task its pairs, decided pairs and votes against targets (gold pairs take a
    vote from everyone and have no target), the disputes back with the annotators, and the
    votes cast today. Two queries."""
    rows = (
        Pair.objects.filter(project=project)
        .values("task", "status")
        .annotate(
            pairs=Count("id"),
            # A pair's votes past its target (a late vote after lease expiry) add no progress.
            votes_in=Sum(Least("vote_count", "target_votes"), filter=Q(is_gold=False)),
            target=Sum("target_votes", filter=Q(is_gold=False)),
            waiting=Count("id", filter=WAITING_DISPUTE),
        )
        .order_by()
    )
    by_status: dict[str, int] = {}
    waiting = 0
    tasks: dict[str, dict] = {}
    for row in rows:
        by_status[row["status"]] = by_status.get(row["status"], 0) + row["pairs"]
        waiting += row["waiting"]
        task = tasks.setdefault(
            row["task"], {"task": row["task"], "pairs": 0, "decided": 0, "votes": 0, "target": 0}
        )
        task["pairs"] += row["pairs"]
        if row["status"] == PairStatus.CONSENSUS:
            task["decided"] += row["pairs"]
        if row["status"] in ANNOTATION_STATUSES:
            task["votes"] += row["votes_in"] or 0
            task["target"] += row["target"] or 0
    midnight = local_midnight(now or timezone.now())
    votes_today = Vote.objects.filter(
        pair__project=project, created_at__gte=midnight, is_adjudication=False
    ).count()
    return {
        "statuses": [
            {"status": value, "label": label, "pairs": by_status.get(value, 0)}
            for value, label in PairStatus.choices
        ],
        "by_status": by_status,
        "pairs_total": sum(by_status.values()),
        "tasks": [tasks[name] for name in sorted(tasks)],
        "votes_today": votes_today,
        "disputes_waiting": waiting,
    }


def _pairs(count: int) -> str:
    return f"{count} pair{pluralize(count)}"


def _disputes(count: int) -> str:
    return f"{count} dispute{pluralize(count)}"


def _step(text: str, *links: tuple[str, str | None]) -> dict:
    """A next step: what waits, and the links (label, URL) to act on it, of pages that exist."""
    return {"text": text, "links": [{"label": label, "url": url} for label, url in links if url]}


def overview_next_steps(
    *,
    project: Project,
    role: str,
    by_status: dict[str, int],
    disputes_waiting: int = 0,
    waiting_for: Iterable[str] = (),
) -> list[dict]:
    """What to do next, from the pairs' statuses: one step per kind of waiting work, most
    urgent first; links for curators, who can act on them. ``disputes_waiting`` disputes are
    back with the annotators, for an extra vote from ``waiting_for``."""
    curator = role == Role.CURATOR

    def link(label: str, url_name: str, fragment: str = "") -> tuple[str, str | None]:
        url = project_url(url_name, project.slug) if curator else None
        return label, url and url + fragment

    def count(status: str) -> int:
        return by_status.get(status, 0)

    steps = []
    if not by_status:
        steps.append(_step("No pairs yet", link("import some", "imports")))
    if count(PairStatus.JUDGING):
        pairs = _pairs(count(PairStatus.JUDGING))
        steps.append(_step(f"{pairs} with the judges", link("follow the run", "judges:runs")))
    if count(PairStatus.IMPORTED):
        pairs = _pairs(count(PairStatus.IMPORTED))
        steps.append(
            _step(
                f"{pairs} imported",
                link("run the judges", "judges:runs"),
                link("enqueue", "curator-queue", "#controls-heading"),
            )
        )
    if count(PairStatus.DISPUTED):
        pairs = _pairs(count(PairStatus.DISPUTED))
        steps.append(_step(f"{pairs} disputed", link("adjudicate", "adjudication")))
    if disputes_waiting:
        names = sorted(set(waiting_for))
        who = f"from {', '.join(names)}" if names else "from the annotators holding their leases"
        steps.append(
            _step(
                f"{_disputes(disputes_waiting)} waiting for an extra vote {who}",
                link("see which", "curator-queue", "#disputes-heading"),
            )
        )
    open_pairs = sum(count(status) for status in OPEN_STATUSES)
    if open_pairs:
        steps.append(
            _step(
                f"{_pairs(open_pairs)} with the annotators",
                link("watch the queue", "curator-queue"),
            )
        )
    if by_status and not steps:
        steps.append(_step("Every pair is decided"))
    return steps
