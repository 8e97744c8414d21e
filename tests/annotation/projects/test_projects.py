"""Projects, members and the projects/pairs API, including what outsiders and annotators get."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Membership, Project, Role
from tests.factories import PairFactory


@pytest.mark.django_db
def test_create_project_and_add_member_commands(capsys):
    call_command(
        "create_project",
        "t2i",
        "--name",
        "T2I",
        "--scale",
        "likert6",
        "--overlap",
        "3",
        "--consensus",
        "mmrb2",
    )
    project = Project.objects.get(slug="t2i")
    assert (project.scale, project.overlap, project.consensus_rule, project.min_agree) == (
        "likert6",
        3,
        "mmrb2",
        2,
    )
    call_command("add_member", "t2i", "zoe", "--role", "curator", "--password", "pw-zoe-12345")
    membership = Membership.objects.get(project=project, user__username="zoe")
    assert membership.role == Role.CURATOR
    assert not membership.user.is_staff
    assert membership.user.check_password("pw-zoe-12345")
    assert "Created user zoe is curator in t2i" in capsys.readouterr().out


@pytest.mark.django_db
def test_create_project_rejects_bad_values():
    with pytest.raises(CommandError, match="min_agree"):
        call_command("create_project", "x", "--name", "X", "--overlap", "3", "--min-agree", "4")
    assert not Project.objects.exists()


@pytest.mark.django_db
def test_add_member_to_unknown_project():
    with pytest.raises(CommandError, match="No project with slug 'nope'"):
        call_command("add_member", "nope", "zoe", "--role", "annotator")


def test_api_projects_lists_only_mine(api_for, alice, project, other_project):
    data = api_for(alice).get("/api/v1/projects/").json()
    assert [p["slug"] for p in data] == [project.slug]
    assert data[0]["role"] == "annotator"


def test_api_project_detail_outsider_404(api_for, eve, project):
    assert api_for(eve).get(f"/api/v1/projects/{project.slug}/").status_code == 404


def test_api_requires_authentication(client, project):
    assert client.get("/api/v1/projects/").status_code in (401, 403)


@pytest.mark.parametrize("persona", ["carol", "dave"])
def test_api_pairs_for_curators_and_researchers(request, api_for, project, persona):
    user = request.getfixturevalue(persona)
    PairFactory.create_batch(3, project=project)
    response = api_for(user).get(f"/api/v1/projects/{project.slug}/pairs/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    assert body["results"][0]["response_a"]["model_name"] == "model-alpha"
    pair_id = body["results"][0]["id"]
    detail = api_for(user).get(f"/api/v1/projects/{project.slug}/pairs/{pair_id}/")
    assert detail.status_code == 200
    assert detail.json()["id"] == pair_id


def test_api_pairs_hidden_from_annotators_and_outsiders(api_for, alice, eve, project):
    pair = PairFactory(project=project)
    url = f"/api/v1/projects/{project.slug}/pairs/"
    assert api_for(alice).get(url).status_code == 403
    assert api_for(alice).get(f"{url}{pair.external_id}/").status_code == 403
    assert api_for(eve).get(url).status_code == 404
    assert api_for(eve).get(f"{url}{pair.external_id}/").status_code == 404


def test_api_pairs_filter_by_status_rejects_unknown(api_for, carol, project):
    PairFactory(project=project, status="queued")
    PairFactory(project=project)
    url = f"/api/v1/projects/{project.slug}/pairs/"
    assert api_for(carol).get(url, {"status": "queued"}).json()["count"] == 1
    bad = api_for(carol).get(url, {"status": "nonsense"})
    assert bad.status_code == 400
    assert "status" in bad.json()


@pytest.mark.django_db
def test_database_refuses_duplicate_membership(project, alice):
    from django.db import IntegrityError

    with pytest.raises(IntegrityError):
        Membership.objects.create(project=project, user=alice, role=Role.CURATOR)
