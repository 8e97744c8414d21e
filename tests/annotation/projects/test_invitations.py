"""Invitations by email against a real SMTP server (aiosmtpd, tests/smtp_server.py): the
message arrives, its link makes the account and signs it in once; used again, expired,
resent or revoked, the page says so. Who may invite, CSRF, and the form's errors."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from allauth.account import signals as allauth_signals
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Invitation, Membership, Role
from annotation.projects.invitations import invitation_accept, invitation_create, invitation_token
from config.queues import MAIL
from tests.conftest import PASSWORD

BASE_URL = "https://arbiter.example.org"
NEW_PASSWORD = "a fresh and long passphrase"


@pytest.fixture(autouse=True)
def _mail(settings, smtp_server):
    smtp_server.use(settings)
    settings.ARBITER_BASE_URL = BASE_URL


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def link_in(message) -> str:
    """The path of the one link on ARBITER_BASE_URL in a message's body."""
    body = message.get_content()
    (link,) = re.findall(re.escape(BASE_URL) + r"(/\S+)", body)
    return link


def signs_in(username: str, password: str) -> bool:
    """Whether the login page takes this username and password."""
    response = Client().post(reverse("login"), {"username": username, "password": password})
    return response.status_code == 302


def invite(client, project, email: str, role: str = Role.ANNOTATOR, capture=None):
    url = reverse("project-invite", args=[project.slug])
    with capture(execute=True):
        return client.post(url, {"email": email, "role": role})


def test_the_invitation_arrives_and_its_link_works_once(
    client_for,
    carol,
    project,
    smtp_server,
    django_capture_on_commit_callbacks,
):
    response = invite(
        client_for(carol),
        project,
        "Newcomer@Example.org",
        Role.RESEARCHER,
        capture=django_capture_on_commit_callbacks,
    )
    assert response.status_code == 302
    message = smtp_server.wait_for("Newcomer@example.org")
    assert message["Subject"] == "Invitation to Demo project"
    assert "as researcher" in message.get_content()
    link = link_in(message)

    visitor = Client()
    page = visitor.get(link)
    assert page.status_code == 200
    assert "Join Demo project" in text_of(page)
    mismatch = visitor.post(link, {"new_password1": NEW_PASSWORD, "new_password2": "other"})
    assert mismatch.status_code == 400
    assert "The two password fields didn" in text_of(mismatch)
    accepted = visitor.post(link, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert accepted.status_code == 302
    assert accepted["Location"] == reverse("project-detail", args=[project.slug])
    assert visitor.get(accepted["Location"]).status_code == 200  # signed in, in the project
    user = get_user_model().objects.get(email__iexact="newcomer@example.org")
    assert Membership.objects.get(project=project, user=user).role == Role.RESEARCHER
    assert signs_in(user.username, NEW_PASSWORD)

    again = Client()
    for response in (
        again.get(link),
        again.post(link, {"new_password1": "x" * 20, "new_password2": "x" * 20}),
    ):
        assert response.status_code == 410
        assert "Invitation already used" in text_of(response)
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)  # the second use changed nothing


def test_an_expired_invitation_is_refused_with_a_page_that_says_so(
    carol,
    project,
    smtp_server,
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks(execute=True):
        invitation = invitation_create(
            project=project, email="late@example.org", role=Role.ANNOTATOR, invited_by=carol
        )
    link = link_in(smtp_server.wait_for("late@example.org"))
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(1))
    visitor = Client()
    page = visitor.get(link)
    assert page.status_code == 410
    assert "Invitation expired" in text_of(page)
    posted = visitor.post(link, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert posted.status_code == 410
    assert not get_user_model().objects.filter(email="late@example.org").exists()


def test_resend_replaces_the_link_and_revoke_closes_it(
    client_for,
    carol,
    project,
    smtp_server,
    django_capture_on_commit_callbacks,
):
    curator = client_for(carol)
    invite(curator, project, "twice@example.org", capture=django_capture_on_commit_callbacks)
    first = link_in(smtp_server.wait_for("twice@example.org"))
    invitation = Invitation.objects.get(email="twice@example.org")
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now())
    assert "expired" in text_of(curator.get(reverse("project-settings", args=[project.slug])))

    action = "project-invitation-action"
    with django_capture_on_commit_callbacks(execute=True):
        resent = curator.post(reverse(action, args=[project.slug, invitation.pk, "resend"]))
    assert resent.status_code == 302
    second = link_in(smtp_server.wait_for("twice@example.org", count=2))
    assert second != first
    assert Client().get(first).status_code == 404
    assert Client().get(second).status_code == 200

    curator.post(reverse(action, args=[project.slug, invitation.pk, "revoke"]))
    page = Client().get(second)
    assert page.status_code == 410
    assert "Invitation revoked" in text_of(page)
    settings_page = curator.get(reverse("project-settings", args=[project.slug])).content
    assert f'id="invitation-{invitation.pk}"'.encode() not in settings_page


def test_an_existing_account_signs_in_and_accepts(
    client_for,
    carol,
    eve,
    project,
    smtp_server,
    django_capture_on_commit_callbacks,
):
    eve.email = "eve@example.org"
    eve.save(update_fields=["email"])
    capture = django_capture_on_commit_callbacks
    invite(client_for(carol), project, "eve@example.org", capture=capture)
    link = link_in(smtp_server.wait_for("eve@example.org"))
    visitor = Client()
    page = visitor.get(link)
    assert "sign in as eve" in text_of(page)
    # Someone else holding the link cannot set eve's password with it.
    visitor.post(link, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    eve.refresh_from_db()
    assert eve.check_password(PASSWORD)
    assert not Membership.objects.filter(project=project, user=eve).exists()
    visitor.post(reverse("login"), {"username": "eve", "password": PASSWORD})
    accepted = visitor.post(link)
    assert accepted.status_code == 302
    assert Membership.objects.get(project=project, user=eve).role == Role.ANNOTATOR


def _invited(carol, project, smtp_server, capture, email: str) -> str:
    with capture(execute=True):
        invitation_create(project=project, email=email, role=Role.CURATOR, invited_by=carol)
    return link_in(smtp_server.wait_for(email))


def test_an_account_named_after_the_address_is_not_taken(
    carol, project, smtp_server, django_capture_on_commit_callbacks
):
    # A single sign-on user once chose the address as their username (no email kept): the
    # invitation is not theirs, and its new account cannot take that name.
    squatter = get_user_model().objects.create_user("named@example.org", "", None)
    link = _invited(
        carol, project, smtp_server, django_capture_on_commit_callbacks, "named@example.org"
    )
    visitor = Client()
    assert "sign in as" not in text_of(visitor.get(link))
    response = visitor.post(link, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert response.status_code == 400
    assert "the username named@example.org is another account's" in text_of(response)
    squatter.refresh_from_db()
    assert not squatter.has_usable_password()
    assert not Membership.objects.filter(user=squatter).exists()
    assert "_auth_user_id" not in visitor.session


def test_the_link_never_sets_a_password_on_an_account_without_one(
    carol, project, smtp_server, django_capture_on_commit_callbacks
):
    # An account single sign-on made (no usable password), with two-factor login on: whoever
    # holds the link must sign in as it, second factor included, to accept.
    owner = get_user_model().objects.create_user("sso-owner", "owner@example.org", None)
    Authenticator.objects.create(user=owner, type=Authenticator.Type.TOTP, data={})
    link = _invited(
        carol, project, smtp_server, django_capture_on_commit_callbacks, "owner@example.org"
    )
    visitor = Client()
    page = visitor.get(link)
    assert "sign in as sso-owner" in text_of(page)
    assert 'id="id_new_password1"' not in page.text
    response = visitor.post(link, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert response.status_code == 403
    assert "_auth_user_id" not in visitor.session
    owner.refresh_from_db()
    assert not owner.has_usable_password()
    assert not Membership.objects.filter(user=owner).exists()
    with pytest.raises(ValidationError, match=r"An account with the email owner@example\.org"):
        invitation_accept(
            invitation=Invitation.objects.get(email="owner@example.org"),
            password=NEW_PASSWORD,
        )


def test_a_new_account_is_signed_in_through_the_login_stages(
    carol, project, smtp_server, django_capture_on_commit_callbacks, settings
):
    # A curator's role that requires two-factor login: the sign-in goes through allauth's
    # stages and Arbiter's receivers, so the new curator is sent to set it up.
    settings.ARBITER_MFA_REQUIRED_FOR = ("curators",)
    link = _invited(
        carol, project, smtp_server, django_capture_on_commit_callbacks, "lead@example.org"
    )
    visitor = Client()
    signed_in = []
    receiver = lambda sender, user, **kwargs: signed_in.append(user.pk)  # noqa: E731
    allauth_signals.user_logged_in.connect(receiver, weak=False)
    try:
        response = visitor.post(
            link, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
        )
    finally:
        allauth_signals.user_logged_in.disconnect(receiver)
    assert response.status_code == 302
    lead = get_user_model().objects.get(email="lead@example.org")
    assert int(visitor.session["_auth_user_id"]) == lead.pk
    assert signed_in == [lead.pk]  # allauth's login flow, which asks for a second factor
    assert visitor.get(response["Location"])["Location"] == "/accounts/2fa/totp/activate/"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"email": "not-an-address", "role": "annotator"}, "Enter a valid email address."),
        ({"email": "x@example.org", "role": "boss"}, "Select a valid choice."),
        ({"email": "ALICE@example.org", "role": "curator"}, "is already a member"),
    ],
)
def test_the_form_names_what_is_wrong(client_for, carol, alice, project, data, error):
    alice.email = "alice@example.org"
    alice.save(update_fields=["email"])
    response = client_for(carol).post(reverse("project-invite", args=[project.slug]), data)
    assert response.status_code == 400
    assert error in text_of(response)
    assert not Invitation.objects.exists()


def test_a_second_invitation_to_one_address_is_refused(client_for, carol, project):
    curator = client_for(carol)
    url = reverse("project-invite", args=[project.slug])
    assert curator.post(url, {"email": "one@example.org", "role": "annotator"}).status_code == 302
    again = curator.post(url, {"email": "ONE@example.org", "role": "curator"})
    assert again.status_code == 400
    assert "already invited" in text_of(again)


def test_outsiders_get_404_annotators_403_and_posts_need_csrf(client, alice, eve, carol, project):
    invitation = invitation_create(
        project=project, email="p@example.org", role=Role.ANNOTATOR, invited_by=carol
    )
    urls = [
        reverse("project-invite", args=[project.slug]),
        reverse("project-invitation-action", args=[project.slug, invitation.pk, "revoke"]),
        reverse("project-invitation-action", args=[project.slug, invitation.pk, "resend"]),
    ]
    data = {"email": "q@example.org", "role": "curator"}
    for user, status in ((eve, 404), (alice, 403)):
        client.force_login(user)
        assert [client.post(url, data).status_code for url in urls] == [status] * 3
    client.logout()
    assert all(client.post(url, data).status_code == 302 for url in urls)  # to the login page
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(carol)
    assert [guarded.post(url, data).status_code for url in urls] == [403] * 3
    invitation.refresh_from_db()
    assert invitation.state == "pending"
    assert Invitation.objects.count() == 1


def test_another_projects_invitation_is_404(client_for, carol, project, other_project):
    invitation = invitation_create(
        project=other_project, email="p@example.org", role=Role.ANNOTATOR, invited_by=None
    )
    url = reverse("project-invitation-action", args=[project.slug, invitation.pk, "revoke"])
    assert client_for(carol).post(url).status_code == 404


def test_a_forged_link_is_not_found():
    response = Client().get(reverse("invitation", args=["made-up:token"]))
    assert response.status_code == 404
    assert "Invitation not found" in text_of(response)


@pytest.mark.django_db(transaction=True)
def test_the_invite_command_mails_the_link(carol, project, smtp_server):
    call_command("invite", project.slug, "cli@example.org", "--role", "curator")
    message = smtp_server.wait_for("cli@example.org")
    assert "as curator" in message.get_content()
    assert Client().get(link_in(message)).status_code == 200
    with pytest.raises(CommandError, match="already invited"):
        call_command("invite", project.slug, "cli@example.org")
    with pytest.raises(CommandError, match="not an email address"):
        call_command("invite", project.slug, "nobody")


@pytest.mark.django_db(transaction=True)
def test_mail_goes_through_starttls_with_the_urls_credentials(
    settings,
    carol,
    project,
    smtp_tls_server,
):
    smtp_tls_server.use(settings)
    invitation_create(project=project, email="tls@example.org", role="annotator", invited_by=None)
    assert link_in(smtp_tls_server.wait_for("tls@example.org")).startswith("/invitations/")


def test_the_link_stays_out_of_the_task_log(
    carol,
    project,
    smtp_server,
    django_capture_on_commit_callbacks,
    caplog,
):
    with django_capture_on_commit_callbacks(execute=True):
        invitation = invitation_create(
            project=project, email="quiet@example.org", role=Role.ANNOTATOR, invited_by=carol
        )
    link = link_in(smtp_server.wait_for("quiet@example.org"))
    assert "annotation.mail_send" in caplog.text
    assert invitation.key not in caplog.text
    assert link.split("/")[2] not in caplog.text


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_on_the_mail_queue_sends_the_invitation(
    celery_worker_process, client, carol, project, smtp_server
):
    celery_worker_process(
        queues=MAIL,
        concurrency=1,
        extra_env={"ARBITER_EMAIL_URL": smtp_server.url, "ARBITER_BASE_URL": BASE_URL},
    )
    client.force_login(carol)
    response = client.post(
        reverse("project-invite", args=[project.slug]),
        {"email": "queued@example.org", "role": "annotator"},
    )
    assert response.status_code == 302
    message = smtp_server.wait_for("queued@example.org")
    assert Client().get(link_in(message)).status_code == 200


def test_accepting_needs_the_csrf_token(carol, project):
    invitation = invitation_create(
        project=project, email="csrf@example.org", role=Role.ANNOTATOR, invited_by=carol
    )
    link = reverse("invitation", args=[invitation_token(invitation)])
    guarded = Client(enforce_csrf_checks=True)
    data = {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    assert guarded.post(link, data).status_code == 403
    invitation.refresh_from_db()
    assert invitation.state == "pending"
