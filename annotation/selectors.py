"""Reads that are more than a one-line query."""

from __future__ import annotations

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from annotation.access import get_project_for_user
from annotation.models import (
    Assignment,
    Membership,
    Pair,
    PairRestriction,
    PairStatus,
    Project,
    Role,
    Skip,
    Vote,
)


def projects_for_user(user) -> list[dict]:
    """The user's projects with their role and pair counts, one query."""
    memberships = (
        Membership.objects.filter(user=user)
        .select_related("project")
        .annotate(
            pairs_total=Count("project__pairs"),
            pairs_open=Count(
                "project__pairs",
                filter=Q(project__pairs__status__in=[PairStatus.QUEUED, PairStatus.ANNOTATING]),
            ),
        )
        .order_by("project__name")
    )
    rows = [
        {
            "project": m.project,
            "role": m.role,
            "pairs_total": m.pairs_total,
            "pairs_open": m.pairs_open,
        }
        for m in memberships
    ]
    if user.is_superuser:
        member_of = {row["project"].pk for row in rows}
        others = Project.objects.exclude(pk__in=member_of).annotate(
            pairs_total=Count("pairs"),
            pairs_open=Count(
                "pairs", filter=Q(pairs__status__in=[PairStatus.QUEUED, PairStatus.ANNOTATING])
            ),
        )
        rows += [
            {
                "project": p,
                "role": "curator",
                "pairs_total": p.pairs_total,
                "pairs_open": p.pairs_open,
            }
            for p in others
        ]
    return rows


# ---- Annotation queue ----

OPEN_STATUSES = (PairStatus.QUEUED, PairStatus.ANNOTATING)


def claimable_pairs(*, project: Project, annotator) -> QuerySet[Pair]:
    """Pairs ``annotator`` may claim now: open, with a free slot, not voted on, skipped or
    leased by them, not restricted to others. Unordered: the claim orders it along
    ``pair_claim_idx``."""
    taken = F("vote_count") + F("lease_count")
    mine = {"pair": OuterRef("pk"), "annotator": annotator}
    return (
        Pair.objects.filter(project=project, status__in=OPEN_STATUSES, target_votes__gt=taken)
        .filter(Q(restricted=False) | Exists(PairRestriction.objects.filter(**mine)))
        .exclude(Exists(Vote.objects.filter(**mine)))
        .exclude(Exists(Skip.objects.filter(**mine)))
        # Their expired lease that another claim is freeing right now: skip the pair till then.
        .exclude(Exists(Assignment.objects.filter(status=Assignment.Status.LIVE, **mine)))
    )


def live_assignments(*, project: Project, annotator, now=None) -> QuerySet[Assignment]:
    """The annotator's unexpired leases on open pairs of the project, newest lease first."""
    return Assignment.objects.filter(
        annotator=annotator,
        status=Assignment.Status.LIVE,
        expires_at__gt=now or timezone.now(),
        pair__project=project,
        pair__status__in=OPEN_STATUSES,
    ).order_by("-expires_at", "-pk")


def annotator_progress(*, project: Project, annotator, now=None) -> dict:
    """The comparison page's progress: votes ``done_today`` (since local midnight) and
    ``done_total``, and the pairs ``left`` for this annotator now. Three queries."""
    now = now or timezone.now()
    midnight = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    done = Vote.objects.filter(pair__project=project, annotator=annotator).aggregate(
        done_total=Count("id"), done_today=Count("id", filter=Q(created_at__gte=midnight))
    )
    held = live_assignments(project=project, annotator=annotator, now=now).count()
    left = claimable_pairs(project=project, annotator=annotator).count() + held
    return {"done_today": done["done_today"], "done_total": done["done_total"], "left": left}


def assignment_for_annotator(*, user, assignment_id: int) -> Assignment:
    """The user's own assignment, with its pair and project: 404 for anyone else's, and the
    project's access check (outsiders 404, members who no longer annotate 403)."""
    assignment = None
    if user.is_authenticated:
        assignment = (
            Assignment.objects.select_related("pair__project")
            .filter(pk=assignment_id, annotator=user)
            .first()
        )
    if assignment is None:
        raise Http404("No such assignment")
    get_project_for_user(user, assignment.pair.project.slug, roles=(Role.ANNOTATOR,))
    return assignment
