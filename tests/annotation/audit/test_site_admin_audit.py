"""Operators' changes in the admin to site-wide rows go to the site-wide audit log: staff
and superuser grants, emails and passwords ("(changed)", never the value), sign-in identities
moved to another account, API keys; rows read-only in the admin can be deleted only with an
event (docs/audit.md). Second factors deleted there: test_sign_in_audit.py."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from allauth.mfa.models import Authenticator
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.models import AuditEvent, Vote
from tests.factories import UserFactory, VoteFactory

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a new and long passphrase 42"


@pytest.fixture
def operator(client):
    user = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(user)
    return client


def _user_form(user, **changes) -> dict:
    joined = timezone.localtime(user.date_joined)
    form = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "is_active": "on",
        "date_joined_0": joined.strftime("%Y-%m-%d"),
        "date_joined_1": joined.strftime("%H:%M:%S"),
        # A field with a callable default carries its initial value, as the page sends it.
        "initial-date_joined_0": joined.strftime("%Y-%m-%d"),
        "initial-date_joined_1": joined.strftime("%H:%M:%S"),
        "last_login_0": "",
        "last_login_1": "",
    }
    form.update(changes)
    return {key: value for key, value in form.items() if value is not False}


def _only_event() -> AuditEvent:
    (event,) = AuditEvent.objects.all()
    return event


def test_making_someone_superuser_and_changing_their_email_is_audited(operator, carol):
    url = reverse("admin:auth_user_change", args=[carol.pk])
    form = _user_form(carol, email="carol@new.example", is_staff="on", is_superuser="on")
    response = operator.post(url, form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    event = _only_event()
    assert (event.action, event.actor_label, event.actor_role) == (
        "admin.changed",
        "root",
        "operator",
    )
    assert (event.project_ref, event.target_type, event.target_label) == (None, "user", "carol")
    assert event.before == {"email": carol.email, "is_staff": False, "is_superuser": False}
    assert event.after == {"email": "carol@new.example", "is_staff": True, "is_superuser": True}
    # Site-wide: on the operators' log, not a project's.
    page = operator.get("/audit/").context["page"]
    assert [(e.action, e.target_label) for e in page.object_list] == [("admin.changed", "carol")]


def test_a_password_set_by_an_operator_is_recorded_as_changed(operator, carol):
    url = reverse("admin:auth_user_password_change", args=[carol.pk])
    form = {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"}
    assert operator.post(url, form).status_code == 302
    carol.refresh_from_db()
    assert carol.check_password(NEW_PASSWORD)
    event = _only_event()
    assert (event.action, event.target_label, event.before, event.after) == (
        "admin.changed",
        "carol",
        {},
        {"password": "(changed)"},
    )


def test_a_refused_password_records_nothing(operator, carol):
    url = reverse("admin:auth_user_password_change", args=[carol.pk])
    form = {"password1": NEW_PASSWORD, "password2": "another", "usable_password": "true"}
    assert operator.post(url, form).status_code == 200
    assert not AuditEvent.objects.exists()


def test_an_account_added_in_the_admin_never_records_its_password(operator):
    url = reverse("admin:auth_user_add")
    form = {
        "username": "newbie",
        "usable_password": "true",
        "password1": NEW_PASSWORD,
        "password2": NEW_PASSWORD,
    }
    assert operator.post(url, form).status_code == 302
    assert get_user_model().objects.filter(username="newbie").exists()
    event = _only_event()
    assert (event.action, event.target_label) == ("admin.added", "newbie")
    assert event.after["password1"] == "(changed)"
    assert NEW_PASSWORD not in json.dumps([event.before, event.after])


def test_moving_a_sign_in_identity_to_another_account_is_audited(operator, carol, alice):
    identity = SocialAccount.objects.create(
        user=carol,
        provider="openid_connect",
        uid="issuer#carol-sub",
        extra_data={"sub": "carol-sub"},
    )
    when = timezone.make_aware(datetime(2026, 1, 2, 3, 4, 5))
    SocialAccount.objects.filter(pk=identity.pk).update(last_login=when, date_joined=when)
    url = reverse("admin:socialaccount_socialaccount_change", args=[identity.pk])
    form = {
        "user": alice.pk,
        "provider": "openid_connect",
        "uid": "issuer#carol-sub",
        "extra_data": '{"sub": "carol-sub"}',
        "initial-extra_data": '{"sub": "carol-sub"}',
        "last_login_0": "2026-01-02",
        "last_login_1": "03:04:05",
        "date_joined_0": "2026-01-02",
        "date_joined_1": "03:04:05",
        "initial-date_joined_0": "2026-01-02",
        "initial-date_joined_1": "03:04:05",
    }
    response = operator.post(url, form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    event = _only_event()
    assert (event.action, event.target_label) == (
        "admin.changed",
        "openid_connect issuer#carol-sub",
    )
    assert (event.before, event.after) == ({"user": "carol"}, {"user": "alice"})


def test_an_api_key_deleted_in_the_admin_is_audited_without_the_key(operator, carol):
    token = Token.objects.create(user=carol)
    url = reverse("admin:authtoken_tokenproxy_delete", args=[carol.pk])
    assert operator.post(url, {"post": "yes"}).status_code == 302
    assert not Token.objects.filter(user=carol).exists()
    event = _only_event()
    assert (event.action, event.target_ref, event.target_label) == (
        "admin.deleted",
        str(carol.pk),
        "API key of carol",
    )
    assert token.key not in json.dumps(
        [event.before, event.after, event.target_ref, event.target_label]
    )


def test_a_vote_deleted_in_the_admin_is_audited_in_its_project(operator, project, alice):
    vote = VoteFactory(pair__project=project, annotator=alice)
    url = reverse("admin:annotation_vote_delete", args=[vote.pk])
    assert operator.post(url, {"post": "yes"}).status_code == 302
    assert not Vote.objects.filter(pk=vote.pk).exists()
    event = _only_event()
    assert (event.action, event.project_slug, event.target_type) == (
        "admin.deleted",
        "demo",
        "vote",
    )


def test_someone_who_is_not_an_operator_removes_no_second_factor(client, project, carol):
    # A curator, even one the old code made staff, gets no admin.
    carol.is_staff = True
    carol.save(update_fields=["is_staff"])
    factor = Authenticator.objects.create(user=carol, type=Authenticator.Type.TOTP, data={})
    client.force_login(carol)
    url = reverse("admin:mfa_authenticator_delete", args=[factor.pk])
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
    assert Authenticator.objects.filter(pk=factor.pk).exists()
    assert not AuditEvent.objects.exists()


def test_an_api_key_made_in_the_admin_names_its_owner_not_the_key(operator, carol):
    assert (
        operator.post(reverse("admin:authtoken_tokenproxy_add"), {"user": carol.pk}).status_code
        == 302
    )
    key = Token.objects.get(user=carol).key
    event = _only_event()
    assert (event.action, event.target_ref, event.after) == (
        "admin.added",
        str(carol.pk),
        {"user": "carol"},
    )
    assert key not in f"{event.target_ref} {event.target_label} {event.after}"
