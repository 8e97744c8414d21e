"""The curators' levers on the queue: pausing a project or an annotator and releasing leases.
Their writes on chosen pairs (gold, priority, restriction) are ``annotation.pairs.services``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.core.errors import InvalidInput
from annotation.core.limits import MAX_LEASE_AGE_MINUTES
from annotation.models import Assignment, Membership, Project, Role
from annotation.queue.services.leases import leases_free


@transaction.atomic
def project_pause(*, project: Project, paused: bool, actor=None) -> Project:
    """Pauses (no new claims; votes on held leases are still taken) or resumes the project."""
    before = {"paused": project.paused}
    project.paused = paused
    project.save(update_fields=["paused"])
    audit_record(
        actor=actor,
        project=project,
        action="project.paused",
        target=project,
        before=before,
        after={"paused": paused},
    )
    return project


@transaction.atomic
def membership_unpause(*, project: Project, annotator, actor=None) -> Membership:
    """Lets a paused annotator claim pairs again. Their gold accuracy is judged afresh from
    now on, so the votes that paused them do not pause them again at their next gold vote."""
    membership = Membership.objects.filter(
        project=project, user=annotator, role=Role.ANNOTATOR
    ).first()
    if membership is None:
        raise InvalidInput(f"annotator: {annotator} is not an annotator of this project.")
    before = {"paused": membership.paused}
    membership.paused = False
    membership.gold_judged_since = timezone.now()
    membership.save(update_fields=["paused", "gold_judged_since"])
    audit_record(
        actor=actor,
        project=project,
        action="member.unpaused",
        target=membership,
        target_label=annotator.get_username(),
        before=before,
        after={"paused": False},
    )
    return membership


@transaction.atomic
def leases_release(
    *,
    project: Project,
    older_than_minutes: int | None = None,
    assignment_ids: Iterable[int] | None = None,
    actor=None,
) -> int:
    """Releases live leases (all, those taken more than ``older_than_minutes`` ago, or the
    given assignments), freeing their slots; a vote that still arrives on one is kept."""
    leases = Assignment.objects.filter(pair__project=project, status=Assignment.Status.LIVE)
    if older_than_minutes is not None:
        if not 0 <= older_than_minutes <= MAX_LEASE_AGE_MINUTES:
            raise InvalidInput(
                f"older_than_minutes: must be from 0 to {MAX_LEASE_AGE_MINUTES} minutes."
            )
        leases = leases.filter(
            created_at__lte=timezone.now() - timedelta(minutes=older_than_minutes)
        )
    if assignment_ids is not None:
        leases = leases.filter(pk__in=list(assignment_ids))
    released = leases_free(
        list(leases.select_for_update(of=("self",)).order_by("pk").values_list("pk", "pair_id")),
        project=project,
    )
    audit_record(
        actor=actor,
        project=project,
        action="leases.released",
        target=None,
        target_type="leases",
        target_label=f"{released} leases",
        after={"released": released, "older_than_minutes": older_than_minutes},
    )
    return released
