"""Sign-in changes in the site-wide audit log (docs/audit.md): two-factor login turned on and
off as the user's own change, a first single sign-on that linked or made an account, and the
roles a groups claim gives, recorded with no actor and a note naming the group."""

from __future__ import annotations

import pytest
from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import AuditEvent, Membership, Role
from config.sso import group_roles
from tests.annotation.accounts.test_mfa import _enrol
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
User = get_user_model()


def _site_wide(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action, project_ref=None).order_by("id"))


def test_two_factor_login_turned_on_and_off(client, alice, django_capture_on_commit_callbacks):
    client.force_login(alice)
    # allauth announces the new authenticator once its transaction commits.
    with django_capture_on_commit_callbacks(execute=True):
        _enrol(client)
    assert Authenticator.objects.filter(user=alice, type="totp").exists()
    client.post("/accounts/2fa/totp/deactivate/", {})
    assert not Authenticator.objects.filter(user=alice).exists()
    # One event each way.
    on, off = _site_wide("sign_in.settings_changed")
    assert (on.before, on.after) == ({"two_factor_login": False}, {"two_factor_login": True})
    assert (off.before, off.after) == ({"two_factor_login": True}, {"two_factor_login": False})
    for event in (on, off):
        assert (event.actor_ref, event.actor_label, event.actor_role) == (alice.pk, "alice", "")
        assert (event.target_type, event.target_ref, event.target_label) == (
            "user",
            str(alice.pk),
            "alice",
        )
        assert event.project_slug == ""
    assert AuditEvent.objects.count() == 2
    # Nothing in the events of the secret the authenticator holds.
    assert "secret" not in f"{on.after} {off.before}"


def test_refused_deactivation_records_nothing(
    client, settings, carol, django_capture_on_commit_callbacks
):
    settings.ARBITER_MFA_REQUIRED_FOR = ("curators",)
    client.force_login(carol)
    with django_capture_on_commit_callbacks(execute=True):
        _enrol(client)
    client.post("/accounts/2fa/totp/deactivate/", {})
    assert Authenticator.objects.filter(user=carol, type="totp").exists()
    (on,) = _site_wide("sign_in.settings_changed")
    assert (on.actor_label, on.actor_role, on.after) == ("carol", "", {"two_factor_login": True})


def test_an_authenticator_deleted_in_the_admin(client, alice):
    """A lost phone: the operator deletes the user's second factor, recorded as the user's
    two-factor login turned off by the operator; nobody adds or changes one there."""
    first = Authenticator.objects.create(user=alice, type="totp", data={"secret": "x"})
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    client.force_login(root)
    assert client.get(reverse("admin:mfa_authenticator_add")).status_code == 403
    url = reverse("admin:mfa_authenticator_delete", args=[first.pk])
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Authenticator.objects.exists()
    again = Authenticator.objects.create(user=alice, type="totp", data={"secret": "y"})
    changelist = reverse("admin:mfa_authenticator_changelist")
    chosen = {"action": "delete_selected", "_selected_action": [again.pk], "post": "yes"}
    assert client.post(changelist, chosen).status_code == 302
    assert not Authenticator.objects.exists()
    events = _site_wide("sign_in.settings_changed")
    assert len(events) == 2
    for event in events:
        assert (event.actor_label, event.actor_role, event.target_label) == (
            "root",
            "operator",
            "alice",
        )
        assert event.after == {"two_factor_login": False}


def test_first_sign_in_linking_an_account(client, sso_settings):
    ann = UserFactory(username="ann", email="ann@example.org")
    # An email Arbiter confirmed (docs/sso.md): only such an account is taken over.
    EmailAddress.objects.create(user=ann, email="ann@example.org", verified=True)
    sso_settings.account("ann-sub", email="ann@example.org", email_verified=True)
    client.get(sso_settings.sign_in(client, "ann-sub"))
    assert int(client.session["_auth_user_id"]) == ann.pk
    (event,) = _site_wide("account.sso_linked")
    assert (event.actor_label, event.target_type, event.target_label) == ("ann", "user", "ann")
    assert event.after == {
        "provider_account": f"{sso_settings.issuer}#ann-sub",
        "email": "ann@example.org",
    }
    assert not _site_wide("account.sso_created")
    # A later sign-in links nothing new and records nothing.
    client.logout()
    client.get(sso_settings.sign_in(client, "ann-sub"))
    assert AuditEvent.objects.count() == 1


def test_first_sign_in_making_an_account_with_group_roles(client, sso_settings, settings, project):
    settings.ARBITER_OIDC_GROUPS_CLAIM = "groups"
    settings.ARBITER_OIDC_GROUP_ROLES = group_roles(f"labellers={project.slug}:annotator")
    sso_settings.account(
        "new-sub",
        email="new@example.org",
        email_verified=True,
        preferred_username="newbie",
        groups=["labellers"],
    )
    client.get(sso_settings.sign_in(client, "new-sub"))
    user = User.objects.get(pk=client.session["_auth_user_id"])
    (created,) = _site_wide("account.sso_created")
    assert (created.actor_ref, created.target_ref) == (user.pk, str(user.pk))
    assert created.after == {
        "provider_account": f"{sso_settings.issuer}#new-sub",
        "username": "newbie",
        "email": "new@example.org",
    }
    # The role from the groups claim: a membership change made by the provider's mapping.
    membership = Membership.objects.get(user=user, project=project)
    (added,) = AuditEvent.objects.filter(action="member.added")
    assert (added.project_slug, added.target_ref) == ("demo", str(membership.pk))
    assert (added.actor_ref, added.actor_label, added.actor_role) == (None, "", "")
    assert added.after == {
        "user": "newbie",
        "role": Role.ANNOTATOR,
        "account_created": False,
        "note": "single sign-on: the group 'labellers' in ARBITER_OIDC_GROUP_ROLES",
    }
