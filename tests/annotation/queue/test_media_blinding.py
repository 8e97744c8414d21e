"""What an annotator receives of a pair's media (the comparison page, the API's assignment,
the adjudication page a curator decides on, the media responses' headers) names no content
hash and carries none of the originals' own properties: a house container, codec, sample rate,
channel count, frame rate or file size would tell one model's files from another's
(issue 31, item 8). Distinctive values are planted on the Media rows and looked for
everywhere."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from annotation.imports.importer import pairs_import
from annotation.models import Media, Pair
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import audio_write, glb_bytes, video_write

pytestmark = pytest.mark.django_db

# The originals' properties, as no served copy has them.
PLANTED = {
    "container": "matroska,webm",
    "video_codec": "prores_planted",
    "audio_codec": "alac_planted",
    "sample_rate": 44101,
    "channels": 5,
    "frame_rate": 23.9761,
    "size_bytes": 123457,
}
PLANTED_TEXTS = ("matroska", "webm", "prores_planted", "alac_planted", "44101", "23.976", "123457")
# What a player is given of a media part, and nothing else.
SHOWN_KEYS = {
    "type", "url", "width", "height", "duration_seconds", "frame_rate", "poster_url", "peaks",
    "loudness_lufs", "views",
}  # fmt: skip


@pytest.fixture
def pair(project, tmp_path) -> Pair:
    video_write(tmp_path / "a.mp4")
    audio_write(tmp_path / "b.wav")
    (tmp_path / "c.glb").write_bytes(glb_bytes())
    row = text_pair("av-1", task="t2v")
    row["prompt_content"].append(["audio", "b.wav"])
    row["response_a"]["response_content"] = [["video", "a.mp4"]]
    row["response_b"]["response_content"] = [["audio", "b.wav"], ["model3d", "c.glb"]]
    source = write_jsonl(tmp_path / "pairs.jsonl", [row])
    pairs_import(project=project, source=source, media_root=tmp_path)
    Media.objects.filter(kind__in=["video", "audio"]).update(**PLANTED)
    Media.objects.exclude(kind__in=["video", "audio"]).update(size_bytes=PLANTED["size_bytes"])
    pair = Pair.objects.get(project=project, external_id="av-1")
    Pair.objects.filter(pk=pair.pk).update(status="queued")
    return pair


def hashes() -> set[str]:
    """Every stored hash of every file, original and served."""
    found = set()
    for media in Media.objects.all():
        found |= {media.sha256, media.served_sha256 or media.sha256}
    return found


def assert_blinded(text: str, where: str) -> None:
    for planted in PLANTED_TEXTS:
        assert planted not in text, f"{where} holds the original's {planted!r}"
    for sha256 in hashes():
        assert sha256[:16] not in text, f"{where} holds the content hash {sha256}"
    assert not re.search(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])", text), where


def media_urls(text: str, slug: str) -> set[str]:
    return set(re.findall(rf"(?:http://testserver)?/p/{slug}/media/[^\"'\s<>]+", text))


def assert_media_responses_blinded(client, urls: set[str]) -> None:
    assert urls
    for url in urls:
        for method in (client.get, client.head):
            response = method(url)
            assert response.status_code == 200, url
            headers = "\n".join(f"{name}: {value}" for name, value in response.items())
            assert_blinded(headers, f"the headers of {url}")
            assert "Last-Modified" not in response
            if response.streaming:
                b"".join(response.streaming_content)  # closes the file


def parts_of(payload: dict) -> list[dict]:
    return [part for key in ("prompt", "left", "right") for part in payload[key]]


def test_the_comparison_page_shows_no_original_property(client_for, alice, project, pair):
    client = client_for(alice)
    page = client.get(reverse("annotate", args=[project.slug]), follow=True)
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count("<video ") == 1
    assert_blinded(html, "the comparison page")
    assert "data-sample-rate" not in html
    assert "data-channels" not in html
    assert_media_responses_blinded(client, media_urls(html, project.slug))


def test_the_api_assignment_carries_only_what_a_player_needs(api_for, alice, project, pair):
    client = api_for(alice)
    claimed = client.post(f"/api/v1/projects/{project.slug}/claim/")
    assert claimed.status_code == 200, claimed.content
    payload = claimed.json()
    assert_blinded(json.dumps(payload), "the assignment")
    media_parts = [part for part in parts_of(payload) if part["type"] != "text"]
    assert {part["type"] for part in media_parts} == {"video", "audio", "model3d"}
    for part in media_parts:
        assert set(part) <= SHOWN_KEYS, part
        assert "sample_rate" not in part
        assert "channels" not in part
    video = next(part for part in media_parts if part["type"] == "video")
    # The served copy's own frame rate (it keeps the 10 frames a second it was made with).
    assert video["frame_rate"] == Media.objects.get(kind="video").served_frame_rate == 10
    assert_media_responses_blinded(client, media_urls(json.dumps(payload), project.slug))


def test_the_adjudication_page_shows_the_same_blinded_media(client_for, carol, project, pair):
    client = client_for(carol)
    page = client.get(reverse("adjudication-pair", args=[project.slug, pair.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert_blinded(html, "the adjudication page")
    assert_media_responses_blinded(client, media_urls(html, project.slug))
