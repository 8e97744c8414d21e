"""Reads that are more than a one-line query."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from statistics import median
from typing import TYPE_CHECKING, cast

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import (
    Aggregate,
    Case,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.expressions import Combinable, RawSQL
from django.db.models.functions import Coalesce, Least
from django.http import Http404
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone

from annotation.access import get_project_for_user
from annotation.json_input import json_loads
from annotation.models import (
    CLAIM_KEY_MODULUS,
    CLAIM_KEY_TEMPLATE,
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
    claim_key,
    claim_walk,
)
from annotation.navigation import project_url
from annotation.prepared import execute_prepared
from annotation.search import search_condition

if TYPE_CHECKING:
    from typing import Any, TypedDict

    from django_stubs_ext import WithAnnotations

    class _BrowseAnnotations(TypedDict):
        sort_value: Any  # the row's sort key (its type depends on the sort)
        skip_count: int  # on the page's rows; neighbour lookups fetch only ids

    # A pair as the browser's keyset query returns it.
    AnnotatedPair = WithAnnotations[Pair, _BrowseAnnotations]


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


# ---- Project Overview ----


def _local_midnight(now):
    return timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)


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
    midnight = _local_midnight(now or timezone.now())
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


# ---- Curator queue page ----

SKIP_LIST_LIMIT = 100
# A median time per vote below this is implausibly short for comparing two responses (unless
# the project sets its own minimum per vote); judged once an annotator has this many votes.
FAST_MEDIAN_SECONDS = 3
FAST_MIN_VOTES = 5


def fast_median_seconds(project: Project) -> int:
    """The median time per vote under which the queue page flags an annotator."""
    return project.min_seconds_per_vote or FAST_MEDIAN_SECONDS


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


def upcoming_media_urls(*, project: Project, annotator, after_pair_id: int) -> list[str]:
    """Media URLs of the pair ``annotator`` will most likely be served after the one they hold
    (``after_pair_id``), found without leasing it, so the page can prefetch its images. Sorted
    by hash: the list says nothing about which image belongs to the prompt or to which
    response. A hint only; a wrong guess (a gold pair comes next) costs one download."""
    params = next_pair_params(
        project=project, annotator=annotator, is_gold=False, cursor=claim_key(after_pair_id)
    )
    with connection.cursor() as cursor:
        sql = f"SELECT {NEXT_PAIR_SQL.format(lock='')}"
        execute_prepared(cursor, "arbiter_next_pair", sql, params)
        (next_id,) = cursor.fetchone()
    if next_id is None:
        return []
    nxt = (
        Pair.objects.select_related("prompt", "response_a", "response_b")
        .only("prompt__content", "response_a__content", "response_b__content")
        .get(pk=next_id)
    )
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


def project_criteria(*, project: Project, limit: int) -> list[str]:
    """Up to ``limit`` distinct criteria of the project's pairs ("" for none among them), for
    choosing pairs by criterion."""
    return list(
        Pair.objects.filter(project=project)
        .values_list("criterion", flat=True)
        .distinct()
        .order_by("criterion")[:limit]
    )


# ---- Annotation queue ----

OPEN_STATUSES = (PairStatus.QUEUED, PairStatus.ANNOTATING)
# Pairs that reached the annotators, whose votes count towards a task's progress.
ANNOTATION_STATUSES = (*OPEN_STATUSES, PairStatus.CONSENSUS, PairStatus.DISPUTED)


# Pairs an annotator may claim now: open, with a free slot, not voted on, skipped or leased by
# them (an expired lease another claim is freeing right now keeps the pair out till then), not
# restricted to others. SQL, not the ORM: the claim runs it on every request and the ORM spends
# longer building the query than PostgreSQL takes to run it. Params: claimable_params().
CLAIMABLE_WHERE = f"""
    p.project_id = %s
    AND p.status IN ('{PairStatus.QUEUED}', '{PairStatus.ANNOTATING}')
    AND p.target_votes > (p.vote_count + p.lease_count)
    AND NOT p.media_pending
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


# Serving order (docs/architecture.md, "Serving order"): the highest priority that has a pair
# the annotator may claim; within it, the first block (``claim_key`` order, the same for
# everyone) at or after the annotator's block that has such a pair, wrapping round to the
# lowest; within that block, the pair first in the annotator's own order (``claim_rank``). So
# the annotators work through the same blocks together, and a block's pairs get their votes
# and finish while it is served, but each annotator meets a block's pairs in an order of their
# own, so neither a pair's place in a session nor the pair before it lines up across its votes.
# Finding the block is index lookups on ``pair_claim_idx`` (project, is_gold, priority desc,
# block key) that stop at the first claimable entry, from the annotator's block on, so blocks
# they finished are not walked again; the block's pairs are then at most CLAIM_BLOCK_PAIRS
# entries of the same index, ranked. ``{lock}``: the claim's row lock, on the pair taken.
# Params: ``next_pair_params()``.
CLAIM_KEY_SQL = CLAIM_KEY_TEMPLATE % {"expressions": "p.id"}
CLAIM_RANK_SQL = f"(((p.id %% {CLAIM_KEY_MODULUS}) * %s + %s) %% {CLAIM_KEY_MODULUS})"
_CLAIMABLE_NOW = f"{CLAIMABLE_WHERE} AND p.is_gold = %s"
_IN_TOP_PRIORITY = f"""{_CLAIMABLE_NOW} AND p.priority = (
        SELECT p.priority FROM {Pair._meta.db_table} p
        WHERE {_CLAIMABLE_NOW} ORDER BY p.priority DESC LIMIT 1)"""
_BLOCK_FROM_CURSOR = f"""COALESCE(
    (SELECT {CLAIM_KEY_SQL} FROM {Pair._meta.db_table} p
     WHERE {_IN_TOP_PRIORITY} AND {CLAIM_KEY_SQL} >= %s ORDER BY {CLAIM_KEY_SQL} LIMIT 1),
    (SELECT {CLAIM_KEY_SQL} FROM {Pair._meta.db_table} p
     WHERE {_IN_TOP_PRIORITY} ORDER BY {CLAIM_KEY_SQL} LIMIT 1))"""
NEXT_PAIR_SQL = f"""(SELECT p.id FROM {Pair._meta.db_table} p
    WHERE {_IN_TOP_PRIORITY} AND {CLAIM_KEY_SQL} = {_BLOCK_FROM_CURSOR}
    ORDER BY {CLAIM_RANK_SQL} LIMIT 1 {{lock}})"""


def next_pair_params(*, project: Project, annotator, is_gold: bool, cursor: int) -> list:
    """``NEXT_PAIR_SQL``'s params: the annotator's next pair from the block ``cursor`` (a
    ``claim_key``) on."""
    claimable = [*claimable_params(project=project, annotator=annotator), is_gold]
    top_priority = [*claimable, *claimable]
    block = [*top_priority, cursor, *top_priority]
    return [*top_priority, *block, *claim_walk(annotator.pk)]


def claimable_pairs(*, project: Project, annotator) -> QuerySet[Pair]:
    """Pairs ``annotator`` may claim now (see ``CLAIMABLE_WHERE``). Unordered: the claim
    takes them in serving order (``NEXT_PAIR_SQL``)."""
    sql = f"SELECT p.id FROM {Pair._meta.db_table} p WHERE {CLAIMABLE_WHERE}"
    return Pair.objects.filter(
        pk__in=RawSQL(sql, claimable_params(project=project, annotator=annotator))
    )


# Who may still give a pair a vote, seen from the pair (the mirror of CLAIMABLE_WHERE): an
# annotator of its project (``m``, a membership row), not paused, who has neither voted on the
# pair (``p``) nor skipped it, and to whom it is not restricted away. A dispute none of them
# can answer goes to adjudication (``annotation.services.consensus.disputes_settle``).
FREE_ANNOTATOR_WHERE = f"""
    m.project_id = p.project_id AND m.role = '{Role.ANNOTATOR}' AND NOT m.paused
    AND (NOT p.restricted OR EXISTS (
        SELECT 1 FROM {PairRestriction._meta.db_table} r
        WHERE r.pair_id = p.id AND r.annotator_id = m.user_id))
    AND NOT EXISTS (
        SELECT 1 FROM {Vote._meta.db_table} v WHERE v.pair_id = p.id AND v.annotator_id = m.user_id)
    AND NOT EXISTS (
        SELECT 1 FROM {Skip._meta.db_table} s WHERE s.pair_id = p.id AND s.annotator_id = m.user_id)
"""
# Pair ids per query of the annotators left on pairs (SQLite's limit on parameters).
_FREE_BATCH = 500


def free_annotators(*, pair_ids: Iterable[int], names: bool = False) -> dict[int, list[str]]:
    """Per pair among ``pair_ids`` that some annotator may still vote on, those annotators'
    usernames (``names``; else an empty list: only which pairs have one). A pair nobody can
    answer is absent."""
    ids = list(pair_ids)
    found: dict[int, list[str]] = {}
    user_table = get_user_model()._meta.db_table
    for start in range(0, len(ids), _FREE_BATCH):
        batch = ids[start : start + _FREE_BATCH]
        marks = ", ".join(["%s"] * len(batch))
        if names:
            sql = f"""SELECT p.id, u.username FROM {Pair._meta.db_table} p
                JOIN {Membership._meta.db_table} m ON m.project_id = p.project_id
                JOIN {user_table} u ON u.id = m.user_id
                WHERE p.id IN ({marks}) AND {FREE_ANNOTATOR_WHERE} ORDER BY p.id, u.username"""
        else:
            sql = f"""SELECT p.id, NULL FROM {Pair._meta.db_table} p WHERE p.id IN ({marks})
                AND EXISTS (SELECT 1 FROM {Membership._meta.db_table} m
                            WHERE {FREE_ANNOTATOR_WHERE})"""
        with connection.cursor() as cursor:
            cursor.execute(sql, batch)
            for pair_id, username in cursor.fetchall():
                found.setdefault(pair_id, [])
                if username is not None:
                    found[pair_id].append(username)
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
    midnight = _local_midnight(now)
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


# ---- Pairs browser ----

# Page sizes a curator may pick, and the default one.
PAIR_PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAIR_PAGE_SIZE = 50
# Sort keys the browser offers (a whitelist: no other column can be sorted on). Each sorts on
# (key, id), so every row has a unique place and a keyset cursor never skips or repeats one.
# Statuses sort in lifecycle order; pairs without an ensemble agreement sort lowest.
_STATUS_ORDER = Case(
    *(When(status=value, then=Value(rank)) for rank, value in enumerate(PairStatus.values)),
    output_field=IntegerField(),
)


@dataclass(frozen=True)
class PairSort:
    label: str
    expression: Combinable
    key_type: type | tuple[type, ...]  # what a cursor's key must be for this sort


PAIR_SORTS: dict[str, PairSort] = {
    "id": PairSort("Import order", F("id"), int),
    "external_id": PairSort("Pair id", F("external_id"), str),
    "status": PairSort("Status", _STATUS_ORDER, int),
    "task": PairSort("Task", F("task"), str),
    "votes": PairSort("Votes", F("vote_count"), int),
    "agreement": PairSort(
        "Ensemble agreement", Coalesce(F("ensemble_agreement"), Value(-1.0)), (int, float)
    ),
    "priority": PairSort("Priority", F("priority"), int),
}
DEFAULT_PAIR_SORT = "id"
# A label filter's value for "no label yet".
NO_LABEL = "none"


@dataclass(frozen=True)
class PairFilters:
    """What the pairs browser shows: every field optional (None or empty: no filter)."""

    q: str = ""
    statuses: tuple[str, ...] = ()
    task: str = ""
    has_criterion: bool | None = None
    votes_min: int | None = None
    votes_max: int | None = None
    ensemble_label: str = ""  # A, B, tie, or NO_LABEL
    agreement_min: float | None = None
    agreement_max: float | None = None
    consensus_label: str = ""  # A, B, tie, or NO_LABEL
    is_gold: bool | None = None
    skipped: bool | None = None
    sort: str = DEFAULT_PAIR_SORT
    descending: bool = False


@dataclass(frozen=True)
class PairRow:
    pair: Pair
    skip_count: int
    thumbnails: list[str]  # media URLs: the first image of the prompt and of each response


@dataclass
class PairPage:
    rows: list[PairRow]
    next_cursor: str | None
    prev_cursor: str | None
    counts: dict[str, int]  # pairs per status matching every filter but the status one
    total: int  # pairs matching every filter


def _search_filter(text: str) -> Q:
    """Pairs with every word of ``text`` in their id, prompt text or model names (PostgreSQL:
    words starting with them, through the GIN index on ``search_words``; elsewhere: words
    containing them), or whose id is ``text`` exactly (docs/curators.md)."""
    exact = Q(external_id=text)
    words = search_condition(text=text, vendor=connection.vendor)
    return exact if words is None else exact | words


def _label_filter(field: str, label: str) -> Q:
    return Q(**{field: "" if label == NO_LABEL else label})


def _filter_q(filters: PairFilters) -> Q:
    """Every filter but the status one, as one condition."""
    q = Q()
    if filters.q:
        q &= _search_filter(filters.q)
    if filters.task:
        q &= Q(task=filters.task)
    if filters.has_criterion is not None:
        q &= ~Q(criterion="") if filters.has_criterion else Q(criterion="")
    if filters.votes_min is not None:
        q &= Q(vote_count__gte=filters.votes_min)
    if filters.votes_max is not None:
        q &= Q(vote_count__lte=filters.votes_max)
    if filters.ensemble_label:
        q &= _label_filter("ensemble_label", filters.ensemble_label)
    if filters.agreement_min is not None:
        q &= Q(ensemble_agreement__gte=filters.agreement_min)
    if filters.agreement_max is not None:
        q &= Q(ensemble_agreement__lte=filters.agreement_max)
    if filters.consensus_label:
        q &= _label_filter("consensus_label", filters.consensus_label)
    if filters.is_gold is not None:
        q &= Q(is_gold=filters.is_gold)
    if filters.skipped is not None:
        skipped = Exists(Skip.objects.filter(pair_id=OuterRef("pk")))
        q &= Q(skipped) if filters.skipped else ~Q(skipped)
    return q


def pairs_matching(*, project: Project, filters: PairFilters) -> QuerySet[Pair]:
    """The project's pairs that pass every filter, unordered."""
    pairs = Pair.objects.filter(project=project).filter(_filter_q(filters))
    if filters.statuses:
        pairs = pairs.filter(status__in=filters.statuses)
    return pairs


def cursor_encode(key, pair_id: int) -> str:
    """A keyset cursor: the sort key and id of the row a page starts after (or ends before)."""
    raw = json.dumps([key, pair_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_decode(cursor: str, *, sort: str) -> tuple[object, int]:
    """(key, id) of a cursor for ``sort``; ValueError for anything ``cursor_encode`` did not
    make for it."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key, pair_id = json_loads(raw)  # JsonRefused is a ValueError
    except (ValueError, TypeError) as exc:
        raise ValueError("not a page cursor") from exc
    if (
        isinstance(key, bool)
        or not isinstance(key, PAIR_SORTS[sort].key_type)
        or isinstance(pair_id, bool)
        or not isinstance(pair_id, int)
    ):
        raise ValueError("not a page cursor")
    return key, pair_id


def _keyset(
    pairs: QuerySet[Pair], *, filters: PairFilters, cursor: str | None, forward: bool
) -> QuerySet[Pair]:
    """``pairs`` with their ``sort_value``, after the cursor (or, not ``forward``, before it),
    in the order to read them from it."""
    ascending = forward != filters.descending
    pairs = pairs.alias(sort_key=PAIR_SORTS[filters.sort].expression).annotate(
        sort_value=F("sort_key")
    )
    if cursor is not None:
        key, pair_id = cursor_decode(cursor, sort=filters.sort)
        if ascending:
            pairs = pairs.filter(Q(sort_key__gt=key) | Q(sort_key=key, id__gt=pair_id))
        else:
            pairs = pairs.filter(Q(sort_key__lt=key) | Q(sort_key=key, id__lt=pair_id))
    return pairs.order_by(*(("sort_key", "id") if ascending else ("-sort_key", "-id")))


def _keyset_rows(
    pairs: QuerySet[Pair], *, filters: PairFilters, cursor: str | None, forward: bool, limit: int
) -> list[AnnotatedPair]:
    """Up to ``limit`` rows of ``pairs`` in the filters' sort order, after the cursor (or,
    not ``forward``, before it), returned in page order. The rows are picked by their ids
    first, so that sorting many matching pairs (a common word, a sort no index serves) keeps
    ``limit`` narrow rows in memory rather than every matching row with all it shows."""
    ids = _keyset(pairs, filters=filters, cursor=cursor, forward=forward).values("pk")[:limit]
    page = _keyset(
        _page_rows(Pair.objects.filter(pk__in=ids)), filters=filters, cursor=None, forward=forward
    )
    # The page's query also carries skip_count (_page_rows): the stubs lose it across calls.
    rows = cast("list[AnnotatedPair]", list(page))
    return rows if forward else rows[::-1]


def _page_rows(pairs: QuerySet[Pair]) -> QuerySet[Pair]:
    """What a row of the table needs, in the one query that fetches the page."""
    skips = (
        Skip.objects.filter(pair_id=OuterRef("pk"))
        .order_by()
        .values("pair_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    return (
        pairs.select_related("prompt", "response_a", "response_b")
        .defer("metadata", "ensemble_summary", "search_words", "prompt__metadata")
        .annotate(skip_count=Coalesce(Subquery(skips, output_field=IntegerField()), 0))
    )


def _first_image_url(project: Project, hashes: list[str]) -> str | None:
    return reverse("media", args=[project.slug, hashes[0]]) if hashes else None


def pairs_browse(
    *,
    project: Project,
    filters: PairFilters,
    after: str | None = None,
    before: str | None = None,
    limit: int = DEFAULT_PAIR_PAGE_SIZE,
) -> PairPage:
    """One page of the pairs browser: ``limit`` rows after the ``after`` cursor (or before
    ``before``), each with ``skip_count`` and ``thumbnails`` (the first image of the prompt and
    of each response), the cursors of the pages around it, and the counts per status. Two
    queries, whatever the page size or depth. Raises ValueError for a cursor it did not make."""
    forward = before is None
    cursor = after if forward else before
    rows = _keyset_rows(
        pairs_matching(project=project, filters=filters),
        filters=filters,
        cursor=cursor,
        forward=forward,
        limit=limit + 1,
    )
    more = len(rows) > limit
    if more:
        rows = rows[:limit] if forward else rows[1:]
    page_rows = [
        PairRow(
            pair=row,
            skip_count=row.skip_count,
            thumbnails=[
                url
                for content in (row.prompt, row.response_a, row.response_b)
                if (url := _first_image_url(project, content.media_hashes))
            ],
        )
        for row in rows
    ]
    first, last = (rows[0], rows[-1]) if rows else (None, None)
    has_next = more if forward else cursor is not None
    has_prev = cursor is not None if forward else more
    counts = dict(
        Pair.objects.filter(project=project)
        .filter(_filter_q(filters))
        .values("status")
        .order_by()
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    shown = filters.statuses or tuple(counts)
    return PairPage(
        rows=page_rows,
        next_cursor=cursor_encode(last.sort_value, last.pk) if has_next and last else None,
        prev_cursor=cursor_encode(first.sort_value, first.pk) if has_prev and first else None,
        counts={value: counts.get(value, 0) for value in PairStatus.values},
        total=sum(counts.get(value, 0) for value in shown),
    )


def pair_neighbours(
    *, project: Project, filters: PairFilters, pair: Pair
) -> tuple[int | None, int | None]:
    """The ids of the pairs before and after ``pair`` in the browser's order under
    ``filters`` (None at either end). Three small queries."""
    expression = PAIR_SORTS[filters.sort].expression
    key = Pair.objects.filter(pk=pair.pk).annotate(k=expression).values_list("k", flat=True)[0]
    cursor = cursor_encode(key, pair.pk)
    matching = pairs_matching(project=project, filters=filters)

    def neighbour(forward: bool) -> int | None:
        ordered = _keyset(matching, filters=filters, cursor=cursor, forward=forward)
        return next(iter(ordered.values_list("pk", flat=True)[:1]), None)

    return neighbour(False), neighbour(True)


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
