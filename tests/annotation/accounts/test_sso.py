"""Single sign-on against a real OpenID provider (tests/oidc_server.py), over HTTP with Django's
test client: which account a sign-in takes, refused sign-ins, roles from the groups claim, and
local passwords switched off (docs/sso.md)."""

from __future__ import annotations

import time
from urllib.parse import parse_qsl, urlencode

import pytest
from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse

from annotation.models import Membership, Role
from annotation.projects.invitations import invitation_create, invitation_token
from config.sso import group_roles
from tests.conftest import PASSWORD
from tests.factories import UserFactory

NEW_PASSWORD = "a fresh and long passphrase"

pytestmark = pytest.mark.django_db
User = get_user_model()


def _signed_in(client):
    return client.get("/account/").status_code == 200


def test_verified_email_of_one_account_links_to_it(client, sso_settings):
    ann = UserFactory(username="ann", email="Ann@Example.org")
    # Arbiter confirmed the email (an operator in the admin: docs/sso.md).
    EmailAddress.objects.create(user=ann, email="ann@example.org", verified=True)
    elsewhere = Client()
    assert elsewhere.post("/login/", {"username": "ann", "password": PASSWORD}).status_code == 302
    sso_settings.account("ann-sub", email="ann@example.org", email_verified=True)
    response = client.get(sso_settings.sign_in(client, "ann-sub"))
    assert response.status_code == 302
    assert int(client.session["_auth_user_id"]) == ann.pk
    # Linking signs the account out everywhere else; with local passwords on it keeps its own.
    assert not _signed_in(elsewhere)
    ann.refresh_from_db()
    assert ann.check_password(PASSWORD)
    account = SocialAccount.objects.get(user=ann)
    # Keyed by (issuer, subject): the same subject at another issuer is another account.
    assert account.uid == f"{sso_settings.issuer}#ann-sub"
    # A second sign-in takes the linked account, whatever the email says now.
    client.logout()
    sso_settings.account("ann-sub", email="changed@example.org", email_verified=False)
    client.get(sso_settings.sign_in(client, "ann-sub"))
    assert int(client.session["_auth_user_id"]) == ann.pk


def test_unverified_email_makes_a_new_account_without_a_role(client, sso_settings, project):
    owner = UserFactory(username="owner", email="taken@example.org")
    sso_settings.account("mallory", email="taken@example.org", email_verified=False)
    client.get(sso_settings.sign_in(client, "mallory"))
    user = User.objects.get(pk=client.session["_auth_user_id"])
    assert user != owner
    assert user.email == ""  # an unverified address is not kept
    assert not user.has_usable_password()
    assert not Membership.objects.filter(user=user).exists()
    assert not SocialAccount.objects.filter(user=owner).exists()
    # No role: the new account is an outsider to every project.
    assert client.get(f"/p/{project.slug}/").status_code == 404


def _refused(client, response, text: str) -> None:
    assert response.status_code == 403
    assert text in response.text
    assert "_auth_user_id" not in client.session


def test_an_email_arbiter_never_confirmed_takes_no_account(client, sso_settings):
    # A curator can make an account with any email (Settings, "Add a member"): the provider's
    # verified email must not hand that account over, nor the provider's user to that account.
    planted = UserFactory(username="planted", email="victim@example.org")
    sso_settings.account("victim-sub", email="victim@example.org", email_verified=True)
    response = client.get(sso_settings.sign_in(client, "victim-sub"))
    _refused(client, response, "Arbiter never confirmed that this email is that account")
    assert "Ask an operator to link it" in response.text
    assert not SocialAccount.objects.exists()
    assert list(User.objects.all()) == [planted]


def test_an_operator_or_already_linked_account_is_never_taken(client, sso_settings):
    boss = UserFactory(username="boss", email="boss@example.org", is_staff=True)
    EmailAddress.objects.create(user=boss, email="boss@example.org", verified=True)
    sso_settings.account("boss-sub", email="boss@example.org", email_verified=True)
    response = client.get(sso_settings.sign_in(client, "boss-sub"))
    _refused(client, response, "is an operator&#x27;s, which single sign-on never takes over")
    assert not SocialAccount.objects.exists()

    ann = UserFactory(username="ann", email="ann@example.org")
    EmailAddress.objects.create(user=ann, email="ann@example.org", verified=True)
    sso_settings.account("ann-sub", email="ann@example.org", email_verified=True)
    client.get(sso_settings.sign_in(client, "ann-sub"))
    assert SocialAccount.objects.get().user == ann
    client.logout()
    # Another subject at the provider now claims the same email: refused.
    sso_settings.account("other-sub", email="ann@example.org", email_verified=True)
    response = client.get(sso_settings.sign_in(client, "other-sub"))
    _refused(client, response, "is linked to another single sign-on user already")
    assert SocialAccount.objects.count() == 1


def test_an_accepted_invitation_proves_the_email_and_passwords_off_end_the_password(
    client, sso_settings, settings, smtp_server, project, carol
):
    path = _invitation(settings, smtp_server, project, carol, "inv@example.org")
    Client().post(path, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    member = User.objects.get(email="inv@example.org")
    assert member.check_password(NEW_PASSWORD)
    settings.ARBITER_LOCAL_PASSWORDS = False
    sso_settings.account("inv-sub", email="inv@example.org", email_verified=True)
    client.get(sso_settings.sign_in(client, "inv-sub"))
    assert int(client.session["_auth_user_id"]) == member.pk
    member.refresh_from_db()
    assert not member.has_usable_password()


def test_a_username_from_the_provider_never_holds_an_email(client, sso_settings):
    # preferred_username is the provider user's choice: an address there could later pass
    # for the address an invitation or a curator names.
    sso_settings.account(
        "mal-sub",
        email="mal@example.org",
        email_verified=False,
        preferred_username="victim@example.org",
    )
    client.get(sso_settings.sign_in(client, "mal-sub"))
    user = User.objects.get(pk=client.session["_auth_user_id"])
    assert "@" not in user.username
    assert user.username.startswith("victim")


def test_verified_email_of_two_accounts_is_refused(client, sso_settings):
    UserFactory(username="twin1", email="twin@example.org")
    UserFactory(username="twin2", email="TWIN@example.org")
    sso_settings.account("twin-sub", email="twin@example.org", email_verified=True)
    response = client.get(sso_settings.sign_in(client, "twin-sub"))
    assert response.status_code == 403
    assert "More than one Arbiter account has the email twin@example.org" in response.text
    assert "_auth_user_id" not in client.session
    assert not SocialAccount.objects.exists()
    assert User.objects.count() == 2


def test_new_verified_email_makes_an_account_with_it(client, sso_settings):
    sso_settings.account(
        "new-sub", email="new@example.org", email_verified=True, preferred_username="newbie"
    )
    client.get(sso_settings.sign_in(client, "new-sub"))
    user = User.objects.get(pk=client.session["_auth_user_id"])
    assert (user.username, user.email) == ("newbie", "new@example.org")


def test_wrong_state_is_refused(client, sso_settings):
    sso_settings.account("state-sub", email="s@example.org", email_verified=True)
    callback = sso_settings.sign_in(client, "state-sub")
    path, _, query = callback.partition("?")
    params = dict(parse_qsl(query))
    params["state"] = "forged" + params["state"][6:]
    response = client.get(f"{path}?{urlencode(params)}")
    assert "Sign-in failed" in response.text
    assert not _signed_in(client)
    assert not User.objects.filter(email="s@example.org").exists()


def test_expired_code_is_refused(client, sso_settings):
    # The provider gives accounts named "expired..." a code that lives one second.
    sso_settings.account("expired-sub", email="late@example.org", email_verified=True)
    callback = sso_settings.sign_in(client, "expired-sub")
    time.sleep(2.5)
    response = client.get(callback)
    assert "Sign-in failed" in response.text
    assert not _signed_in(client)
    assert not User.objects.filter(email="late@example.org").exists()


def test_groups_claim_gives_the_mapped_roles(client, sso_settings, settings, project, carol):
    settings.ARBITER_OIDC_GROUPS_CLAIM = "groups"
    settings.ARBITER_OIDC_GROUP_ROLES = group_roles(
        f"labellers={project.slug}:annotator,leads={project.slug}:curator,x=missing:curator"
    )
    sso_settings.account("g-sub", email="g@example.org", email_verified=True, groups=["labellers"])
    client.get(sso_settings.sign_in(client, "g-sub"))
    user = User.objects.get(pk=client.session["_auth_user_id"])
    assert Membership.objects.get(user=user, project=project).role == Role.ANNOTATOR
    # A role the member has is Arbiter's: a later group does not change it.
    client.logout()
    sso_settings.account("g-sub", email="g@example.org", email_verified=True, groups=["leads"])
    client.get(sso_settings.sign_in(client, "g-sub"))
    assert Membership.objects.get(user=user, project=project).role == Role.ANNOTATOR


def test_login_page_offers_the_provider(client, sso_settings):
    page = client.get("/login/").text
    assert "Sign in with Example ID" in page
    assert 'id="id_password"' in page


def test_local_passwords_off(client, sso_settings, settings, alice):
    settings.ARBITER_LOCAL_PASSWORDS = False
    page = client.get("/login/").text
    assert "Sign in with Example ID" in page
    assert 'id="id_password"' not in page
    response = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 403
    assert "Passwords are switched off here: sign in with Example ID." in response.text
    assert "_auth_user_id" not in client.session
    assert client.post("/password-reset/", {"email": "a@example.org"}).status_code == 403
    alice.is_superuser = alice.is_staff = True
    alice.save(update_fields=["is_superuser", "is_staff"])
    admin = client.post("/admin/login/", {"username": "alice", "password": PASSWORD})
    assert "Sign in on the site&#x27;s login page" in admin.text
    assert "_auth_user_id" not in client.session
    client.force_login(alice)
    response = client.post(
        "/account/",
        {"old_password": PASSWORD, "new_password1": "n3w-secret-pw", "new_password2": "x"},
    )
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("labellers=demo", "labellers=demo"),
        ("labellers=demo:boss", "labellers=demo:boss"),
        ("=demo:curator", "=demo:curator"),
    ],
)
def test_group_roles_refuse_bad_values(value, named):
    with pytest.raises(ImproperlyConfigured, match="ARBITER_OIDC_GROUP_ROLES") as caught:
        group_roles(value)
    assert named in str(caught.value)


def _invitation(settings, smtp_server, project, carol, email: str) -> str:
    smtp_server.use(settings)
    invitation = invitation_create(
        project=project, email=email, role=Role.RESEARCHER, invited_by=carol
    )
    return reverse("invitation", args=[invitation_token(invitation)])


def test_invitation_accepted_after_signing_in_with_a_verified_email(
    client, sso_settings, settings, smtp_server, project, carol
):
    path = _invitation(settings, smtp_server, project, carol, "inv@example.org")
    page = client.get(path).text
    assert "Sign in with Example ID" in page
    assert 'id="id_new_password1"' in page
    sso_settings.account("inv-sub", email="INV@example.org", email_verified=True)
    response = client.get(sso_settings.sign_in(client, "inv-sub", next_url=path))
    assert response["Location"] == path
    assert "Accept the invitation" in client.get(path).text
    response = client.post(path)
    assert response.status_code == 302
    user = User.objects.get(pk=client.session["_auth_user_id"])
    assert Membership.objects.get(user=user, project=project).role == Role.RESEARCHER


def test_invitation_not_accepted_with_an_unverified_email(
    client, sso_settings, settings, smtp_server, project, carol
):
    settings.ARBITER_LOCAL_PASSWORDS = False
    path = _invitation(settings, smtp_server, project, carol, "unv@example.org")
    assert 'id="id_new_password1"' not in client.get(path).text
    sso_settings.account("unv-sub", email="unv@example.org", email_verified=False)
    client.get(sso_settings.sign_in(client, "unv-sub", next_url=path))
    page = client.get(path).text
    assert "Accept the invitation" not in page
    assert "whose email is not unv@example.org" in page
    assert client.post(path, {"new_password1": "x", "new_password2": "x"}).status_code == 403
    assert not Membership.objects.filter(project=project, role=Role.RESEARCHER).exists()


def test_the_sign_in_button_needs_csrf(sso_settings):
    guarded = Client(enforce_csrf_checks=True)
    assert guarded.post("/accounts/oidc/sso/login/", {"next": "/"}).status_code == 403
