"""The project settings page: members (add, change a role, remove) and the project's settings,
what each persona gets there, CSRF, escaping, and the one-time password of a new account."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotation.models import Membership, Pair, PairStatus, Role
from annotation.projects.services import member_add, member_role_change, project_update
from tests.annotation.queue.test_queue_concurrency import _race
from tests.factories import MembershipFactory, PairFactory, ProjectFactory, UserFactory, VoteFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


def page_url(project) -> str:
    return reverse("project-settings", args=[project.slug])


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def settings_data(project, **changes) -> dict:
    data = {
        "name": project.name,
        "guidelines": project.guidelines,
        "scale": project.scale,
        "overlap": project.overlap,
        "min_agree": project.min_agree,
        "max_extra_votes": project.max_extra_votes,
        "lease_minutes": project.lease_minutes,
        "gold_rate": project.gold_rate,
        "gold_min_accuracy": project.gold_min_accuracy,
        "min_seconds_per_vote": project.min_seconds_per_vote,
        **changes,
    }
    return {key: value for key, value in data.items() if value is not False}


def posts(project, membership) -> list[tuple[str, dict]]:
    """Every form the page posts, with data that would change something."""
    return [
        (reverse("project-settings-save", args=[project.slug]), settings_data(project, name="X")),
        (reverse("project-guidelines-preview", args=[project.slug]), {"guidelines": "*hi*"}),
        (
            reverse("project-member-add", args=[project.slug]),
            {"user": "mallory", "role": "curator"},
        ),
        (
            reverse("project-member-role", args=[project.slug, membership.pk]),
            {"role": "annotator"},
        ),
        (reverse("project-member-remove", args=[project.slug, membership.pk]), {}),
    ]


def add_member(client, project, user: str, role: str = "annotator"):
    return client.post(
        reverse("project-member-add", args=[project.slug]), {"user": user, "role": role}
    )


def test_curator_sees_members_and_settings(client_for, carol, alice, project):
    alice.email = "alice@example.org"
    alice.save(update_fields=["email"])
    response = client_for(carol).get(page_url(project))
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    text = text_of(response)
    assert "alice alice@example.org Annotator" in text
    assert "carol — Curator" in text
    assert 'name="overlap" value="3"' in response.content.decode()


def test_serving_the_original_media_is_a_curators_choice_the_page_warns_of(
    client_for, carol, alice, project
):
    client = client_for(carol)
    text = text_of(client.get(page_url(project)))
    assert "Serve the original media files (weakens the blinding)" in text
    assert "its format, size, metadata and all" in text
    save = reverse("project-settings-save", args=[project.slug])
    assert client.post(save, settings_data(project, media_serve_source=True)).status_code == 302
    project.refresh_from_db()
    assert project.media_serve_source
    # An unticked box turns it off again; an annotator cannot touch it.
    assert client.post(save, settings_data(project)).status_code == 302
    project.refresh_from_db()
    assert not project.media_serve_source
    response = client_for(alice).post(save, settings_data(project, media_serve_source=True))
    assert response.status_code == 403
    project.refresh_from_db()
    assert not project.media_serve_source


def test_project_page_links_settings_for_curators_and_admin_for_superusers(
    client_for, carol, alice, project
):
    settings_link = f'href="{page_url(project)}"'
    admin_link = f'href="{reverse("admin:index")}"'
    curator_page = client_for(carol).get(reverse("project-detail", args=[project.slug]))
    assert settings_link in curator_page.content.decode()
    assert admin_link not in curator_page.content.decode()
    annotator_page = client_for(alice).get(reverse("project-detail", args=[project.slug]))
    assert settings_link not in annotator_page.content.decode()
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    root_page = client_for(root).get(reverse("project-detail", args=[project.slug])).content
    assert settings_link in root_page.decode()
    assert admin_link in root_page.decode()


def test_superusers_act_as_curators(client_for, carol, project):
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    client = client_for(root)
    assert client.get(page_url(project)).status_code == 200
    assert add_member(client, project, "newbie").status_code == 200
    assert Membership.objects.filter(project=project, user__username="newbie").exists()


def test_another_projects_curator_gets_404_everywhere(client_for, carol, project, other_project):
    stranger = UserFactory(username="stranger")
    MembershipFactory(project=other_project, user=stranger, role=Role.CURATOR)
    membership = Membership.objects.get(project=project, user=carol)
    client = client_for(stranger)
    assert client.get(page_url(project)).status_code == 404
    for url, data in posts(project, membership):
        assert client.post(url, data).status_code == 404, url
    project.refresh_from_db()
    assert project.name == "Demo project"
    assert list(Membership.objects.filter(project=project).values_list("user__username", "role"))
    assert Membership.objects.get(pk=membership.pk).role == Role.CURATOR
    assert not get_user_model().objects.filter(username="mallory").exists()


@pytest.mark.parametrize("persona", ["alice", "dave"])
def test_annotators_and_researchers_get_403(request, client_for, carol, project, persona):
    client = client_for(request.getfixturevalue(persona))
    membership = Membership.objects.get(project=project, user=carol)
    assert client.get(page_url(project)).status_code == 403
    for url, data in posts(project, membership):
        assert client.post(url, data).status_code == 403, url
    assert Membership.objects.get(pk=membership.pk).role == Role.CURATOR
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_posts_need_the_csrf_token(carol, alice, project):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    client.get(page_url(project))
    token = client.cookies["csrftoken"].value
    membership = Membership.objects.get(project=project, user=alice)
    for url, data in posts(project, membership):
        assert client.post(url, data).status_code == 403, url
        assert client.post(url, data, **HTMX).status_code == 403, url
    assert Membership.objects.get(pk=membership.pk).role == Role.ANNOTATOR
    assert not get_user_model().objects.filter(username="mallory").exists()
    preview = reverse("project-guidelines-preview", args=[project.slug])
    response = client.post(preview, {"guidelines": "*hi*"}, HTTP_X_CSRFTOKEN=token, **HTMX)
    assert response.status_code == 200
    assert "<em>hi</em>" in response.content.decode()
    added = client.post(
        reverse("project-member-add", args=[project.slug]),
        {"user": "zoe", "role": "annotator", "csrfmiddlewaretoken": token},
    )
    assert added.status_code == 200
    assert Membership.objects.filter(user__username="zoe").exists()


def test_new_account_gets_a_one_time_password_shown_once(client_for, carol, project):
    client = client_for(carol)
    response = add_member(client, project, "zoe", "researcher")
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    match = re.search(r'<code class="s-secret">([^<]+)</code>', response.content.decode())
    assert match, "the one-time password is on the page"
    password = match.group(1)
    zoe = get_user_model().objects.get(username="zoe")
    assert zoe.check_password(password)
    assert password not in zoe.password
    assert Membership.objects.get(user=zoe, project=project).role == Role.RESEARCHER
    again = client.get(page_url(project)).content.decode()
    assert password not in again
    assert "s-secret" not in again
    # Adding an existing account shows no password and leaves its password alone.
    readded = add_member(client, project, "zoe", "annotator")
    assert "s-secret" not in readded.content.decode()
    zoe.refresh_from_db()
    assert zoe.check_password(password)
    assert Membership.objects.get(user=zoe, project=project).role == Role.ANNOTATOR


def test_add_by_email_finds_or_creates_the_account(client_for, carol, project):
    known = UserFactory(username="kim", email="Kim@Example.org")
    client = client_for(carol)
    assert add_member(client, project, "kim@example.org").status_code == 200
    assert Membership.objects.get(project=project, user=known).role == Role.ANNOTATOR
    response = add_member(client, project, "new.person@example.org", "curator")
    assert "s-secret" in response.content.decode()
    created = get_user_model().objects.get(email="new.person@example.org")
    assert created.username == "new.person@example.org"
    assert not created.is_staff
    assert Membership.objects.get(project=project, user=created).role == Role.CURATOR


def test_add_rejects_bad_input_naming_the_field(client_for, carol, project):
    client = client_for(carol)
    bad_name = add_member(client, project, "no spaces allowed")
    assert bad_name.status_code == 400
    assert "Enter a valid username" in text_of(bad_name)
    bad_email = add_member(client, project, "not@an@email")
    assert bad_email.status_code == 400
    assert "is not an email address" in text_of(bad_email)
    bad_role = add_member(client, project, "zoe", "owner")
    assert bad_role.status_code == 400
    assert "Select a valid choice" in text_of(bad_role)
    assert not get_user_model().objects.filter(username__in=["zoe", "no spaces allowed"]).exists()


def test_role_change_and_removal(client_for, carol, alice, project):
    client = client_for(carol)
    membership = Membership.objects.get(project=project, user=alice)
    url = reverse("project-member-role", args=[project.slug, membership.pk])
    response = client.post(url, {"role": "researcher"}, follow=True)
    assert "alice is now Researcher" in text_of(response)
    assert Membership.objects.get(pk=membership.pk).role == Role.RESEARCHER
    response = client.post(
        reverse("project-member-remove", args=[project.slug, membership.pk]), follow=True
    )
    assert "Removed alice from the project" in text_of(response)
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert get_user_model().objects.filter(username="alice").exists()


def test_the_last_curator_cannot_be_demoted_or_removed(client_for, carol, project):
    client = client_for(carol)
    membership = Membership.objects.get(project=project, user=carol)
    role_url = reverse("project-member-role", args=[project.slug, membership.pk])
    remove_url = reverse("project-member-remove", args=[project.slug, membership.pk])
    for response in (
        client.post(role_url, {"role": "annotator"}),
        client.post(remove_url),
        add_member(client, project, "carol", "annotator"),
    ):
        assert response.status_code == 400
        assert "carol is the project's last curator" in text_of(response)
    assert Membership.objects.get(pk=membership.pk).role == Role.CURATOR
    # With a second curator, carol may step down.
    add_member(client, project, "frank", "curator")
    assert client.post(role_url, {"role": "annotator"}).status_code == 302
    assert Membership.objects.get(pk=membership.pk).role == Role.ANNOTATOR


def test_a_membership_of_another_project_is_404(client_for, carol, project, other_project):
    theirs = MembershipFactory(project=other_project, role=Role.CURATOR)
    client = client_for(carol)
    assert (
        client.post(reverse("project-member-remove", args=[project.slug, theirs.pk])).status_code
        == 404
    )
    url = reverse("project-member-role", args=[project.slug, theirs.pk])
    assert client.post(url, {"role": "annotator"}).status_code == 404
    assert Membership.objects.get(pk=theirs.pk).role == Role.CURATOR


def test_user_content_is_escaped(client_for, carol, project):
    evil = UserFactory(username="<img src=x onerror=alert(1)>", email="x@example.org")
    MembershipFactory(project=project, user=evil, role=Role.ANNOTATOR)
    project.name = "<script>alert('name')</script>"
    project.guidelines = "Hello <script>alert('g')</script> **bold**"
    project.save(update_fields=["name", "guidelines"])
    html = client_for(carol).get(page_url(project)).content.decode()
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in html
    assert "<strong>bold</strong>" in html  # the preview, rendered safely
    preview = client_for(carol).post(
        reverse("project-guidelines-preview", args=[project.slug]),
        {"guidelines": "[x](javascript:alert(1)) <script>alert(2)</script> <b onclick=y>b</b>"},
        **HTMX,
    )
    body = preview.content.decode()
    assert "<script" not in body
    assert "javascript:" not in body
    assert "onclick" not in body


def test_preview_fragment_renders_markdown(client_for, carol, project):
    response = client_for(carol).post(
        reverse("project-guidelines-preview", args=[project.slug]),
        {"guidelines": "## Judge\n\n1. **text** first"},
        **HTMX,
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body
    assert "<h2>Judge</h2>" in body
    assert "<strong>text</strong>" in body
    page = client_for(carol).get(page_url(project)).content.decode()
    assert f'hx-post="{reverse("project-guidelines-preview", args=[project.slug])}"' in page


def test_save_project_settings(client_for, carol, project):
    open_pair = PairFactory(project=project, status=PairStatus.QUEUED)
    settled = PairFactory(project=project, status=PairStatus.CONSENSUS, consensus_label="A")
    data = settings_data(
        project,
        name="Renamed",
        guidelines="Be **fair**",
        scale="likert6",
        overlap=5,
        min_agree=3,
        max_extra_votes=4,
        lease_minutes=30,
        require_rationale="on",
        gold_rate=0.1,
        paused="on",
    )
    response = client_for(carol).post(
        reverse("project-settings-save", args=[project.slug]), data, follow=True
    )
    assert "Project settings saved" in text_of(response)
    project.refresh_from_db()
    assert (project.name, project.scale, project.overlap, project.min_agree) == (
        "Renamed",
        "likert6",
        5,
        3,
    )
    assert (project.max_extra_votes, project.lease_minutes, project.gold_rate) == (4, 30, 0.1)
    assert project.require_rationale
    assert project.paused
    assert project.guidelines == "Be **fair**"
    targets = dict(Pair.objects.values_list("pk", "target_votes"))
    assert targets == {open_pair.pk: 5, settled.pk: 3}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"min_agree": 4}, "Cannot exceed the overlap target."),
        ({"gold_rate": 1.5}, "Ensure this value is less than or equal to 1.0."),
        ({"lease_minutes": 0}, "Ensure this value is greater than or equal to 1."),
        ({"name": ""}, "This field is required."),
    ],
)
def test_bad_settings_name_the_field(client_for, carol, project, changes, message):
    response = client_for(carol).post(
        reverse("project-settings-save", args=[project.slug]), settings_data(project, **changes)
    )
    assert response.status_code == 400
    field = next(iter(changes))
    html = response.content.decode()
    errors = html[html.index(f'name="{field}"') :]
    assert message in unescape(errors[: errors.index("</div>")])
    project.refresh_from_db()
    assert (project.min_agree, project.gold_rate, project.lease_minutes) == (2, 0.0, 15)


def test_minimum_time_per_vote_is_set_on_the_settings_page(client_for, carol, project):
    url = reverse("project-settings-save", args=[project.slug])
    client = client_for(carol)
    assert "Seconds an annotator must look at a pair" in text_of(client.get(page_url(project)))
    client.post(url, settings_data(project, min_seconds_per_vote=8))
    project.refresh_from_db()
    assert project.min_seconds_per_vote == 8
    bad = client.post(url, settings_data(project, min_seconds_per_vote=601))
    html = bad.content.decode()
    errors = html[html.index('name="min_seconds_per_vote"') :]
    assert "less than or equal to 600" in errors[: errors.index("</div>")]


def test_scale_is_locked_once_votes_exist(client_for, carol, alice, project):
    pair = PairFactory(project=project, status=PairStatus.ANNOTATING, vote_count=1)
    VoteFactory(pair=pair, annotator=alice)
    client = client_for(carol)
    page = client.get(page_url(project))
    assert "Locked: Annotators have voted on this scale" in text_of(page)
    assert re.search(r'<select name="scale"[^>]*disabled', page.content.decode())
    forged = settings_data(project, scale="likert6", name="Still ternary")
    client.post(reverse("project-settings-save", args=[project.slug]), forged)
    project.refresh_from_db()
    assert (project.scale, project.name) == ("ternary", "Still ternary")
    with pytest.raises(ValidationError, match="voted on this scale") as caught:
        project_update(
            project=project,
            **{
                **settings_data(project, scale="binary"),
                "paused": False,
                "require_rationale": False,
                "gold_pause": False,
            },
        )
    assert "scale" in caught.value.message_dict


def test_overlap_cannot_drop_below_a_pairs_votes_and_leases(client_for, carol, project):
    PairFactory(project=project, status=PairStatus.ANNOTATING, vote_count=1, lease_count=1)
    client = client_for(carol)
    page = text_of(client.get(page_url(project)))
    assert "A pair already has 2 votes and live leases, so the overlap cannot go below 2" in page
    url = reverse("project-settings-save", args=[project.slug])
    refused = client.post(url, settings_data(project, overlap=1, min_agree=1))
    assert refused.status_code == 400
    assert "cannot go below 2" in text_of(refused)
    assert client.post(url, settings_data(project, overlap=2, min_agree=1)).status_code == 302
    project.refresh_from_db()
    assert project.overlap == 2
    assert Pair.objects.get().target_votes == 2


def test_remove_member_command(carol, alice, project, capsys):
    call_command("remove_member", project.slug, "alice")
    assert "Removed alice from demo" in capsys.readouterr().out
    assert not Membership.objects.filter(user=alice).exists()
    with pytest.raises(CommandError, match="'alice' is not a member"):
        call_command("remove_member", project.slug, "alice")
    with pytest.raises(CommandError, match="role: carol is the project's last curator"):
        call_command("remove_member", project.slug, "carol")


def test_add_member_command_keeps_an_existing_password_unless_given(project):
    member_add(project=project, username="zed", role=Role.ANNOTATOR, password="first-pass-123")
    call_command("add_member", project.slug, "zed", "--role", "curator")
    zed = get_user_model().objects.get(username="zed")
    assert zed.check_password("first-pass-123")
    assert not zed.is_staff
    assert Membership.objects.get(user=zed).role == Role.CURATOR


def test_two_curators_demoting_each_other_at_once_leave_one(transactional_db):
    project = ProjectFactory(slug="race")
    curators = [
        MembershipFactory(project=project, user=UserFactory(username=name), role=Role.CURATOR)
        for name in ("cur1", "cur2")
    ]
    errors = _race(
        [
            lambda membership=membership: member_role_change(
                membership=membership, role=Role.ANNOTATOR
            )
            for membership in curators
        ]
    )
    assert len(errors) == 1
    assert "last curator" in str(errors[0])
    assert Membership.objects.filter(project=project, role=Role.CURATOR).count() == 1
