"""Access helpers: every view fetches a project (or an object in it) through these, so no
view forgets the membership check. Outsiders get 404, not 403: a project's existence is private."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404

from annotation.models import Membership, Project, Release, Role

CURATORS = (Role.CURATOR,)
STAFF_ROLES = (Role.CURATOR, Role.RESEARCHER)
ANYONE = (Role.ANNOTATOR, Role.CURATOR, Role.RESEARCHER)


def get_project_for_user(user, slug: str, roles: Iterable[str] = ANYONE) -> tuple[Project, str]:
    """The project with this slug and the user's role in it. 404 when the user is not a member
    (outsiders learn nothing), 403 when a member lacks one of ``roles``. Superusers act as
    curators everywhere."""
    if not user.is_authenticated:
        raise Http404("No such project")
    roles = tuple(roles)
    row = (
        Membership.objects.select_related("project")
        .filter(project__slug=slug, user=user)
        .only("role", "project")
        .first()
    )
    if row is not None:
        if row.role in roles:
            return row.project, row.role
        if not user.is_superuser:
            raise PermissionDenied("Your role in this project does not allow this")
    if user.is_superuser:
        project = Project.objects.filter(slug=slug).first()
        if project is not None:
            return project, Role.CURATOR
    raise Http404("No such project")


def get_release_for_user(
    user, slug: str, version: str, roles: Iterable[str] = STAFF_ROLES
) -> tuple[Release, str]:
    """The release with this version in the user's project and their role: 404 for outsiders
    and for versions the project does not have (another project's included), 403 for members
    without one of ``roles`` (annotators never see releases)."""
    project, role = get_project_for_user(user, slug, roles=roles)
    release = (
        Release.objects.filter(project=project, version=version)
        .select_related("project", "created_by", "published_by")
        .first()
    )
    if release is None:
        raise Http404("No such release")
    return release, role


def is_operator(user) -> bool:
    """Operators run the installation: staff and superusers (judges, every project)."""
    return user.is_authenticated and (user.is_staff or user.is_superuser)


def may_create_projects(user) -> bool:
    """Whether ``user`` may create a project in the app: operators always; with
    ``ARBITER_PROJECT_CREATORS=curators`` (the default) also anyone who curates a project.
    Someone who is only an annotator or a researcher asks a curator or an operator."""
    if is_operator(user):
        return True
    if not user.is_authenticated or settings.ARBITER_PROJECT_CREATORS != "curators":
        return False
    return Membership.objects.filter(user=user, role=Role.CURATOR).exists()
