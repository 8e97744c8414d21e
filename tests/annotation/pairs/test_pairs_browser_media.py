"""The pairs browser's thumbnails of video, audio and 3D parts (docs/curators.md): a video's
poster frame, an audio clip's waveform drawn from its stored peaks as an inline SVG (no
script, no style attribute), a 3D marker, beside the images shown as before."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.core.media_keys import media_path
from annotation.imports.importer import pairs_import
from annotation.models import Media, Pair
from annotation.pairs.selectors import PairFilters, pairs_browse
from annotation.pairs.thumbnails import WAVE_BARS, waveform_path
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import audio_write, glb_bytes, video_write
from tests.annotation.queue.test_workbench_page import assert_csp_clean

pytestmark = pytest.mark.django_db


@pytest.fixture
def av_pair(project, tmp_path) -> Pair:
    video_write(tmp_path / "a.mp4")
    audio_write(tmp_path / "b.wav")
    (tmp_path / "c.glb").write_bytes(glb_bytes())
    pair = text_pair("av-1", task="t2v")
    pair["prompt_content"] = [["text", "Which is better?"], ["video", "a.mp4"]]
    pair["response_a"]["response_content"] = [["text", "heard"], ["audio", "b.wav"]]
    pair["response_b"]["response_content"] = [["model3d", "c.glb"], ["audio", "b.wav"]]
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", [pair]), media_root=tmp_path
    )
    return Pair.objects.get(project=project, external_id="av-1")


def test_the_row_shows_a_poster_a_waveform_and_a_3d_marker(client_for, carol, project, av_pair):
    client = client_for(carol)
    html = client.get(reverse("pairs", args=[project.slug])).content.decode()
    cell = re.search(r'<td class="pairs-thumbs">(.*?)</td>', html, re.S).group(1)
    video = Media.objects.get(kind="video")
    audio = Media.objects.get(kind="audio")
    poster = media_path(slug=project.slug, sha256=video.poster_sha256)
    assert re.search(rf'pairs-thumb-video"[^>]*><img src="{re.escape(poster)}"', cell)
    assert f'<path d="{waveform_path(audio.peaks)}"/>' in cell
    assert 'pairs-thumb-3d" title="3D model">3D</span>' in cell
    assert_csp_clean(html)
    # The poster is served to the curator like any of the project's media.
    assert client.get(poster).status_code == 200


def test_the_thumbnails_cost_one_query_more_only_with_video_or_audio(
    project, av_pair, django_assert_num_queries
):
    with django_assert_num_queries(3):
        page = pairs_browse(project=project, filters=PairFilters())
    assert [thumb.kind for thumb in page.rows[0].thumbnails] == ["video", "audio", "model3d"]


def test_the_waveform_follows_the_peaks():
    loud_then_silent = [1.0] * 50 + [0.0] * 50
    path = waveform_path(loud_then_silent)
    heights = [float(h) for h in re.findall(r"v([\d.]+)", path)]
    assert len(heights) == WAVE_BARS
    assert heights[: WAVE_BARS // 2] == [44.0] * (WAVE_BARS // 2)
    assert heights[WAVE_BARS // 2 :] == [1.0] * (WAVE_BARS // 2)
    assert waveform_path([]) == waveform_path([0.0] * 10)  # no peaks: a flat line
