"""The operators' admin shows what people saw: image previews served like the app serves them
(the copy without metadata), and votes in the annotator's on-screen terms."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.core.media_keys import media_path
from annotation.models import Media, Project
from annotation.projects.invitations import invitation_create
from tests.annotation.queue.conftest import make_image
from tests.factories import ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client):
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    return client


def vote(api, project: Project, **body) -> None:
    claim = api.post(f"/api/v1/projects/{project.slug}/claim/")
    assert claim.status_code == 200, claim.content
    response = api.post(f"/api/v1/assignments/{claim.json()['id']}/vote/", body, format="json")
    assert response.status_code == 201, response.content


def test_media_list_and_page_show_previews_the_image_loads_from(operator_client, project):
    sha256 = make_image(project, (200, 30, 30))
    Media.objects.filter(pk=sha256).update(width=960, height=640)  # as a large image records
    src = media_path(slug=project.slug, sha256=sha256)
    listing = operator_client.get(reverse("admin:annotation_media_changelist")).content.decode()
    assert f'<img src="{src}" alt="" width="64" height="43" loading="lazy">' in listing
    page = operator_client.get(
        reverse("admin:annotation_media_change", args=[sha256])
    ).content.decode()
    assert f'<img src="{src}" alt="" width="480" height="320"' in page
    image = operator_client.get(src)
    assert image.status_code == 200
    assert image["Content-Type"] == "image/png"


@pytest.mark.parametrize(
    ("scale", "body", "shown"),
    [
        ("ternary", {"choice": "left"}, "left"),
        ("ternary", {"choice": "tie"}, "tie"),
        ("likert6", {"value": 2}, "2 · Left better"),
    ],
)
def test_votes_are_listed_as_the_annotator_saw_them(operator_client, api_for, scale, body, shown):
    from tests.factories import MembershipFactory, PairFactory

    project = ProjectFactory(slug=f"admin-{scale}", scale=scale, overlap=3)
    annotator = UserFactory(username=f"ann-{scale}-{len(shown)}")
    MembershipFactory(project=project, user=annotator, role="annotator")
    PairFactory(project=project, status="queued")
    vote(api_for(annotator), project, **body)
    listing = operator_client.get(reverse("admin:annotation_vote_changelist")).content.decode()
    cell = re.search(r'<td class="field-as_shown">(.*?)</td>', listing).group(1)
    assert cell == shown


def test_invitations_are_listed_without_their_key(operator_client, project):
    invitation = invitation_create(
        project=project, email="listed@example.org", role="annotator", invited_by=None
    )
    listing = operator_client.get(reverse("admin:annotation_invitation_changelist"))
    assert "listed@example.org" in listing.content.decode()
    detail = operator_client.get(
        reverse("admin:annotation_invitation_change", args=[invitation.pk])
    )
    assert detail.status_code == 200
    assert invitation.key not in detail.content.decode()
