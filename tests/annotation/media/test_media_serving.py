"""Imported media are served only to members of a project that uses them, an image as a PNG
of its pixels whatever format it came in (test_media_metadata.py covers what it loses), with
the served copy's content type and ``nosniff``, under an opaque id that no content hash can be
matched with; a project that keeps the source format (``media_serve_source``) serves the
originals."""

from __future__ import annotations

import hashlib
import io
import re
import struct

import pytest
from django.core.management import call_command
from django.urls import reverse
from PIL import Image

from annotation.core.media_keys import media_path
from annotation.imports.importer import pairs_import
from annotation.models import Media, Project, Role
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
    return media_path(slug=project.slug, sha256=media.sha256)


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


def test_unknown_id_is_404(client_for, alice, project, imported):
    response = client_for(alice).get(reverse("media", args=[project.slug, "0" * 32]))
    assert response.status_code == 404


def test_urls_and_etags_name_no_content_hash(client_for, alice, project, imported):
    """A sha256 in what an annotator receives could be looked up against the public files."""
    client = client_for(alice)
    for media in (imported["png"], imported["jpeg"]):
        url = media_url(project, media)
        hashes = {media.sha256, media.served_sha256}
        assert not re.search(r"[0-9a-f]{64}", url)
        assert not any(sha[:12] in url for sha in hashes)
        response = client.get(url)
        headers = " ".join(f"{name}: {value}" for name, value in response.items())
        served = b"".join(response.streaming_content)
        assert not any(sha[:12] in headers for sha in {*hashes, hashlib.sha256(served).hexdigest()})
        assert "Last-Modified" not in response


def test_the_old_hash_urls_are_404(client_for, alice, project, imported):
    client = client_for(alice)
    for media in (imported["png"], imported["jpeg"]):
        for name in (media.sha256, media.served_sha256, media.sha256[:32]):
            assert client.get(f"/p/{project.slug}/media/{name}").status_code == 404


def test_the_id_is_one_per_file_and_the_same_in_every_project(project, other_project, imported):
    assert imported["png"].url_key != imported["jpeg"].url_key
    assert media_url(other_project, imported["png"]).endswith(imported["png"].url_key)


def test_api_token_fetches_media_of_its_own_projects_only(api_for, alice, eve, project, imported):
    """The image URLs in an API client's assignment work with its token."""
    url = media_url(project, imported["png"])
    response = api_for(alice).get(url)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == imported["png_bytes"]
    assert api_for(eve).get(url).status_code == 404


def test_new_secret_key_needs_the_ids_stored_anew(client_for, alice, project, imported, settings):
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]  # sessions survive, as in a rotation
    settings.SECRET_KEY = "another-secret-key-for-this-test"
    client, url = client_for(alice), media_url(project, imported["png"])
    assert client.get(url).status_code == 404
    out = io.StringIO()
    call_command("media_url_keys", stdout=out)
    assert "stored anew: 2" in out.getvalue()
    assert client.get(url).status_code == 200
    call_command("media_url_keys", stdout=out)
    assert "stored anew: 0" in out.getvalue()


def test_staff_see_the_hash_and_the_url_in_the_pairs_api(api_for, carol, project, imported):
    """Curators may see the originals' hashes; the URL of the bytes is the annotators' one."""
    client = api_for(carol)
    pair = client.get(f"/api/v1/projects/{project.slug}/pairs/p1/").json()
    [part] = pair["response_a"]["content"]
    assert part["media"] == imported["png"].sha256
    assert part["url"] == f"http://testserver{media_url(project, imported['png'])}"
    assert client.get(part["url"]).status_code == 200


def test_wrong_api_token_is_401(client, project, imported):
    response = client.get(media_url(project, imported["png"]), HTTP_AUTHORIZATION="Token nope")
    assert response.status_code == 401
    assert b"Invalid token" in response.content


@pytest.fixture
def tagged(project, tmp_path):
    """A pair whose response A is a JPEG with a comment the served copy leaves out."""
    from tests.annotation.imports.conftest import image_bytes

    jpeg = image_bytes((90, 10, 10), size=(40, 30), fmt="JPEG")
    comment = b"made-by-model-x"
    tagged = jpeg[:2] + b"\xff\xfe" + struct.pack(">H", 2 + len(comment)) + comment + jpeg[2:]
    (tmp_path / "a.jpg").write_bytes(tagged)
    (tmp_path / "b.png").write_bytes(image_bytes((1, 2, 3), size=(40, 30)))
    path = write_jsonl(tmp_path / "p.jsonl", [image_pair("p1", "a.jpg", "b.png")])
    pairs_import(project=project, source=path, media_root=tmp_path)
    media = Media.objects.get(format="JPEG")
    assert media.served_sha256 != media.sha256
    return media, tagged


def test_the_project_setting_serves_the_original_bytes(client_for, alice, project, tagged):
    media, original = tagged
    client, url = client_for(alice), media_url(project, media)
    served = client.get(url)
    copy = b"".join(served.streaming_content)
    assert b"made-by-model-x" not in copy
    assert "immutable" in served["Cache-Control"]

    Project.objects.filter(pk=project.pk).update(media_serve_source=True)
    source = client.get(url)
    assert b"".join(source.streaming_content) == original
    assert source["Content-Type"] == media.content_type
    # Revalidated at every use, so turning the setting off takes effect at once; another
    # entity than the copy, so a cached copy is not taken for it.
    assert "no-cache" in source["Cache-Control"]
    assert source["ETag"] != served["ETag"]
    assert client.get(url, HTTP_IF_NONE_MATCH=served["ETag"]).status_code == 200
    assert client.get(url, HTTP_IF_NONE_MATCH=source["ETag"]).status_code == 304

    Project.objects.filter(pk=project.pk).update(media_serve_source=False)
    assert b"".join(client.get(url).streaming_content) == copy


def test_outsider_gets_no_original_either(client_for, eve, project, tagged):
    media, _ = tagged
    Project.objects.filter(pk=project.pk).update(media_serve_source=True)
    assert client_for(eve).get(media_url(project, media)).status_code == 404
