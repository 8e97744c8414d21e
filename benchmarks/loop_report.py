"""The annotator-loop benchmarks' figures, printed the same way for every run
(``annotator_load.py``, ``pgbouncer_load.py``): latencies, CPU a vote, the statements a call
runs, and the database's audit of what must never happen."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import psutil


@dataclass
class Measured:
    elapsed: float
    claims: list[float]
    votes: list[float]
    errors: list[str]
    ran_dry: bool
    served_by: str
    # CPU seconds: gunicorn, PostgreSQL's backends, the load generator; None with --url.
    cpu: tuple[float, float, float] | None
    other_cpu: dict[str, float]

    @property
    def votes_per_s(self) -> float:
        return len(self.votes) / self.elapsed


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def audit(slug: str) -> dict:
    """What the database says after the run: the invariants the queue promises."""
    from django.db.models import Count, F, Q

    from annotation.models import Assignment, Pair, Vote

    pairs = Pair.objects.filter(project__slug=slug).annotate(
        counted=Count("votes", filter=Q(votes__is_extra=False))
    )
    return {
        "votes": Vote.objects.filter(pair__project__slug=slug).count(),
        "extra_votes": Vote.objects.filter(pair__project__slug=slug, is_extra=True).count(),
        "pairs_over_target": pairs.filter(counted__gt=F("target_votes")).count(),
        "counter_mismatches": pairs.exclude(counted=F("vote_count")).count(),
        "pairs_complete": pairs.filter(counted=F("target_votes")).count(),
        "duplicate_votes": Vote.objects.filter(pair__project__slug=slug)
        .values("pair", "annotator")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count(),
        "live_leases": Assignment.objects.filter(
            pair__project__slug=slug, status=Assignment.Status.LIVE
        ).count(),
    }


def statements_per_call(slug: str) -> dict:
    """The SQL statements (transaction control included) one claim, one vote and one vote
    with next run, counted through Django's whole stack in this process for a fresh
    annotator of the benchmark's project: the median of five of each, so the occasional
    statements (preparing a statement on a new connection, moving to another block, asking
    for an agreement refresh) do not count."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token

    from annotation.models import Project, Role
    from annotation.projects.services import member_add

    project = Project.objects.get(slug=slug)
    user = member_add(project=project, username=f"{slug}-ann-count", role=Role.ANNOTATOR)
    token = Token.objects.create(user=user.membership.user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}", HTTP_HOST="127.0.0.1")

    def counted(path: str, **body) -> tuple[int, dict]:
        with CaptureQueriesContext(connection) as captured:
            answer = client.post(path, body, content_type="application/json")
        if answer.status_code not in (200, 201):
            raise SystemExit(f"statements: {path} answered {answer.status_code}")
        return len(captured.captured_queries), answer.json()

    found: dict[str, list[int]] = {"claim": [], "vote": [], "vote_with_next": []}
    current = None
    for _ in range(5):
        n, claimed = counted(f"/api/v1/projects/{slug}/claim/")
        found["claim"].append(n)
        n, _answer = counted(f"/api/v1/assignments/{claimed['id']}/vote/", choice="left")
        found["vote"].append(n)
    current = counted(f"/api/v1/projects/{slug}/claim/")[1]
    for _ in range(5):
        n, answer = counted(f"/api/v1/assignments/{current['id']}/vote/", choice="tie", next=True)
        found["vote_with_next"].append(n)
        current = answer.get("next")
        if current is None:
            break
    connection.close()
    return {key: statistics.median(values) for key, values in found.items() if values}


def print_measured(args, slug: str, measured: Measured) -> dict:
    """Prints the run's figures and the database's audit of the project; returns the audit."""
    claims, votes, errors, elapsed = (
        measured.claims,
        measured.votes,
        measured.errors,
        measured.elapsed,
    )
    found = audit(slug)
    dry = " (the queue ran dry)" if measured.ran_dry else ""
    print(
        f"server: {measured.served_by}; {args.annotators} annotators ({args.client} client), "
        f"loop {args.loop}, for {elapsed:.1f} s after {args.warmup:.0f} s of warm-up{dry}"
    )
    print(f"votes/s:            {len(votes) / elapsed:8.1f}   (target: 20x Label Studio's)")
    print(f"claims:             {len(claims):8d}")
    print(f"votes:              {len(votes):8d}")
    print(f"claim p50 / p95 ms: {percentile(claims, 0.5):8.1f} / {percentile(claims, 0.95):.1f}")
    label = "vote+next" if args.loop == "next" else "vote     "
    print(f"{label} p50 / p95 ms: {percentile(votes, 0.5):4.1f} / {percentile(votes, 0.95):.1f}")
    per_vote_ms = sum(claims) / max(1, len(votes)) + statistics.fmean(votes or [float("nan")])
    print(f"request ms a vote:  {per_vote_ms:8.1f} (claims and votes, mean)")
    if measured.cpu is not None and votes:
        per_vote = [used / len(votes) * 1000 for used in measured.cpu]
        others = {name: used / len(votes) * 1000 for name, used in measured.other_cpu.items()}
        extra = "".join(f", {name} {ms:.1f}" for name, ms in others.items())
        total = sum(per_vote) + sum(others.values())
        cores = psutil.cpu_count() or 1
        print(
            f"CPU per vote ms:    {total:8.1f} (gunicorn {per_vote[0]:.1f}, "
            f"PostgreSQL {per_vote[1]:.1f}, load generator {per_vote[2]:.1f}{extra})"
        )
        # What the run would reach with the CPUs to itself: useful on a shared machine.
        print(f"idle-CPU capacity:  {cores * 1000 / total:8.1f} votes/s on {cores} cores")
    print(f"http errors:        {len(errors):8d} {sorted(set(errors))[:5] or ''}")
    counted = statements_per_call(slug)
    print(
        "statements per call: claim {claim}, vote {vote}, vote with next {vote_with_next} "
        "(one annotator, in this process, the same requests through Django's stack)".format(
            **counted
        )
    )
    print(f"votes in database:  {found['votes']:8d} (extra: {found['extra_votes']})")
    print(f"pairs complete:     {found['pairs_complete']:8d}")
    print(f"pairs over target:  {found['pairs_over_target']:8d}   (must be 0)")
    print(f"duplicate votes:    {found['duplicate_votes']:8d}   (must be 0)")
    print(f"counter mismatches: {found['counter_mismatches']:8d}   (must be 0)")
    return found
