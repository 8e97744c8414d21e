"""Imported media are served only to members of a project that uses them, an image as a PNG
of its pixels whatever format it came in (test_media_metadata.py covers what it loses), with
the served copy's content type and ``nosniff``."""

from __future__ import annotations

import io

import pytest
from django.urls import reverse
from PIL import Image

from annotation.imports.importer import pairs_import
from annotation.models import Media, Role
from tests.annotation.imports.conftest import image_bytes, image_pair, write_jsonl
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(project, tmp_path):
    """A pair whose response A is a PNG saved under a .jpg name, and B a real JPEG."""
    png = image_bytes((12, 34, 56), size=(40, 30), fmt="PNG")
    jpeg = image_bytes((90, 10, 10), size=(40, 30), fmt="JPEG")
    (tmp_path / "misnamed.jpg").write_bytes(png)
    (tmp_path / "b.jpg").write_bytes(jpeg)
    path = write_jsonl(tmp_path / "p.jsonl", [image_pair("p1", "misnamed.jpg", "b.jpg")])
    pairs_import(project=project, source=path, media_root=tmp_path)
    return {
        "png": Media.objects.get(format="PNG"),
        "jpeg": Media.objects.get(format="JPEG"),
        "png_bytes": png,
        "jpeg_bytes": jpeg,
    }


def media_url(project, media) -> str:
    return reverse("media", args=[project.slug, media.sha256])


@pytest.mark.parametrize("persona", ["alice", "carol", "dave"])
def test_members_get_the_pixels_as_png(request, client_for, project, imported, persona):
    client = client_for(request.getfixturevalue(persona))
    for media, original in (
        (imported["png"], imported["png_bytes"]),
        (imported["jpeg"], imported["jpeg_bytes"]),
    ):
        response = client.get(media_url(project, media))
        assert response.status_code == 200
        served = b"".join(response.streaming_content)
        with Image.open(io.BytesIO(served)) as copy, Image.open(io.BytesIO(original)) as image:
            assert (copy.format, copy.tobytes()) == ("PNG", image.convert("RGB").tobytes())
        # The served copy's type, whatever the file name it came under said.
        assert response["Content-Type"] == "image/png"
        assert response["X-Content-Type-Options"] == "nosniff"
    # Pillow found a PNG under the .jpg name: the original is stored as what it is.
    assert imported["png"].format == "PNG"


def test_outsider_gets_404(client_for, eve, project, imported):
    assert client_for(eve).get(media_url(project, imported["png"])).status_code == 404


def test_member_of_another_project_gets_404(client_for, project, other_project, imported):
    stranger = UserFactory(username="stranger")
    MembershipFactory(project=other_project, user=stranger, role=Role.CURATOR)
    client = client_for(stranger)
    assert client.get(media_url(project, imported["png"])).status_code == 404
    # Nor through their own project, which does not use this image.
    assert client.get(media_url(other_project, imported["png"])).status_code == 404


def test_anonymous_visitor_is_sent_to_log_in(client, project, imported):
    response = client.get(media_url(project, imported["png"]))
    assert response.status_code == 302
    assert reverse("login") in response.url


def test_unknown_hash_is_404(client_for, alice, project, imported):
    response = client_for(alice).get(reverse("media", args=[project.slug, "0" * 64]))
    assert response.status_code == 404


def test_api_token_fetches_media_of_its_own_projects_only(api_for, alice, eve, project, imported):
    """The image URLs in an API client's assignment work with its token."""
    url = media_url(project, imported["png"])
    response = api_for(alice).get(url)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == imported["png_bytes"]
    assert api_for(eve).get(url).status_code == 404


def test_wrong_api_token_is_401(client, project, imported):
    response = client.get(media_url(project, imported["png"]), HTTP_AUTHORIZATION="Token nope")
    assert response.status_code == 401
    assert b"Invalid token" in response.content
