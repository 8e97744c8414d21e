"""Reads that are more than a one-line query."""

from __future__ import annotations

from django.db.models import Count, Q

from annotation.models import Membership, PairStatus, Project


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
