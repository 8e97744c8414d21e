"""A release's draft and its publication each leave one audit event, by who made them
(docs/audit.md)."""

from __future__ import annotations

import pytest

from annotation.models import AuditEvent
from annotation.releases.services import release_publish
from tests.annotation.releases.conftest import built_release

pytestmark = pytest.mark.django_db


def test_creating_and_publishing_a_release_are_audited(filled, dave):
    release = release_publish(release=built_release(filled, dave), user=dave)
    created, published = AuditEvent.objects.filter(project_ref=filled.pk).order_by("id")
    assert (created.action, created.actor_label, created.actor_role) == (
        "release.created",
        "dave",
        "researcher",
    )
    assert created.after == {"version": "1.0.0", "selection": release.selection}
    assert (published.action, published.target_label) == ("release.published", "demo@1.0.0")
    assert published.before == {"status": "built"}
    assert published.after == {
        "status": "published",
        "manifest_sha256": release.manifest_sha256,
        "archive_sha256": release.archive_sha256,
    }
