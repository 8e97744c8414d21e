"""Arbiter's own Prometheus metrics, counted where they happen (docs/deploy.md, "Metrics"):
votes and claims by the queue's services, jobs' durations and failures by the Celery task
signals (``config/celery.py``). ``config/metrics.py`` serves them with the request metrics
of django-prometheus and what is read at scrape time (pairs by state, queue depths).
Under gunicorn or a prefork worker, ``PROMETHEUS_MULTIPROC_DIR`` makes each process write
its counts to files there, which the scrape adds up."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

VOTES = Counter(
    "arbiter_votes",
    "Votes recorded once committed, counted or extra (the same vote sent again is not).",
    ["kind"],
)
CLAIMS = Counter(
    "arbiter_claims",
    "Claims answered: a new lease, the lease the annotator held already, or nothing left.",
    ["outcome"],
)
# Jobs run from seconds (a sweep) to an hour (a training).
JOB_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, float("inf"))
JOB_SECONDS = Histogram(
    "arbiter_job_duration_seconds",
    "Celery tasks' run time, by task and the queue of its kind; state is its outcome.",
    ["task", "queue", "state"],
    buckets=JOB_BUCKETS,
)
JOB_FAILURES = Counter(
    "arbiter_job_failures",
    "Celery tasks that raised (a retry is not a failure), by task and queue.",
    ["task", "queue"],
)
