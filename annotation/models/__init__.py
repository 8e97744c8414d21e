"""Every model of the app, one module per feature's tables and the vocabularies of their
columns in ``choices``, re-exported here so that ``from annotation.models import X`` and the
migrations keep working."""

from __future__ import annotations

from annotation.core.claim_key import ClaimKey
from annotation.models.agreement import Adjudication, AgreementReport
from annotation.models.audit import AuditEvent
from annotation.models.choices import (
    ConsensusRule,
    JobStatus,
    PairStatus,
    ReportSource,
    Role,
    Scale,
    Side,
)
from annotation.models.content import ContentMixin, Media, ProjectMedia, Prompt, Response
from annotation.models.flags import Flag, FlagComment
from annotation.models.imports import ImportJob
from annotation.models.invitations import Invitation
from annotation.models.jobs import TaskAttempt
from annotation.models.pairs import Pair, PriorAnnotation
from annotation.models.projects import (
    DEFAULT_GOLD_MIN_ACCURACY,
    DEFAULT_MIN_SECONDS_PER_VOTE,
    GOLD_MIN_VOTES,
    GOLD_TARGET_VOTES,
    Membership,
    OneTimePassword,
    Project,
)
from annotation.models.queue import Assignment, PairRestriction, Skip, Vote
from annotation.models.releases import (
    RELEASE_VERSION_PART_DIGITS,
    RELEASE_VERSION_PART_MAX,
    RELEASE_VERSION_PATTERN,
    RELEASE_VERSION_REGEX,
    Release,
    ReleaseFrozen,
    ReleaseQuerySet,
)
from annotation.models.tokens import ApiToken
from annotation.models.webhooks import (
    SUBSCRIBABLE_EVENTS,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
    WebhookEventKind,
)

__all__ = [
    "DEFAULT_GOLD_MIN_ACCURACY",
    "DEFAULT_MIN_SECONDS_PER_VOTE",
    "GOLD_MIN_VOTES",
    "GOLD_TARGET_VOTES",
    "RELEASE_VERSION_PART_DIGITS",
    "RELEASE_VERSION_PART_MAX",
    "RELEASE_VERSION_PATTERN",
    "RELEASE_VERSION_REGEX",
    "SUBSCRIBABLE_EVENTS",
    "Adjudication",
    "AgreementReport",
    "ApiToken",
    "Assignment",
    "AuditEvent",
    "ClaimKey",
    "ConsensusRule",
    "ContentMixin",
    "Flag",
    "FlagComment",
    "ImportJob",
    "Invitation",
    "JobStatus",
    "Media",
    "Membership",
    "OneTimePassword",
    "Pair",
    "PairRestriction",
    "PairStatus",
    "PriorAnnotation",
    "Project",
    "ProjectMedia",
    "Prompt",
    "Release",
    "ReleaseFrozen",
    "ReleaseQuerySet",
    "ReportSource",
    "Response",
    "Role",
    "Scale",
    "Side",
    "Skip",
    "TaskAttempt",
    "Vote",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "WebhookEventKind",
]
