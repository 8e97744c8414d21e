"""A release version is valid by one rule (docs/releases.md, "Versions"), held by the model's
constraint, the path converter, the form, the API and the command line alike: a version that
is stored always has a URL, so no version breaks a project's Releases. Replays a version
with a 10-digit part, which the pattern took and the converter did not."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from annotation.core.url_converters import ReleaseVersionConverter
from annotation.models import RELEASE_VERSION_PATTERN, Project, Release
from annotation.releases.services import release_create
from tests.factories import MembershipFactory, PairFactory, ReleaseFactory, UserFactory

pytestmark = pytest.mark.django_db

TOO_LONG = "1.1000000000.0"
LARGEST = "999999999.999999999.999999999"


def test_the_api_refuses_a_version_with_a_ten_digit_part_and_the_list_still_answers(
    api_for, project, dave
):
    api = api_for(dave)
    response = api.post(
        "/api/v1/projects/demo/releases/", {"version": TOO_LONG, "selection": {}}, format="json"
    )
    assert response.status_code == 400
    assert "version" in str(response.json())
    assert "9 digits" in str(response.json())
    assert not Release.objects.exists()
    assert api.get("/api/v1/projects/demo/releases/").status_code == 200


def test_the_form_refuses_it_on_the_version_field(client_for, project, dave):
    client = client_for(dave)
    response = client.post(
        reverse("release-create", args=["demo"]),
        {"version": TOO_LONG, "include_consensus": "on", "splits": "test=1", "seed": "0"},
    )
    assert response.status_code == 400
    assert "at most 9 digits" in response.context["form"].errors["version"][0]
    assert not Release.objects.exists()
    assert client.get(reverse("releases", args=["demo"])).status_code == 200


def test_the_command_line_refuses_it(project):
    with pytest.raises(CommandError, match="at most 9 digits"):
        call_command("create_release", "demo", "--version", TOO_LONG)
    assert not Release.objects.exists()


def test_the_database_refuses_it_too(project):
    with pytest.raises(IntegrityError), transaction.atomic():
        ReleaseFactory(project=project, version=TOO_LONG)


def test_the_converter_and_the_pattern_are_one_rule():
    converter = re.compile(rf"^{ReleaseVersionConverter.regex}$")
    for version in ("0.0.0", "1.2.3", LARGEST, TOO_LONG, "01.0.0", "1.2", "1.2.3.4", "1.2.-3"):
        assert bool(converter.match(version)) == bool(re.match(RELEASE_VERSION_PATTERN, version))


def test_the_largest_version_has_pages_and_the_form_offers_the_next_major(
    client_for, project, dave
):
    client = client_for(dave)
    PairFactory(project=project, status="consensus", consensus_label="A")
    release_create(project=project, version="3.999999999.0", selection={}, user=dave)
    body = client.get(reverse("release-create", args=["demo"])).content.decode()
    assert 'value="4.0.0"' in body
    release_create(project=project, version=LARGEST, selection={}, user=dave)
    assert client.get(reverse("releases", args=["demo"])).status_code == 200
    assert client.get(reverse("release", args=["demo", LARGEST])).status_code == 200
    body = client.get(reverse("release-create", args=["demo"])).content.decode()
    assert 'value="1000000000' not in body
    assert 'name="version"' in body


def _migration_of(executor: MigrationExecutor, suffix: str) -> tuple[str, str]:
    names = [key for key in executor.loader.graph.nodes if key[1].endswith(suffix)]
    assert len(names) == 1, names
    return names[0]


@pytest.mark.django_db(transaction=True)
def test_the_migration_renames_a_stored_unreachable_version(client_for, settings, tmp_path):
    settings.ARBITER_RELEASE_ROOT = tmp_path / "releases"
    executor = MigrationExecutor(connection)
    renaming = _migration_of(executor, "_release_version_digits")
    before = executor.loader.graph.node_map[renaming].parents
    (previous,) = before
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate([previous.key])
    try:
        old = executor.loader.project_state([previous.key]).apps
        OldProject = old.get_model("annotation", "Project")
        OldRelease = old.get_model("annotation", "Release")
        project = OldProject.objects.create(slug="demo", name="Demo")
        OldRelease.objects.create(project=project, version="0.0.1", selection={}, status="built")
        OldRelease.objects.create(project=project, version=TOO_LONG, selection={}, status="built")
        folder = settings.ARBITER_RELEASE_ROOT / "demo" / TOO_LONG
        folder.mkdir(parents=True)
        (folder / "README.md").write_text("card")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(leaves)
    renamed = Release.objects.get(project__slug="demo", version="0.0.2")
    assert renamed.status == Release.Status.FAILED
    assert TOO_LONG in renamed.error
    assert (settings.ARBITER_RELEASE_ROOT / "demo" / "0.0.2" / "README.md").read_text() == "card"
    assert not folder.exists()
    curator = MembershipFactory(
        project=Project.objects.get(slug="demo"), user=UserFactory(username="cur"), role="curator"
    ).user
    client = client_for(curator)
    listing = client.get(reverse("releases", args=["demo"]))
    assert listing.status_code == 200
    assert "0.0.2" in listing.content.decode()
    assert client.get(reverse("release", args=["demo", "0.0.2"])).status_code == 200
