"""The Celery application. Its queues, one per kind of work, and the route of every task
are in ``config/queues.py`` (imports, HTTP judges, torch judges, releases and reports,
trainings), so GPU machines take only torch work and imports never hold up a release.
A worker starting sweeps the work folders that jobs killed on its node left behind, and
serves its jobs' metrics (durations and failures by task and queue) when asked to. A task
sent while a request runs carries the request's id in its headers, and everything it logs
carries the id too; a worker logs as the web processes do, one JSON object a line."""

from __future__ import annotations

import contextvars
import logging
import os
import time
from logging.config import dictConfig

from celery import Celery, Task
from celery.signals import (
    before_task_publish,
    celeryd_after_setup,
    setup_logging,
    task_failure,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
)

from annotation.core.metrics import JOB_FAILURES, JOB_SECONDS
from config.logging import current_request_id
from config.queues import IMPORTS, RELEASES, TASK_ROUTES

REQUEST_ID_HEADER = "arbiter_request_id"
task_logger = logging.getLogger("arbiter.task")

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("arbiter")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _ensure_filesystem_broker_folders(sender, **kwargs):
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)


@worker_init.connect
def _sweep_leftover_work_folders(**kwargs):
    """Once per worker node, as it starts: what jobs killed on this node left in its
    temporary folder (and the shared media folder's work folders), which a beat task on
    another node could not reach (``annotation.core.scratch``)."""
    from annotation.core.scratch import scratch_sweep

    scratch_sweep()


@worker_init.connect
def _serve_worker_metrics(**kwargs):
    from config.metrics import worker_metrics_serve

    worker_metrics_serve()


# Whether this worker takes imports, and release builds; set before its pool processes are
# forked.
_takes_imports = False
_takes_releases = False


@celeryd_after_setup.connect
def _note_the_imports_and_releases_queues(sender, instance, **kwargs):
    global _takes_imports, _takes_releases
    consumed = instance.app.amqp.queues.consume_from
    _takes_imports = IMPORTS in consumed
    _takes_releases = RELEASES in consumed


@worker_process_init.connect
def _start_the_media_server(**kwargs):
    """A pool process of a worker that takes imports starts its media server as it starts,
    not at its first import (~1 s: docs/operations.md, "Bounded media work")."""
    if _takes_imports:
        from annotation.media.bounded import bounded_start

        bounded_start()


@worker_process_init.connect
def _import_the_release_builder(**kwargs):
    """A pool process of a worker that takes release builds imports the builder (pyarrow,
    numpy: 0.24 to 0.35 s) as it starts, not in its first build (docs/releases.md, "Sealed
    media files"). The media server started before it is a program of its own, not a fork
    of this one."""
    if _takes_releases:
        import annotation.releases.build  # noqa: F401


_started: dict[str, float] = {}


def _queue(task: Task) -> str:
    """The queue the task came from (a judge's batch: its judge's), else its route's."""
    delivered = (task.request.delivery_info or {}).get("routing_key")
    return delivered or TASK_ROUTES.get(task.name, {}).get("queue", "default")


@setup_logging.connect
def _json_logs(loglevel=None, **kwargs):
    """Django's LOGGING (one JSON object a line, the request id filter) instead of Celery's
    own format; ``--loglevel`` sets the level."""
    from django.conf import settings

    dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


@before_task_publish.connect
def _send_request_id(headers=None, **kwargs):
    request_id = current_request_id.get()
    if request_id is not None and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


def _sent_request_id(task: Task) -> str | None:
    """The id a task was sent with: a message header (a worker), or in ``request.headers``
    (a task run in place, whose request's id is the current one anyway)."""
    request = task.request
    return getattr(request, REQUEST_ID_HEADER, None) or (request.headers or {}).get(
        REQUEST_ID_HEADER
    )


_request_ids: dict[str, contextvars.Token] = {}


@task_prerun.connect
def _job_started(task_id=None, task=None, **kwargs):
    _started[task_id] = time.monotonic()
    request_id = _sent_request_id(task) if task is not None else None
    if request_id is not None:
        _request_ids[task_id] = current_request_id.set(request_id)
        task_logger.info("task started", extra={"task": task.name, "task_id": task_id})


@task_postrun.connect
def _job_finished(task_id=None, task=None, state=None, **kwargs):
    token = _request_ids.pop(task_id, None)
    if token is not None:
        current_request_id.reset(token)
    started = _started.pop(task_id, None)
    if started is not None and task is not None:
        JOB_SECONDS.labels(task.name, _queue(task), state or "UNKNOWN").observe(
            time.monotonic() - started
        )


@task_failure.connect
def _job_failed(sender=None, **kwargs):
    if sender is not None:
        JOB_FAILURES.labels(sender.name, _queue(sender)).inc()
