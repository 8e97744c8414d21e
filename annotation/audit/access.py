"""Who may read an audit log: a project's curators (superusers act as curators) and the
site's operators (staff and superusers); the site-wide log, operators only."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from annotation.core.access import CURATORS, get_project_for_user, is_operator
from annotation.models import Membership, Project, Role


def get_audited_project(user, slug: str) -> tuple[Project, str]:
    """The project whose log ``user`` may read and the role its tabs are shown for: 404
    for outsiders, 403 for members who are not curators, unless ``user`` is an operator."""
    if is_operator(user):
        project = Project.objects.filter(slug=slug).first()
        if project is not None:
            role = (
                Membership.objects.filter(project=project, user=user)
                .values_list("role", flat=True)
                .first()
            )
            # Superusers act as curators everywhere; a staff member's tabs are their role's.
            return project, role or (Role.CURATOR if user.is_superuser else "")
    return get_project_for_user(user, slug, roles=CURATORS)


def check_site_auditor(user) -> None:
    """Refuses anyone but an operator the site-wide log."""
    if not is_operator(user):
        raise PermissionDenied("Only operators read the site-wide audit log.")
