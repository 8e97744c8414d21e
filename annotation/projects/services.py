"""Projects and their members: creating and changing a project, adding, re-roling and removing
members. A project always keeps at least one curator."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import F, Max
from django.db.models.functions import Least

from annotation.accounts.services import one_time_password_mark
from annotation.audit.actions import SECRET_CHANGED
from annotation.audit.services import audit_changes, audit_record
from annotation.decisions import lifecycle
from annotation.decisions.services import Reapplied, consensus_reapply, disputes_settle
from annotation.models import (
    ConsensusRule,
    Membership,
    Pair,
    PriorAnnotation,
    Project,
    Role,
    Scale,
    Vote,
)

# Inclusive bounds of the numeric settings, shared by the settings form and the services.
SETTING_RANGES: dict[str, tuple[float, float]] = {
    "overlap": (1, 50),
    "min_agree": (1, 50),
    "max_extra_votes": (0, 50),
    "lease_minutes": (1, 24 * 60),
    "gold_rate": (0.0, 1.0),
    "gold_min_accuracy": (0.0, 1.0),
    # Seconds an annotator must look at a pair before voting: ten minutes at most.
    "min_seconds_per_vote": (0, 600),
}
# Longest guidelines a project may have (the settings page previews them as they are typed).
MAX_GUIDELINES_CHARS = 100_000
# Random bytes of a one-time password (22 URL-safe characters).
ONE_TIME_PASSWORD_BYTES = 16


class MemberAdded(NamedTuple):
    membership: Membership
    created: bool
    # Only when the account was created here with a one-time password: shown once, never stored.
    one_time_password: str | None = None


@dataclass(frozen=True)
class SettingLimits:
    """How far a project's scale and overlap may still change, and why."""

    scale_locked_because: str
    overlap_floor: int

    @property
    def overlap_floor_because(self) -> str:
        if self.overlap_floor <= SETTING_RANGES["overlap"][0]:
            return ""
        return (
            f"A pair already has {self.overlap_floor} votes and live leases, so the overlap"
            f" cannot go below {self.overlap_floor} (extra votes for disputes aside)."
        )


def project_setting_limits(*, project: Project) -> SettingLimits:
    """The scale is fixed once votes (or imported prior votes) exist on it; the overlap cannot
    drop below the votes plus live leases any pair already has within its base target. The
    extra slots a dispute got are the pair's own (``Pair.extra_slots``), not the overlap."""
    scale_reason = ""
    if Vote.objects.filter(pair__project=project).exists():
        scale_reason = "Annotators have voted on this scale: changing it would misread their votes."
    elif PriorAnnotation.objects.filter(pair__project=project).exists():
        scale_reason = "Imported pairs carry prior votes on this scale."
    # Gold pairs take a vote from every annotator, whatever the overlap.
    taken = Pair.objects.filter(project=project, is_gold=False).aggregate(
        most=Max(Least(F("vote_count") + F("lease_count"), F("target_votes") - F("extra_slots")))
    )["most"]
    return SettingLimits(
        scale_locked_because=scale_reason,
        overlap_floor=max(int(SETTING_RANGES["overlap"][0]), taken or 0),
    )


def _check_ranges(**values: float) -> None:
    errors = {}
    for field, value in values.items():
        low, high = SETTING_RANGES[field]
        if isinstance(value, bool) or not low <= value <= high:
            errors[field] = f"Must be between {low:g} and {high:g} (got {value!r})."
    if errors:
        raise ValidationError(errors)


def _check_guidelines(guidelines: str) -> None:
    if len(guidelines) > MAX_GUIDELINES_CHARS:
        raise ValidationError({"guidelines": f"At most {MAX_GUIDELINES_CHARS:,} characters."})


# What a project's creation records in the audit log.
_CREATED_FIELDS = ("slug", "name", "scale", "overlap", "consensus_rule", "min_agree")


@transaction.atomic
def project_create(
    *,
    slug: str,
    name: str,
    scale: str = Scale.TERNARY,
    overlap: int = 3,
    consensus_rule: str = ConsensusRule.MAJORITY,
    guidelines: str = "",
    allow_media_urls: bool = False,
    min_agree: int | None = None,
    curator: User | None = None,
) -> Project:
    """Creates a project (the command line's and the home page's way alike); ``curator``, the
    account creating it in the app, becomes its first curator."""
    project = Project(
        slug=slug,
        name=name,
        scale=scale,
        overlap=overlap,
        consensus_rule=consensus_rule,
        guidelines=guidelines,
        allow_media_urls=allow_media_urls,
        min_agree=min_agree if min_agree is not None else overlap // 2 + 1,
    )
    _check_ranges(overlap=project.overlap, min_agree=project.min_agree)
    _check_guidelines(guidelines)
    project.full_clean()
    project.save()
    if curator is not None:
        Membership.objects.create(project=project, user=curator, role=Role.CURATOR)
    created = {field: getattr(project, field) for field in _CREATED_FIELDS}
    audit_record(
        actor=curator, project=project, action="project.created", target=project, after=created
    )
    return project


@transaction.atomic
def project_update(
    *,
    project: Project,
    name: str,
    guidelines: str,
    scale: str,
    overlap: int,
    min_agree: int,
    max_extra_votes: int,
    lease_minutes: int,
    require_rationale: bool,
    gold_rate: float,
    gold_min_accuracy: float,
    gold_pause: bool,
    paused: bool,
    min_seconds_per_vote: int,
    consensus_rule: str | None = None,
    play_to_end: bool | None = None,
    media_serve_source: bool | None = None,
    history_shows_consensus: bool | None = None,
    actor=None,
) -> ProjectUpdated:
    """Changes the project's settings. The scale and the overlap change only while that is safe
    (``project_setting_limits``); open pairs that had the old overlap as target get the new one.
    A changed consensus rule (or its ``min_agree``) is re-applied to the decided pairs
    (``consensus_reapply``: no vote changes, adjudicated pairs keep their label); disputes
    nobody can answer, or past a lowered cap, go to adjudication (``disputes_settle``).
    ``consensus_rule``, ``play_to_end``, ``media_serve_source`` and ``history_shows_consensus``
    left out keep their value. The changed fields go to the audit log as ``actor``'s (None:
    the command line)."""
    locked = Project.objects.select_for_update().get(pk=project.pk)
    consensus_rule = consensus_rule or locked.consensus_rule
    play_to_end = locked.play_to_end if play_to_end is None else play_to_end
    if media_serve_source is None:
        media_serve_source = locked.media_serve_source
    if history_shows_consensus is None:
        history_shows_consensus = locked.history_shows_consensus
    limits = project_setting_limits(project=locked)
    if scale != locked.scale and limits.scale_locked_because:
        raise ValidationError({"scale": limits.scale_locked_because})
    _check_ranges(
        overlap=overlap,
        min_agree=min_agree,
        max_extra_votes=max_extra_votes,
        lease_minutes=lease_minutes,
        gold_rate=gold_rate,
        gold_min_accuracy=gold_min_accuracy,
        min_seconds_per_vote=min_seconds_per_vote,
    )
    _check_guidelines(guidelines)
    if overlap < limits.overlap_floor:
        raise ValidationError({"overlap": limits.overlap_floor_because})
    old_overlap = locked.overlap
    rule_before = (locked.consensus_rule, locked.min_agree)
    changes = {
        "name": name,
        "guidelines": guidelines,
        "scale": scale,
        "overlap": overlap,
        "min_agree": min_agree,
        "max_extra_votes": max_extra_votes,
        "lease_minutes": lease_minutes,
        "require_rationale": require_rationale,
        "gold_rate": gold_rate,
        "gold_min_accuracy": gold_min_accuracy,
        "gold_pause": gold_pause,
        "paused": paused,
        "min_seconds_per_vote": min_seconds_per_vote,
        "consensus_rule": consensus_rule,
        "play_to_end": play_to_end,
        "media_serve_source": media_serve_source,
        "history_shows_consensus": history_shows_consensus,
    }
    before, after = audit_changes({field: getattr(locked, field) for field in changes}, changes)
    for field, value in changes.items():
        setattr(locked, field, value)
    locked.full_clean()
    locked.save(update_fields=list(changes))
    if after:
        rule_changed = "consensus_rule" in after or "min_agree" in after
        action = "project.consensus_rule_changed" if rule_changed else "project.settings_changed"
        audit_record(
            actor=actor, project=locked, action=action, target=locked, before=before, after=after
        )
    if overlap != old_overlap and not lifecycle.pairs_retarget(
        project=locked, old=old_overlap, new=overlap
    ):
        taken = f"Pairs took more than {overlap} votes and leases meanwhile; try again."
        raise ValidationError({"overlap": taken})
    if (locked.consensus_rule, locked.min_agree) != rule_before:
        # Re-applying settles the disputes nobody can answer too.
        # The event recorded above, of the rule's change, stands for its re-application.
        reapplied = consensus_reapply(project=locked, audited=False)
        return ProjectUpdated(locked, reapplied, 0)
    return ProjectUpdated(locked, None, len(disputes_settle(project=locked)))


class ProjectUpdated(NamedTuple):
    project: Project
    # Only when the consensus rule (or its min_agree) changed and was re-applied.
    reapplied: Reapplied | None
    # Disputes sent to adjudication because nobody can give their extra vote (or the cap fell).
    settled: int


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}; use one of {Role.values}"})


def _lock_project(project: Project) -> None:
    """Serialises changes to a project's members, so two curators demoting each other at once
    cannot leave it without a curator."""
    Project.objects.select_for_update().filter(pk=project.pk).values_list("pk").get()


def _check_keeps_a_curator(membership: Membership, new_role: str | None) -> None:
    """Refuses to remove (``new_role`` None) or demote the project's last curator."""
    if membership.role != Role.CURATOR or new_role == Role.CURATOR:
        return
    others = (
        Membership.objects.filter(project_id=membership.project_id, role=Role.CURATOR)
        .exclude(pk=membership.pk)
        .exists()
    )
    if not others:
        raise ValidationError(
            {
                "role": f"{membership.user.get_username()} is the project's last curator:"
                " make someone else curator first."
            }
        )


def _user_for(*, username: str, email: str):
    """The account with this email (never one whose username merely equals it), or else with
    this username; a new unsaved one (named after the email when no username is given) when
    there is none. Returns it and whether it is new."""
    user_model = get_user_model()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise ValidationError({"email": f"{email!r} is not an email address."}) from None
        email = user_model.objects.normalize_email(email)
        matches = list(user_model.objects.filter(email__iexact=email)[:2])
        if len(matches) > 1:
            raise ValidationError(
                {"email": "Several accounts use this email: give the username instead."}
            )
        if matches:
            return matches[0], False
        if not username:
            if user_model.objects.filter(username__iexact=email).exists():
                raise ValidationError(
                    {
                        "email": f"No account has the email {email}, and the username {email} is"
                        " another account's: ask an operator to rename that account."
                    }
                )
            username = email
    if not username:
        raise ValidationError({"username": "Give a username or an email."})
    user = user_model.objects.filter(username=username).first()
    if user is not None:
        if email:
            raise ValidationError(
                {"username": f"{username} is an account without the email {email}."}
            )
        return user, False
    user = user_model(username=username, email=email)
    user.full_clean(exclude=["password"])
    return user, True


@transaction.atomic
def member_add(
    *,
    project: Project,
    role: str,
    username: str = "",
    email: str = "",
    password: str | None = None,
    one_time_password: bool = False,
    actor=None,
    by_member: bool = False,
    note: str = "",
) -> MemberAdded:
    """Adds the account with ``username`` or ``email`` to ``project`` with ``role`` (changing
    the role of a member), creating it when there is none. A new account gets ``password``, or
    a random one returned once when ``one_time_password`` (to be changed at first login:
    ``annotation.accounts.services``), or none (it cannot log in);
    ``password`` also resets an existing account's password (operators' command line).
    Recorded in the audit log as ``actor``'s (None: the command line), or as the member's own
    with ``by_member`` (accepting an invitation); never the password. ``note`` says in the
    event what made the change when no person did (single sign-on's group mapping)."""
    _check_role(role)
    _lock_project(project)
    user, created = _user_for(username=username, email=email)
    generated = None
    if created and one_time_password and not password:
        generated = password = secrets.token_urlsafe(ONE_TIME_PASSWORD_BYTES)
    if password:
        user.set_password(password)
    elif created:
        user.set_unusable_password()
    if created or password:
        user.save()
    if generated:
        one_time_password_mark(user=user)
    if by_member:
        actor = user
    membership = Membership.objects.filter(project=project, user=user).first()
    if membership is None:
        membership = Membership.objects.create(project=project, user=user, role=role)
        after = {"user": user.get_username(), "role": role, "account_created": created}
        if password:
            after["password"] = SECRET_CHANGED
        if note:
            after["note"] = note
        _audit_member(actor, membership, "member.added", {}, after)
    elif membership.role != role:
        _check_keeps_a_curator(membership, role)
        before = {"role": membership.role}
        membership.role = role
        membership.save(update_fields=["role"])
        _audit_member(actor, membership, "member.role_changed", before, {"role": role})
        disputes_settle(project=project)
    return MemberAdded(membership, created, generated)


def _audit_member(actor, membership: Membership, action: str, before: dict, after: dict) -> None:
    audit_record(
        actor=actor,
        project=membership.project,
        action=action,
        target=membership,
        target_label=membership.user.get_username(),
        before=before,
        after=after,
    )


@transaction.atomic
def member_role_change(*, membership: Membership, role: str, actor=None) -> Membership:
    """Gives the member another role; the project's last curator keeps theirs."""
    _check_role(role)
    _lock_project(membership.project)
    membership = Membership.objects.select_related("user").get(pk=membership.pk)
    if membership.role != role:
        _check_keeps_a_curator(membership, role)
        before = {"role": membership.role}
        membership.role = role
        membership.save(update_fields=["role"])
        _audit_member(actor, membership, "member.role_changed", before, {"role": role})
        # An annotator no more: a dispute only they could still answer goes to adjudication.
        disputes_settle(project=membership.project)
    return membership


@transaction.atomic
def member_remove(*, membership: Membership, actor=None) -> None:
    """Takes the member out of the project (their votes stay); never its last curator."""
    _lock_project(membership.project)
    membership = Membership.objects.select_related("user").get(pk=membership.pk)
    _check_keeps_a_curator(membership, None)
    removed = {"user": membership.user.get_username(), "role": membership.role}
    # Recorded before the row goes, so that the event knows the member's id.
    _audit_member(actor, membership, "member.removed", removed, {})
    membership.delete()
    disputes_settle(project=membership.project)
