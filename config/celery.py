"""The Celery application. Its queues, one per kind of work, and the route of every task
are in ``config/queues.py`` (imports, HTTP judges, torch judges, releases and reports,
trainings), so GPU machines take only torch work and imports never hold up a release.
A worker starting sweeps the work folders that jobs killed on its node left behind."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

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
