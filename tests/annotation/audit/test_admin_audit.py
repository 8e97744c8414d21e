"""What operators change or delete in the Django admin goes to the audit log too, with the
fields the form changed; a deleted project's events stay (docs/audit.md)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import AuditEvent, Membership, Project
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(user)
    return client


def test_a_role_changed_in_the_admin_is_audited(operator, project, alice):
    membership = Membership.objects.get(project=project, user=alice)
    url = reverse("admin:annotation_membership_change", args=[membership.pk])
    form = {
        "project": project.pk,
        "user": alice.pk,
        "role": "researcher",
        "gold_judged_since_0": "",
        "gold_judged_since_1": "",
        "claim_cursor": "",
    }
    assert operator.post(url, form).status_code == 302
    (event,) = AuditEvent.objects.all()
    assert (event.action, event.actor_label, event.actor_role) == (
        "admin.changed",
        "root",
        "operator",
    )
    assert (event.before, event.after) == ({"role": "annotator"}, {"role": "researcher"})
    assert (event.project_slug, event.target_type) == ("demo", "membership")


def test_a_project_deleted_in_the_admin_keeps_its_log(operator, project, carol):
    url = reverse("admin:annotation_project_delete", args=[project.pk])
    assert operator.post(url, {"post": "yes"}).status_code == 302
    assert not Project.objects.filter(pk=project.pk).exists()
    (event,) = AuditEvent.objects.all()
    assert (event.action, event.project_slug, event.before) == (
        "admin.deleted",
        "demo",
        {"deleted": "Demo project"},
    )
