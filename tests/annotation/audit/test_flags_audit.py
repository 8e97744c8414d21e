"""Curators' answers to flags in the audit log: a reply (its text, cut as long texts are) and a
resolution (resolved before and after), in the service's transaction, named by the flag's and
the pair's ids only: never the flag's author, her note or anyone's vote (docs/audit.md)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.audit.services import AUDIT_TEXT_MAX_CHARS
from annotation.core.errors import InvalidInput
from annotation.flags.services import flag_reply, flag_resolve
from annotation.models import AuditEvent, Flag, FlagComment, PairStatus, Role
from tests.factories import PairFactory, VoteFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def flag(project, alice):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, external_id="p-7")
    VoteFactory(pair=pair, annotator=alice)
    return Flag.objects.create(pair=pair, annotator=alice, kind="other", note="ALICE-NOTE")


def _logged(event: AuditEvent) -> str:
    return f"{event.target_label} {event.before} {event.after}"


def test_reply_and_resolve_over_the_api(api_for, flag, carol):
    curator = api_for(carol)
    url = f"/api/v1/projects/demo/flags/{flag.pk}/replies/"
    response = curator.post(url, {"text": "Fixed the image.", "resolve": True}, format="json")
    assert response.status_code == 201
    replied, resolved = AuditEvent.objects.order_by("id")
    comment = FlagComment.objects.get()
    assert (replied.action, replied.before, replied.after) == (
        "flag.replied",
        {},
        {"reply": "Fixed the image.", "comment": comment.pk},
    )
    assert (resolved.action, resolved.before, resolved.after) == (
        "flag.resolved",
        {"resolved": False},
        {"resolved": True},
    )
    for event in (replied, resolved):
        assert (event.actor_label, event.actor_role) == ("carol", Role.CURATOR)
        assert (event.project_slug, event.target_type) == ("demo", "flag")
        assert (event.target_ref, event.target_label) == (
            str(flag.pk),
            f"flag {flag.pk} on pair p-7",
        )
        assert "alice" not in _logged(event)
        assert "ALICE-NOTE" not in _logged(event)
        assert "vote" not in _logged(event)
    # Resolving it again changes nothing and records nothing.
    assert curator.post(f"/api/v1/projects/demo/flags/{flag.pk}/resolve/").status_code == 200
    assert AuditEvent.objects.count() == 2


def test_resolve_from_the_pair_page(client_for, flag, carol, project):
    resolve = reverse("pair-flag-resolve", args=[project.slug, flag.pair_id, flag.pk])
    assert client_for(carol).post(resolve).status_code == 302
    (event,) = AuditEvent.objects.all()
    assert (event.action, event.actor_label, event.after) == (
        "flag.resolved",
        "carol",
        {"resolved": True},
    )


def test_refused_replies_and_outsiders_record_nothing(api_for, flag, alice, dave, eve):
    with pytest.raises(InvalidInput, match="text"):
        flag_reply(flag=flag, author=alice, text="   ")
    for user in (eve, alice, dave):
        api = api_for(user)
        api.post(f"/api/v1/projects/demo/flags/{flag.pk}/replies/", {"text": "x"}, format="json")
        api.post(f"/api/v1/projects/demo/flags/{flag.pk}/resolve/")
    assert not AuditEvent.objects.exists()
    assert not FlagComment.objects.exists()


def test_a_long_reply_keeps_its_start_and_length(flag, carol):
    text = "The second image is cropped. " * 150
    flag_reply(flag=flag, author=carol, text=text)
    (event,) = AuditEvent.objects.all()
    kept = event.after["reply"]
    assert kept.startswith(text.strip()[:AUDIT_TEXT_MAX_CHARS])
    assert kept.endswith(f"… ({len(text.strip()):,} characters)")


def test_a_failed_event_loses_the_resolution_too(flag, carol, monkeypatch):
    """The event and the change commit together: an event that cannot be written leaves the
    flag open."""

    def broken(**kwargs):
        raise RuntimeError("the log is down")

    monkeypatch.setattr("annotation.flags.services.audit_record", broken)
    with pytest.raises(RuntimeError):
        flag_resolve(flag=flag, by=carol)
    flag.refresh_from_db()
    assert flag.is_open
