"""Reads that are more than a one-line query."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction
from statistics import median
from typing import cast

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    F,
    FloatField,
    Max,
    Min,
    Prefetch,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.expressions import RawSQL
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from annotation.access import get_project_for_user
from annotation.models import (
    GOLD_MIN_VOTES,
    Adjudication,
    AgreementReport,
    Assignment,
    Membership,
    Pair,
    PairRestriction,
    PairStatus,
    PriorAnnotation,
    Project,
    ReportSource,
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


# ---- Curator queue page ----

SKIP_LIST_LIMIT = 100


class _Median(Aggregate):
    """PostgreSQL's continuous median; other databases get the median computed in Python."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def queue_overview(*, project: Project, now=None) -> dict:
    """Pair counts by status (every status listed, zeros included), votes against targets on
    open pairs, and live versus expired leases: two queries."""
    now = now or timezone.now()
    by_status = {
        row["status"]: row
        for row in Pair.objects.filter(project=project)
        .values("status")
        .annotate(
            pairs=Count("id"),
            # Gold pairs take a vote from every annotator: they have no target to reach.
            vote_total=Sum("vote_count", filter=Q(is_gold=False)),
            target=Sum("target_votes", filter=Q(is_gold=False)),
        )
        .order_by()
    }
    statuses = [
        {"status": value, "label": label, "pairs": by_status.get(value, {}).get("pairs", 0)}
        for value, label in PairStatus.choices
    ]
    open_rows = [by_status[s] for s in (PairStatus.QUEUED, PairStatus.ANNOTATING) if s in by_status]
    leases = Assignment.objects.filter(
        pair__project=project, status=Assignment.Status.LIVE
    ).aggregate(
        live=Count("id", filter=Q(expires_at__gt=now)),
        expired=Count("id", filter=Q(expires_at__lte=now)),
        oldest=Min("created_at"),
    )
    return {
        "statuses": statuses,
        "pairs_total": sum(row["pairs"] for row in statuses),
        "open_votes": sum(row["vote_total"] or 0 for row in open_rows),
        "open_target": sum(row["target"] or 0 for row in open_rows),
        "live_leases": leases["live"],
        "expired_leases": leases["expired"],
        "oldest_lease_at": leases["oldest"],
    }


def annotator_throughput(*, project: Project, now=None) -> list[dict]:
    """One row per annotator (members, and anyone who voted or skipped here): votes, votes in
    the last hour, median time per vote, skips and live leases. A fixed number of queries."""
    now = now or timezone.now()
    votes = Vote.objects.filter(pair__project=project).values("annotator_id").order_by()
    vote_aggregates = {
        "votes": Count("id"),
        "last_hour": Count("id", filter=Q(created_at__gte=now - timedelta(hours=1))),
        "last_vote_at": Max("created_at"),
    }
    postgres = connection.vendor == "postgresql"
    if postgres:
        vote_aggregates["median_ms"] = _Median("time_on_task_ms")
    vote_rows = {row["annotator_id"]: row for row in votes.annotate(**vote_aggregates)}
    if not postgres:
        times: dict[int, list[int]] = {}
        for annotator_id, ms in Vote.objects.filter(
            pair__project=project, time_on_task_ms__isnull=False
        ).values_list("annotator_id", "time_on_task_ms"):
            # The filter excludes nulls, which the row type cannot say.
            times.setdefault(annotator_id, []).append(cast(int, ms))
        for annotator_id, row in vote_rows.items():
            row["median_ms"] = median(times[annotator_id]) if annotator_id in times else None
    skips = dict(
        Skip.objects.filter(pair__project=project)
        .values("annotator_id")
        .order_by()
        .annotate(n=Count("id"))
        .values_list("annotator_id", "n")
    )
    leases = dict(
        Assignment.objects.filter(
            pair__project=project, status=Assignment.Status.LIVE, expires_at__gt=now
        )
        .values("annotator_id")
        .order_by()
        .annotate(n=Count("id"))
        .values_list("annotator_id", "n")
    )
    annotator_ids = set(
        Membership.objects.filter(project=project, role=Role.ANNOTATOR).values_list(
            "user_id", flat=True
        )
    )
    annotator_ids |= set(vote_rows) | set(skips)
    users = get_user_model().objects.filter(pk__in=annotator_ids).order_by("username")
    rows = []
    for user in users:
        vote_row = vote_rows.get(user.pk, {})
        median_ms = vote_row.get("median_ms")
        rows.append(
            {
                "annotator": user,
                "votes": vote_row.get("votes", 0),
                "last_hour": vote_row.get("last_hour", 0),
                "median_seconds": None if median_ms is None else round(median_ms / 1000, 1),
                "last_vote_at": vote_row.get("last_vote_at"),
                "skips": skips.get(user.pk, 0),
                "live_leases": leases.get(user.pk, 0),
            }
        )
    return rows


def flagged_skips(*, project: Project, limit: int = SKIP_LIST_LIMIT) -> list[Skip]:
    """The most recent skips (each one flags its pair for curators), newest first."""
    return list(
        Skip.objects.filter(pair__project=project)
        .select_related("pair", "annotator")
        .order_by("-created_at", "-id")[:limit]
    )


def gold_scores(*, project: Project, annotator_ids: list[int] | None = None) -> dict[int, dict]:
    """Per annotator of the project (or of ``annotator_ids``) with gold votes: ``votes`` on
    gold pairs and how many were ``right`` (their side is the gold label), counting only votes
    after their ``gold_judged_since``. One query."""
    judged = Q(annotator__memberships__gold_judged_since__isnull=True) | Q(
        created_at__gte=F("annotator__memberships__gold_judged_since")
    )
    votes = Vote.objects.filter(
        judged,
        annotator__memberships__project=project,
        pair__project=project,
        pair__is_gold=True,
        is_adjudication=False,
    )
    if annotator_ids is not None:
        votes = votes.filter(annotator_id__in=annotator_ids)
    rows = (
        votes.values("annotator_id")
        .order_by()
        .annotate(votes=Count("id"), right=Count("id", filter=Q(side=F("pair__gold_label"))))
    )
    return {row["annotator_id"]: {"votes": row["votes"], "right": row["right"]} for row in rows}


def gold_below_threshold(*, project: Project, right: int, votes: int) -> bool:
    """Whether ``right`` of ``votes`` gold answers fall below the project's threshold, once
    there are ``GOLD_MIN_VOTES``. Compared exactly: 7 of 10 meets 0.7."""
    threshold = Fraction(str(project.gold_min_accuracy))
    return votes >= GOLD_MIN_VOTES and Fraction(right, votes) < threshold


def gold_quality(*, project: Project) -> dict:
    """The queue page's quality control: the open gold pairs, and one row per annotator with
    gold votes or paused (``flagged`` when below the threshold, with the curator's note)."""
    gold_open = Pair.objects.filter(project=project, is_gold=True, status__in=OPEN_STATUSES).count()
    scores = gold_scores(project=project)
    members = {
        m.user_id: m
        for m in Membership.objects.filter(project=project, role=Role.ANNOTATOR)
        .filter(Q(user_id__in=list(scores)) | Q(paused=True))
        .select_related("user")
        .order_by("user__username")
    }
    threshold = f"{project.gold_min_accuracy * 100:g}%"
    rows = []
    for user_id, membership in members.items():
        score = scores.get(user_id, {"votes": 0, "right": 0})
        right, votes = score["right"], score["votes"]
        flagged = gold_below_threshold(project=project, right=right, votes=votes)
        percent = f"{right / votes:.0%}" if votes else "—"
        name = membership.user.get_username()
        note = f"{name}: {right} of {votes} gold pairs right ({percent}) — below {threshold}"
        rows.append(
            {
                "membership": membership,
                "annotator": name,
                "right": right,
                "votes": votes,
                "percent": percent,
                "flagged": flagged,
                "paused": membership.paused,
                "note": note if flagged else "",
            }
        )
    return {"gold_open": gold_open, "threshold": threshold, "annotators": rows}


def upcoming_media_urls(*, project: Project, annotator, exclude_pair_id: int) -> list[str]:
    """Media URLs of the pair ``annotator`` will most likely be served after the current one,
    found without leasing it, so the page can prefetch its images. Sorted by hash: the list
    says nothing about which image belongs to the prompt or to which response. A hint only;
    a wrong guess costs one download."""
    taken = F("vote_count") + F("lease_count")
    nxt = (
        claimable_pairs(project=project, annotator=annotator)
        .exclude(pk=exclude_pair_id)
        .filter(is_gold=False)
        .order_by("-priority", taken.desc(), "id")
        .select_related("prompt", "response_a", "response_b")
        .only("prompt__content", "response_a__content", "response_b__content")
        .first()
    )
    if nxt is None:
        return []
    hashes = {*nxt.prompt.media_hashes, *nxt.response_a.media_hashes, *nxt.response_b.media_hashes}
    return [reverse("media", args=[project.slug, sha256]) for sha256 in sorted(hashes)]


def project_tasks(*, project: Project) -> list[str]:
    """The task slugs used by the project's pairs, for choosing pairs by task."""
    return list(
        Pair.objects.filter(project=project)
        .exclude(task="")
        .values_list("task", flat=True)
        .distinct()
        .order_by("task")
    )


# ---- Annotation queue ----

OPEN_STATUSES = (PairStatus.QUEUED, PairStatus.ANNOTATING)


# Pairs an annotator may claim now: open, with a free slot, not voted on, skipped or leased by
# them (an expired lease another claim is freeing right now keeps the pair out till then), not
# restricted to others. SQL, not the ORM: the claim runs it on every request and the ORM spends
# longer building the query than PostgreSQL takes to run it. Params: claimable_params().
CLAIMABLE_WHERE = f"""
    p.project_id = %s
    AND p.status IN ('{PairStatus.QUEUED}', '{PairStatus.ANNOTATING}')
    AND p.target_votes > (p.vote_count + p.lease_count)
    AND (NOT p.restricted OR EXISTS (
        SELECT 1 FROM {PairRestriction._meta.db_table} r
        WHERE r.pair_id = p.id AND r.annotator_id = %s))
    AND NOT EXISTS (
        SELECT 1 FROM {Vote._meta.db_table} v WHERE v.pair_id = p.id AND v.annotator_id = %s)
    AND NOT EXISTS (
        SELECT 1 FROM {Skip._meta.db_table} s WHERE s.pair_id = p.id AND s.annotator_id = %s)
    AND NOT EXISTS (
        SELECT 1 FROM {Assignment._meta.db_table} a
        WHERE a.pair_id = p.id AND a.annotator_id = %s AND a.status = '{Assignment.Status.LIVE}')
"""


def claimable_params(*, project: Project, annotator) -> list:
    return [project.pk, annotator.pk, annotator.pk, annotator.pk, annotator.pk]


def claimable_pairs(*, project: Project, annotator) -> QuerySet[Pair]:
    """Pairs ``annotator`` may claim now (see ``CLAIMABLE_WHERE``). Unordered: the claim
    orders them along ``pair_claim_idx``."""
    sql = f"SELECT p.id FROM {Pair._meta.db_table} p WHERE {CLAIMABLE_WHERE}"
    return Pair.objects.filter(
        pk__in=RawSQL(sql, claimable_params(project=project, annotator=annotator))
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


# ---- Adjudication ----

ADJUDICATION_PAGE_SIZE = 100


def disputed_pairs(*, project: Project) -> QuerySet[Pair]:
    """The adjudication queue: the project's disputed pairs, longest waiting first."""
    return (
        Pair.objects.filter(project=project, status=PairStatus.DISPUTED)
        .annotate(votes_total=Count("votes", distinct=True))
        .order_by(F("decided_at").asc(nulls_first=True), "id")
    )


def pair_for_adjudication(*, project: Project, pair_id: int) -> Pair:
    """One pair of the project with its content, every vote (with its annotator), its prior
    annotations and its adjudications, newest first; 404 for a pair of another project."""
    pair = (
        Pair.objects.select_related("project", "prompt", "response_a", "response_b")
        .prefetch_related(
            Prefetch("votes", queryset=Vote.objects.select_related("annotator").order_by("pk")),
            "prior_annotations",
            Prefetch(
                "adjudications",
                queryset=Adjudication.objects.select_related("curator").order_by(
                    "-created_at", "-pk"
                ),
            ),
        )
        .filter(project=project, pk=pair_id)
        .first()
    )
    if pair is None:
        raise Http404("No such pair")
    return pair


# ---- Agreement ----


def agreement_report_cached(*, project: Project, source: str) -> AgreementReport | None:
    """The project's cached agreement report over ``source``, or None before the first one
    (``AgreementReport.computed_at`` says how fresh it is)."""
    return AgreementReport.objects.filter(project=project, source=source).first()


ANNOTATOR_VOTES_PAGE_SIZE = 50


def annotator_in_project(*, project: Project, username: str):
    """The user with this username, if they are a member of the project or have voted in it
    (a removed annotator's votes stay); 404 otherwise, so no one learns of other users."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None or not (
        Membership.objects.filter(project=project, user=user).exists()
        or Vote.objects.filter(pair__project=project, annotator=user).exists()
    ):
        raise Http404("No such annotator in this project")
    return user


def annotator_votes(*, project: Project, annotator, before: int | None = None) -> list[Vote]:
    """One page of the annotator's votes in the project, newest first, with their pairs:
    ANNOTATOR_VOTES_PAGE_SIZE of them and one more when an older page follows (keyset on
    the vote id: ``before`` is the last id of the previous page)."""
    votes = Vote.objects.filter(
        pair__project=project, annotator=annotator, is_adjudication=False
    ).select_related("pair")
    if before is not None:
        votes = votes.filter(pk__lt=before)
    return list(votes.order_by("-pk")[: ANNOTATOR_VOTES_PAGE_SIZE + 1])


def report_votes_exceed(*, project: Project, source: str, limit: int) -> bool:
    """Whether an agreement report over ``source`` counts more than ``limit`` votes and prior
    annotations: counted up to the limit only, so the answer stays cheap on a big project."""
    total = 0
    if source != ReportSource.PRIOR:
        votes = Vote.objects.filter(pair__project=project, is_adjudication=False)
        total += votes.values("pk")[: limit + 1].count()
    if source != ReportSource.VOTES:
        priors = PriorAnnotation.objects.filter(pair__project=project, value__isnull=False)
        total += priors.values("pk")[: limit + 1].count()
    return total > limit
