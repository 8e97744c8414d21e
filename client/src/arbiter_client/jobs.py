"""Waiting for a job the server runs in the background (an import, a filter run, a judge
evaluation, a release build), with a progress bar."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arbiter_client.errors import ArbiterError, JobFailed
from arbiter_client.progress import make_bar


@dataclass(frozen=True)
class JobKind:
    """How to read one kind of job: its label, where its percent is, the statuses it ends in."""

    label: str
    succeeded: frozenset[str]
    failed: frozenset[str]
    percent: Callable[[dict[str, Any]], int]


IMPORT = JobKind(
    "import",
    frozenset({"succeeded"}),
    frozenset({"failed"}),
    lambda job: int(job.get("percent") or 0),
)
FILTER_RUN = JobKind(
    "filter run",
    frozenset({"succeeded"}),
    frozenset({"failed", "cancelled"}),
    lambda run: int((run.get("progress") or {}).get("percent") or 0),
)
EVALUATION = JobKind(
    "judge evaluation",
    frozenset({"succeeded"}),
    frozenset({"failed"}),
    lambda evaluation: 100 if evaluation.get("status") == "succeeded" else 0,
)
# A draft is a release whose build was never queued (the broker was down): it will not move.
RELEASE = JobKind(
    "release build",
    frozenset({"built", "published"}),
    frozenset({"failed", "draft"}),
    lambda release: int(release.get("percent") or 0),
)


def wait_for(
    kind: JobKind,
    fetch: Callable[[], dict[str, Any]],
    *,
    progress: bool = True,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Polls ``fetch`` until the job ends; its last state, or ``JobFailed`` when it failed
    (``ArbiterError`` when ``timeout_s`` passed first)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    bar = make_bar(kind.label, progress)
    try:
        while True:
            job = fetch()
            status = str(job.get("status"))
            bar.update_to(100 if status in kind.succeeded else kind.percent(job), status)
            if status in kind.succeeded:
                return job
            if status in kind.failed:
                raise JobFailed(kind.label, job)
            if deadline is not None and time.monotonic() > deadline:
                raise ArbiterError(f"{kind.label} still {status} after {timeout_s} s")
            sleep(poll_s)
    finally:
        bar.close()
