"""Arbiter's Celery queues, one per kind of work, so that a night of video imports never
delays a release or a judge run (docs/deploy.md, "Queues and workers"). Every task is routed
to the queue of its kind by name (``TASK_ROUTES``, Celery's ``task_routes``); a judge's
batches go to the queue of the judge's kind (``Judge.queue``), given when they are sent."""

from __future__ import annotations

IMPORTS = "imports"
JUDGES_HTTP = "judges_http"
JUDGES_GPU = "judges_gpu"
RELEASES = "releases"
TRAINING = "training"
WEBHOOKS = "webhooks"
MAIL = "mail"

# What each queue runs, in the order docs/deploy.md lists them; a worker that serves them
# all (``make demo``) is started with ``-Q`` and ``ALL_QUEUES``.
QUEUES: dict[str, str] = {
    IMPORTS: "imports of uploaded files and URLs: reading, checking and re-encoding their media",
    JUDGES_HTTP: "filter runs and evaluations of openai, heuristic and scores judges",
    JUDGES_GPU: "filter runs and evaluations of reward_model judges (torch)",
    RELEASES: "release builds and agreement-report refreshes",
    TRAINING: "reward-model trainings (torch)",
    WEBHOOKS: "webhook deliveries: signed POSTs to the projects' endpoints, and their retries",
    MAIL: "outgoing mail: invitations and password resets",
}
ALL_QUEUES = ",".join(QUEUES)

_ROUTES: dict[str, tuple[str, ...]] = {
    IMPORTS: ("annotation.tasks.import_run", "annotation.imports_resume_stalled"),
    JUDGES_HTTP: (
        "judges.filter_run_start",
        "judges.filter_run_batch",
        "judges.filter_run_finish",
        "judges.filter_runs_resume_stalled",
        "judges.judge_evaluation_batch",
        "judges.judge_evaluations_resume_stalled",
    ),
    RELEASES: (
        "annotation.tasks.release_build_run",
        "annotation.release_builds_fail_stalled",
        "annotation.agreement_report_refresh",
        "annotation.agreement_refreshes_send_lost",
    ),
    TRAINING: ("judges.training_run_execute", "judges.training_runs_resume_stalled"),
    WEBHOOKS: ("annotation.webhooks_deliver_due",),
    MAIL: ("annotation.mail_send",),
}
TASK_ROUTES: dict[str, dict[str, str]] = {
    task: {"queue": queue} for queue, tasks in _ROUTES.items() for task in tasks
}
