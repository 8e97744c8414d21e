"""Reads of the queue: where it stands for its curators (throughput, skips, gold scores,
disputes waiting for an extra vote) and for one annotator (live leases, progress, what comes
next)."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    F,
    FloatField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
)
from django.http import Http404
from django.utils import timezone

from annotation.core.claim_key import claim_key
from annotation.core.media_keys import media_path
from annotation.core.prepared import execute_prepared
from annotation.decisions.selectors import free_annotators
from annotation.models import (
    GOLD_MIN_VOTES,
    Assignment,
    Media,
    Membership,
    Pair,
    PairStatus,
    Project,
    Role,
    Skip,
    Vote,
)
from annotation.queue.serving import (
    NEXT_PAIR_SQL,
    OPEN_STATUSES,
    claimable_pairs,
    next_pair_params,
)
from annotation.queue.statements import assignment_with_role


def local_midnight(now):
    return timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)


SKIP_LIST_LIMIT = 100
# A median time per vote below this is implausibly short for comparing two responses (unless
# the project sets its own minimum per vote); judged once an annotator has this many votes.
FAST_MEDIAN_SECONDS = 3
FAST_MIN_VOTES = 5


def fast_median_seconds(project: Project) -> int:
    """The median time per vote under which the queue page flags an annotator."""
    return project.min_seconds_per_vote or FAST_MEDIAN_SECONDS


class _Median(Aggregate):
    """PostgreSQL's continuous median."""

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
            waiting=Count("id", filter=WAITING_DISPUTE),
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
        "disputes_waiting": sum(row["waiting"] for row in open_rows),
        "disputed": by_status.get(PairStatus.DISPUTED, {}).get("pairs", 0),
        "live_leases": leases["live"],
        "expired_leases": leases["expired"],
        "oldest_lease_at": leases["oldest"],
    }


def annotator_throughput(*, project: Project, now=None) -> list[dict]:
    """One row per annotator (members, and anyone who voted or skipped here): votes, votes in
    the last hour, median time per vote (``too_fast`` when implausibly short:
    ``fast_median_seconds``), skips and live leases. A fixed number of queries."""
    now = now or timezone.now()
    votes = Vote.objects.filter(pair__project=project).values("annotator_id").order_by()
    vote_aggregates = {
        "votes": Count("id"),
        "last_hour": Count("id", filter=Q(created_at__gte=now - timedelta(hours=1))),
        "last_vote_at": Max("created_at"),
    }
    vote_aggregates["median_ms"] = _Median("time_on_task_ms")
    vote_rows = {row["annotator_id"]: row for row in votes.annotate(**vote_aggregates)}
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
        vote_total = vote_row.get("votes", 0)
        rows.append(
            {
                "annotator": user,
                "votes": vote_total,
                "last_hour": vote_row.get("last_hour", 0),
                "median_seconds": None if median_ms is None else round(median_ms / 1000, 1),
                "too_fast": median_ms is not None
                and vote_total >= FAST_MIN_VOTES
                and median_ms < fast_median_seconds(project) * 1000,
                "fast_below_seconds": fast_median_seconds(project),
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
    ).exclude(pair__status=PairStatus.EXCLUDED)
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


def upcoming_media_urls(*, project: Project, annotator, after_pair_id: int) -> dict[str, list[str]]:
    """Media URLs of the pair ``annotator`` will most likely be served after the one they hold
    (``after_pair_id``), found without leasing it, so the page can prefetch them: ``images``
    (with the videos' poster frames), ``video`` and ``audio``. Each sorted by URL: nothing
    says which file belongs to the prompt or to which response. A hint only; a wrong guess
    (a gold pair comes next) costs one download."""
    found: dict[str, list[str]] = {"images": [], "video": [], "audio": []}
    params = next_pair_params(
        project=project, annotator=annotator, is_gold=False, cursor=claim_key(after_pair_id)
    )
    with connection.cursor() as cursor:
        sql = f"SELECT {NEXT_PAIR_SQL.format(lock='')}"
        execute_prepared(cursor, "arbiter_next_pair", sql, params)
        (next_id,) = cursor.fetchone()
    if next_id is None:
        return found
    nxt = (
        Pair.objects.select_related("prompt", "response_a", "response_b")
        .only("prompt__content", "response_a__content", "response_b__content")
        .get(pk=next_id)
    )
    contents = [nxt.prompt.content, nxt.response_a.content, nxt.response_b.content]
    hashes: dict[str, set[str]] = {kind: set() for kind in ("image", "video", "audio")}
    for part in (part for content in contents for part in content):
        if part["type"] in hashes:
            hashes[part["type"]].add(part["media"])
    if hashes["video"]:
        posters = Media.objects.filter(sha256__in=hashes["video"], poster_sha256__isnull=False)
        hashes["image"].update(
            sha for sha in posters.values_list("poster_sha256", flat=True) if sha
        )
    for kind, key in (("image", "images"), ("video", "video"), ("audio", "audio")):
        found[key] = sorted(media_path(slug=project.slug, sha256=sha) for sha in hashes[kind])
    return found


# Disputes listed on the Queue page.
WAITING_DISPUTES_LIMIT = 50
# A dispute back with the annotators for an extra vote (counted by the overviews).
WAITING_DISPUTE = Q(is_gold=False, extra_slots__gt=0, status__in=OPEN_STATUSES)


def disputes_waiting(*, project: Project, limit: int = WAITING_DISPUTES_LIMIT) -> list[dict]:
    """Disputes back with the annotators for an extra vote, oldest first: each pair (votes,
    target, leases) with the annotators who may still give that vote (a pair with none goes
    to adjudication, unless a live lease holds its slot). Two queries, one when none waits."""
    pairs = list(
        Pair.objects.filter(WAITING_DISPUTE, project=project)
        .order_by("updated_at", "pk")
        .only(
            "pk",
            "external_id",
            "task",
            "dispute_reason",
            "vote_count",
            "target_votes",
            "lease_count",
            "extra_slots",
        )[:limit]
    )
    who = free_annotators(pair_ids=[pair.pk for pair in pairs], names=True) if pairs else {}
    return [{"pair": pair, "annotators": who.get(pair.pk, [])} for pair in pairs]


def live_assignments(*, project: Project, annotator, now=None) -> QuerySet[Assignment]:
    """The annotator's unexpired leases on open pairs of the project, newest lease first, a
    lease claimed ahead after those on screen."""
    return Assignment.objects.filter(
        annotator=annotator,
        status=Assignment.Status.LIVE,
        expires_at__gt=now or timezone.now(),
        pair__project=project,
        pair__status__in=OPEN_STATUSES,
    ).order_by("ahead", "-expires_at", "-pk")


def annotator_progress(*, project: Project, annotator, now=None) -> dict:
    """The comparison page's progress: votes ``done_today`` (since local midnight) and
    ``done_total``, and the pairs ``left`` for this annotator now. Three queries."""
    now = now or timezone.now()
    midnight = local_midnight(now)
    done = Vote.objects.filter(pair__project=project, annotator=annotator).aggregate(
        done_total=Count("id"), done_today=Count("id", filter=Q(created_at__gte=midnight))
    )
    left = pairs_left(project=project, annotator=annotator, now=now)
    return {"done_today": done["done_today"], "done_total": done["done_total"], "left": left}


def pairs_left(*, project: Project, annotator, now=None) -> int:
    """The pairs ``annotator`` may still vote on now: those they hold and those they may
    claim. Two queries."""
    held = live_assignments(project=project, annotator=annotator, now=now).count()
    return claimable_pairs(project=project, annotator=annotator).count() + held


def assignment_for_annotator(*, user, assignment_id: int) -> Assignment:
    """The user's own assignment, with its pair and project: 404 for anyone else's, and the
    project's access check (outsiders 404, members who no longer annotate 403)."""
    if not user.is_authenticated:
        raise Http404("No such assignment")
    try:
        assignment, role = assignment_with_role(assignment_id=assignment_id, user_id=user.pk)
    except Assignment.DoesNotExist:
        raise Http404("No such assignment") from None
    return assignment_access_checked(assignment, role=role, user=user)


def assignment_access_checked(assignment: Assignment | None, *, role: str | None, user):
    """``assignment`` (the user's, read with their ``role`` in its project) past the
    project's access check: ``get_project_for_user(..., roles=(ANNOTATOR,))`` on the role
    read with it. None (not theirs) is 404; members who no longer annotate get 403;
    superusers act as curators everywhere."""
    if assignment is None:
        raise Http404("No such assignment")
    if role != Role.ANNOTATOR and not user.is_superuser:
        if role is None:
            raise Http404("No such project")
        raise PermissionDenied("Your role in this project does not allow this")
    return assignment
