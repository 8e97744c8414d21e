"""Releases' services (docs/releases.md): create a draft, build it (a Celery job with
progress, or at once from the command line), publish it for good. A published release never
changes: the model layer refuses it too (``annotation.models.Release``), these services only
say so first in words.

Statuses: ``draft -> queued -> building -> built | failed``, ``built -> published``; a draft,
built or failed release may be built again (same version, files replaced), a published one
never."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.core import storage
from annotation.core.errors import Conflict, InvalidInput
from annotation.core.failures import describe_error, record_failure
from annotation.core.jobs import (
    BrokerUnavailable,
    StalledJobs,
    job_attempt_claim,
    job_publish,
    quarantine_reason,
    stalled_before,
)
from annotation.core.local_settings import local_settings
from annotation.core.webhook_events import webhook_event_record
from annotation.models import (
    RELEASE_VERSION_PART_DIGITS,
    RELEASE_VERSION_PART_MAX,
    RELEASE_VERSION_PATTERN,
    Project,
    Release,
    WebhookEventKind,
)
from annotation.releases.framing import Digest
from annotation.releases.rows import selection_is_empty
from annotation.releases.selection import Selection, check_selection, describe_selection
from annotation.releases.stored import StoreFailed, verify_stored
from annotation.releases.stored_archive import archive_publish

Status = Release.Status
# From where a build may start: never a published release, never one already building.
BUILDABLE = (Status.DRAFT, Status.BUILT, Status.FAILED)
_VERSION = re.compile(RELEASE_VERSION_PATTERN)
# A build writes its progress onto the release at most this often.
PROGRESS_INTERVAL_S = 0.5
# The task that builds a release (annotation/tasks.py registers it by this name).
RELEASE_BUILD_TASK = "annotation.tasks.release_build_run"

ReleaseProgress = Callable[[int, int, str], None]


"""Called as ``progress(rows_done, rows_total, stage)`` while a build runs."""


def check_version(version: str) -> str:
    """The version as stored, or InvalidInput: the form, the API and the command line all
    come here (the model's constraint and the path converter hold the same rule)."""
    version = (version or "").strip() if isinstance(version, str) else ""
    if not _VERSION.match(version):
        raise InvalidInput(
            "version: must be X.Y.Z, three whole numbers without leading zeros of at most "
            f"{RELEASE_VERSION_PART_DIGITS} digits each (got {version[:40]!r})."
        )
    return version


def release_version_next(*, project: Project) -> str:
    """The version a new release of ``project`` is offered: the latest one's next minor (the
    next major once the minor is at its largest), 1.0.0 for the first; "" when no valid
    version is left above the latest."""
    versions = [
        tuple(int(part) for part in version.split("."))
        for version in Release.objects.filter(project=project).values_list("version", flat=True)
        if _VERSION.match(version)
    ]
    if not versions:
        return "1.0.0"
    major, minor, _ = max(versions)
    if minor < RELEASE_VERSION_PART_MAX:
        return f"{major}.{minor + 1}.0"
    if major < RELEASE_VERSION_PART_MAX:
        return f"{major + 1}.0.0"
    return ""


def check_selection_not_empty(*, project: Project, selection: Selection) -> None:
    """InvalidInput naming the sources and filters when ``selection`` takes no pair of
    ``project``: a release of 0 rows is a mistake (nothing decided yet, a filter too tight),
    never a dataset."""
    if selection_is_empty(project, selection):
        raise InvalidInput(
            f"selection: no pair of {project.slug} matches it ({describe_selection(selection)})"
            "; decide pairs first or widen the filters."
        )


def release_create(
    *, project: Project, version: str, selection: Selection | Mapping[str, Any] | None, user
) -> Release:
    """A draft release of ``project`` with this version and selection (validated; InvalidInput
    names the field, or the filters when the selection takes no pair). Conflict when the
    project has that version already. The caller checked that ``user`` may make releases of
    the project (curators and researchers)."""
    version = check_version(version)
    chosen = check_selection(selection)
    check_selection_not_empty(project=project, selection=chosen)
    try:
        with transaction.atomic():
            release = Release.objects.create(
                project=project,
                version=version,
                selection=chosen.as_json(),
                created_by=user if getattr(user, "is_authenticated", False) else None,
            )
            after = {"version": version, "selection": release.selection}
            audit_record(
                actor=user, project=project, action="release.created", target=release, after=after
            )
            return release
    except IntegrityError:
        if Release.objects.filter(project=project, version=version).exists():
            raise Conflict(
                f"version: {project.slug} has a release {version} already; choose another."
            ) from None
        raise


def release_build_start(*, release: Release) -> Release:
    """Queues the build of a draft, built or failed release as a Celery task; the release
    page polls ``status``, ``stage``, ``rows_done``/``rows_total`` (``percent``). Conflict
    when it is published or building; InvalidInput when its selection takes no pair now. When
    the task broker cannot take it the release goes
    back to its status with the reason in ``error``: outside a transaction Unavailable is
    raised; inside one the task is sent once it commits, and a failure then is logged."""
    previous = release.status
    if previous in BUILDABLE:
        check_selection_not_empty(
            project=release.project, selection=check_selection(release.selection)
        )
    moved = Release.objects.filter(pk=release.pk, status__in=BUILDABLE).update(
        status=Status.QUEUED,
        stage="queued",
        error="",
        rows_done=0,
        progress_at=timezone.now(),
        attempts=0,
    )
    if not moved:
        release.refresh_from_db()
        raise Conflict(f"Release {release.version} is {release.status}: it cannot be built now.")
    release.refresh_from_db()

    def refused(exc: BrokerUnavailable) -> None:
        Release.objects.filter(pk=release.pk, status=Status.QUEUED).update(
            status=previous, stage="", error=f"{exc} The build was not started."
        )
        release.refresh_from_db()

    job_publish(RELEASE_BUILD_TASK, args=(release.pk,), on_refused=refused, refusal="log_at_commit")
    return release


def release_build(
    *,
    release: Release,
    progress: ReleaseProgress | None = None,
    claimed: bool = False,
    redelivered: bool = False,
) -> Release:
    """Builds the release now: its folder and its archive's skeleton and index (the archive's
    sha256 is taken when it is published) under ARBITER_RELEASE_ROOT, its
    statistics, card and manifest hash on the row. ``claimed``: the caller is the Celery task,
    which builds only a queued release (or, ``redelivered``, one its killed worker left
    building), counting the attempt first and quarantining a build out of attempts;
    otherwise a draft, built, failed or queued one is built (the command line). A failure
    marks it failed with the reason and raises; Conflict when it cannot be built now."""
    from annotation.releases.build import build_release  # heavy imports (pyarrow)

    _release_build_claim(release=release, claimed=claimed, redelivered=redelivered)
    last = 0.0

    def report(rows_done: int, rows_total: int, stage: str) -> None:
        nonlocal last
        if progress is not None:
            progress(rows_done, rows_total, stage)
        now = time.monotonic()
        if now - last >= PROGRESS_INTERVAL_S or stage != "reading":
            last = now
            release_build_progress(
                release_id=release.pk, rows_done=rows_done, rows_total=rows_total, stage=stage
            )

    try:
        outcome = build_release(release=release, report=report)
    except Exception as exc:
        release_build_fail(release_id=release.pk, message=describe_error(exc))
        raise
    with transaction.atomic():
        built = Release.objects.filter(pk=release.pk, status=Status.BUILDING).update(
            status=Status.BUILT,
            stage="done",
            rows_done=outcome.rows_total,
            rows_total=outcome.rows_total,
            pair_count=outcome.pair_count,
            statistics=outcome.statistics,
            card=outcome.card,
            manifest_sha256=outcome.manifest_sha256,
            archive_sha256="",  # taken when it is published
            archive_size=outcome.archive_size,
            build_finished_at=timezone.now(),
            progress_at=timezone.now(),
        )
        release.refresh_from_db()
        if built:
            _release_event(release, WebhookEventKind.RELEASE_BUILT)
    return release


def _release_event(release: Release, kind: WebhookEventKind) -> None:
    """The webhook event of a release just built or published (docs/webhooks.md, "Events");
    the project read afresh, as a long build may have outlived its webhooks' change. A built
    release's ``archive_sha256`` is empty: it is taken when the release is published."""
    project = Project.objects.get(pk=release.project_id)
    data = {
        "version": release.version,
        "pair_count": release.pair_count,
        "manifest_sha256": release.manifest_sha256,
        "archive_sha256": release.archive_sha256,
        "archive_size": release.archive_size,
    }
    webhook_event_record(
        project=project, kind=kind, data={"project": project.slug, "release": data}
    )


def _release_build_claim(*, release: Release, claimed: bool, redelivered: bool) -> None:
    """Moves the release to building (``release_build``), or raises Conflict."""
    now = timezone.now()
    fields = {
        "status": Status.BUILDING,
        "stage": "reading",
        "error": "",
        "rows_done": 0,
        "rows_total": 0,
        "build_started_at": now,
        "build_finished_at": None,
        "progress_at": now,
    }
    if claimed:
        starts = (Status.QUEUED, Status.BUILDING) if redelivered else (Status.QUEUED,)
        candidates = Release.objects.filter(pk=release.pk, status__in=starts)
        moved = job_attempt_claim(candidates, **fields)
        spent = None if moved else candidates.values_list("attempts", flat=True).first()
        if spent is not None:
            release_build_fail(release_id=release.pk, message=quarantine_reason(spent))
    else:
        moved = Release.objects.filter(
            pk=release.pk, status__in=(*BUILDABLE, Status.QUEUED)
        ).update(**fields, attempts=1, last_attempt_at=now)
    release.refresh_from_db()
    if not moved:
        raise Conflict(f"Release {release.version} is {release.status}: it cannot be built now.")


def release_build_progress(*, release_id: int, rows_done: int, rows_total: int, stage: str) -> None:
    """Records how far a build got (the build runs outside any transaction, so it shows at
    once); a build that no longer is ``building`` is left alone. Committed without waiting
    for the WAL to reach the disk: while the build writes hundreds of MB, each such wait
    took up to a fifth of a second, and a progress row lost in a crash is what the
    stalled-build sweep looks for anyway (the outcome is recorded durably)."""
    with local_settings(synchronous_commit="off"):
        Release.objects.filter(pk=release_id, status=Status.BUILDING).update(
            rows_done=rows_done, rows_total=rows_total, stage=stage, progress_at=timezone.now()
        )


def release_build_fail(*, release_id: int, message: str) -> None:
    """Marks a queued or building release failed with ``message`` (the task's on_failure, or a
    build that raised), so it never hangs in "building"; recorded on a new database connection
    when the build's was lost (``annotation.core.failures``)."""

    def record() -> None:
        Release.objects.filter(pk=release_id, status__in=(Status.QUEUED, Status.BUILDING)).update(
            status=Status.FAILED,
            stage="failed",
            error=message[:2000],
            build_finished_at=timezone.now(),
            progress_at=timezone.now(),
        )

    record_failure(record)


class _StalledBuilds(StalledJobs[int]):
    """Builds with no progress for ARBITER_STALLED_AFTER_S lost their worker; they are marked
    failed (a build is cheap to start again), and the work folders of builds no longer
    running, which a killed build leaves, are removed."""

    noun = "release build"

    def stalled(self):
        return Release.objects.filter(
            status__in=(Status.QUEUED, Status.BUILDING), progress_at__lt=stalled_before()
        ).values_list("pk", flat=True)

    def recover(self, job):
        release_build_fail(
            release_id=job, message="The build stopped (its worker died); build again."
        )

    def sweep(self) -> list:
        from annotation.releases.build import build_folders, remove_build_folders  # pyarrow

        failed = super().sweep()
        # Listed before the statuses are read: a folder exists only once its build is
        # building, so one whose release is not building now belongs to a build that is over.
        folders = build_folders(Path(settings.ARBITER_RELEASE_ROOT))
        building = set(
            Release.objects.filter(
                pk__in=set(folders.values()), status=Status.BUILDING
            ).values_list("pk", flat=True)
        )
        remove_build_folders([folder for folder, pk in folders.items() if pk not in building])
        return failed


STALLED_BUILDS = _StalledBuilds()


def release_builds_fail_stalled() -> int:
    """Periodic: fails the stalled builds (``_StalledBuilds``); returns how many failed."""
    return len(STALLED_BUILDS.sweep())


def _verify(release: Release) -> list[str]:
    """What differs between the stored release and its manifest (none: it verifies)."""
    if storage.is_s3():
        return verify_stored(release)
    from annotation.releases.archive import verify_folder  # pyarrow, through the writer

    return verify_folder(release.folder, manifest_sha256=release.manifest_sha256)


def _verified_and_archived(release: Release) -> tuple[list[str], Digest | None]:
    """The release's files checked against its manifest and its archive's sha256 taken: on
    local disk at once, on two threads (hashlib lets go of the GIL); on the bucket the archive
    is stored only once every file is checked."""
    if storage.is_s3():
        problems = _verify(release)
        if problems:
            return problems, None
        try:
            return [], archive_publish(release)
        except (StoreFailed, OSError, ValueError) as exc:  # the bucket gave other bytes back
            return [f"the archive: {exc}"], None
    _ = release.project  # loaded here: the thread queries nothing
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="release-archive") as pool:
        hashing = pool.submit(archive_publish, release)
        problems = _verify(release)
        try:
            return problems, hashing.result()
        except (OSError, ValueError) as exc:  # a file gone or changed size: named by the check
            return problems or [f"the archive: {exc}"], None


@transaction.atomic
def release_publish(*, release: Release, user) -> Release:
    """Publishes a built release for good: its files are verified against the manifest hash
    recorded at build time, its archive's sha256 is taken (on the bucket the archive is
    stored then), then it is frozen (no save, update or delete ever again, by any code).
    Conflict when it is not built or its files no longer verify. The caller checked that
    ``user`` may publish (curators and researchers of the project)."""
    locked = Release.objects.select_for_update().get(pk=release.pk)
    if locked.status != Status.BUILT:
        raise Conflict(
            f"Release {locked.version} is {locked.status}: only a built release is published."
        )
    problems, archived = _verified_and_archived(locked)
    if problems or archived is None:
        raise Conflict(
            f"Release {locked.version} does not match its manifest ({'; '.join(problems[:5])});"
            " build it again."
        )
    Release.objects.filter(pk=locked.pk, status=Status.BUILT).update(
        status=Status.PUBLISHED,
        archive_sha256=archived.sha256,
        archive_size=archived.size,
        published_at=timezone.now(),
        published_by=user if getattr(user, "is_authenticated", False) else None,
    )
    release.refresh_from_db()
    _release_event(release, WebhookEventKind.RELEASE_PUBLISHED)
    audit_record(
        actor=user,
        project=release.project,
        action="release.published",
        target=release,
        before={"status": Status.BUILT},
        after={
            "status": Status.PUBLISHED,
            "manifest_sha256": release.manifest_sha256,
            "archive_sha256": release.archive_sha256,
        },
    )
    return release
