"""Projects and their members."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import ConsensusRule, Membership, Project, Role, Scale

CURATORS_GROUP = "Curators"
# What the admin lets curators do (always scoped to their own projects by the admin classes).
_CURATOR_PERMISSIONS = {
    "annotation": {
        "project": ("view", "change"),
        "membership": ("view", "add", "change", "delete"),
        "pair": ("view", "change"),
        "prompt": ("view",),
        "response": ("view",),
        "media": ("view",),
        "importjob": ("view",),
        "vote": ("view",),
        "skip": ("view",),
    },
    "auth": {"user": ("view",)},
    "judges": {"judge": ("view", "add", "change")},
}


def curators_group() -> Group:
    group, _ = Group.objects.get_or_create(name=CURATORS_GROUP)
    wanted = [
        f"{action}_{model}"
        for models_actions in _CURATOR_PERMISSIONS.values()
        for model, actions in models_actions.items()
        for action in actions
    ]
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label__in=list(_CURATOR_PERMISSIONS), codename__in=wanted
        )
    )
    return group


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
) -> Project:
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
    project.full_clean()
    project.save()
    return project


@transaction.atomic
def member_add(
    *, project: Project, username: str, role: str, password: str | None = None
) -> tuple[Membership, bool]:
    """Adds ``username`` (created when new) to ``project`` with ``role``; returns the
    membership and whether the user was created. Curators get admin access to their projects."""
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}; use one of {Role.values}"})
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if password:
        user.set_password(password)
    elif created:
        user.set_unusable_password()
    if role == Role.CURATOR and not user.is_staff:
        user.is_staff = True
    user.save()
    if role == Role.CURATOR:
        user.groups.add(curators_group())
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": role}
    )
    return membership, created
