"""Projects and accounts in the app (docs/curators.md, "Accounts" and "Creating a project"):
a curator or an operator creates a project from the home page, a member added with a one-time
password must change it at first login, and everyone changes their password on /account/."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from annotation.models import Membership, OneTimePassword, Project, Role
from annotation.projects.services import MAX_GUIDELINES_CHARS, member_add
from tests.conftest import PASSWORD
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NEW = reverse("project-create")
ACCOUNT = reverse("account")


def create_data(**changes) -> dict:
    return {
        "name": "Vision prefs",
        "slug": "vision",
        "scale": "likert6",
        "overlap": 5,
        "consensus_rule": "mmrb2",
        "min_agree": "",
        "guidelines": "# Pick the *better* image",
        **changes,
    }


def test_a_curator_creates_a_project_from_the_home_page(client_for, carol):
    client = client_for(carol)
    home = client.get(reverse("home")).content.decode()
    assert f'href="{NEW}"' in home
    assert client.get(NEW).status_code == 200
    response = client.post(NEW, create_data())
    assert response.status_code == 302
    assert response["Location"] == reverse("project-settings", args=["vision"])
    project = Project.objects.get(slug="vision")
    assert (project.name, project.scale, project.overlap) == ("Vision prefs", "likert6", 5)
    assert (project.consensus_rule, project.min_agree) == ("mmrb2", 3)
    assert project.guidelines == "# Pick the *better* image"
    assert Membership.objects.get(project=project, user=carol).role == Role.CURATOR
    assert client.get(response["Location"]).status_code == 200


def test_project_creation_shares_the_services_validation(client_for, carol, project):
    client = client_for(carol)
    cases = [
        ({"slug": project.slug}, "slug"),  # taken
        ({"overlap": 0}, "overlap"),
        ({"overlap": 2, "min_agree": 3}, "min_agree"),
        ({"consensus_rule": "mmrb2", "scale": "ternary"}, "consensus_rule"),
        ({"guidelines": "x" * (MAX_GUIDELINES_CHARS + 1)}, "guidelines"),
    ]
    for changes, field in cases:
        response = client.post(NEW, create_data(**changes))
        assert response.status_code == 400, changes
        assert field in response.context["form"].errors, (changes, response.context["form"].errors)
    assert not Project.objects.filter(slug="vision").exists()


def test_annotators_researchers_and_outsiders_may_not_create_projects(client_for, alice, dave, eve):
    for user in (alice, dave, eve):
        client = client_for(user)
        assert f'href="{NEW}"' not in client.get(reverse("home")).content.decode()
        assert client.get(NEW).status_code == 403
        assert client.post(NEW, create_data()).status_code == 403
    assert not Project.objects.filter(slug="vision").exists()


def test_with_operators_only_a_curator_is_refused_and_staff_creates(client_for, carol, settings):
    settings.ARBITER_PROJECT_CREATORS = "operators"
    assert client_for(carol).post(NEW, create_data()).status_code == 403
    operator = UserFactory(username="olga", is_staff=True)
    assert client_for(operator).post(NEW, create_data()).status_code == 302
    assert Membership.objects.get(project__slug="vision", user=operator).role == Role.CURATOR


def test_project_creation_needs_csrf(carol):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    assert client.post(NEW, create_data()).status_code == 403
    assert not Project.objects.filter(slug="vision").exists()


def one_time_member(project, username: str = "zoe") -> str:
    """Adds ``username`` as Settings does, returning the one-time password it shows."""
    added = member_add(
        project=project, role=Role.ANNOTATOR, username=username, one_time_password=True
    )
    assert added.one_time_password
    return added.one_time_password


def log_in(client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_a_one_time_password_must_be_changed_at_first_login(project, client, api_for):
    password = one_time_member(project)
    assert log_in(client, "zoe", password).status_code == 302
    overview = reverse("project-detail", args=[project.slug])
    for url in (reverse("home"), overview, reverse("annotate", args=[project.slug])):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(f"{ACCOUNT}?next="), url
    assert client.get(overview, HTTP_HX_REQUEST="true")["HX-Redirect"].startswith(ACCOUNT)
    # The API refuses the session; a token (an operator's) keeps working.
    api = client.get(reverse("api-projects"))
    assert api.status_code == 403
    assert "one-time password" in api.json()["detail"]
    zoe = get_user_model().objects.get(username="zoe")
    assert api_for(zoe).get(reverse("api-projects")).status_code == 200
    page = client.get(ACCOUNT)
    assert page.status_code == 200
    assert "one-time password" in page.content.decode()
    # A password the validators refuse changes nothing.
    weak = {"old_password": password, "new_password1": "password", "new_password2": "password"}
    assert client.post(ACCOUNT, weak).status_code == 400
    assert client.get(reverse("home")).status_code == 302
    changed = client.post(
        f"{ACCOUNT}?next={overview}",
        {"old_password": password, "new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert changed.status_code == 302
    assert changed["Location"] == overview
    assert client.get(overview).status_code == 200, "the session survives the change"
    assert client.get(reverse("api-projects")).status_code == 200
    assert not OneTimePassword.objects.filter(user=zoe).exists()
    client.logout()
    assert log_in(client, "zoe", password).status_code == 200, "the old password is gone"
    assert log_in(client, "zoe", PASSWORD).status_code == 302
    assert client.get(overview).status_code == 200


def test_a_password_set_elsewhere_ends_the_one_time_mark(project, client):
    one_time_member(project)
    zoe = get_user_model().objects.get(username="zoe")
    zoe.set_password(PASSWORD)  # the admin's or changepassword's way
    zoe.save()
    log_in(client, "zoe", PASSWORD)
    assert client.get(reverse("home")).status_code == 200


def test_members_with_their_own_password_are_not_redirected(client, alice, project):
    assert log_in(client, "alice", PASSWORD).status_code == 302
    assert client.get(reverse("home")).status_code == 200


def test_everyone_changes_their_password_on_the_account_page(client, alice, carol):
    for user in (alice, carol):
        client.logout()
        log_in(client, user.username, PASSWORD)
        page = client.get(ACCOUNT)
        assert page.status_code == 200
        assert 'name="old_password"' in page.content.decode()
        new = f"another {user.username} phrase 42"
        wrong = client.post(
            ACCOUNT, {"old_password": "nope", "new_password1": new, "new_password2": new}
        )
        assert wrong.status_code == 400
        assert "old_password" in wrong.context["form"].errors
        mismatch = client.post(
            ACCOUNT, {"old_password": PASSWORD, "new_password1": new, "new_password2": new + "!"}
        )
        assert mismatch.status_code == 400
        done = client.post(
            ACCOUNT, {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
        )
        assert done.status_code == 302
        assert done["Location"] == reverse("home")
        user.refresh_from_db()
        assert user.check_password(new)


def test_the_account_page_refuses_a_foreign_next(client, alice):
    log_in(client, "alice", PASSWORD)
    new = "yet another phrase 42"
    done = client.post(
        f"{ACCOUNT}?next=https://evil.example/",
        {"old_password": PASSWORD, "new_password1": new, "new_password2": new},
    )
    assert done["Location"] == reverse("home")


def test_the_account_page_needs_csrf_and_a_login(alice):
    assert Client().get(ACCOUNT).status_code == 302
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    new = "yet another phrase 42"
    data = {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    assert client.post(ACCOUNT, data).status_code == 403
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


def test_wrong_current_passwords_lock_the_account_page_out(client, alice, settings):
    log_in(client, "alice", PASSWORD)
    new = "yet another phrase 42"
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(ACCOUNT, {"old_password": "guess", "new_password1": new, "new_password2": new})
    locked = client.post(
        ACCOUNT, {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )
    assert locked.status_code == 429
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


def test_the_header_links_to_the_account_page(client_for, alice):
    body = client_for(alice).get(reverse("home")).content.decode()
    assert re.search(rf'<a [^>]*href="{ACCOUNT}"[^>]*>alice</a>', body)
