"""Best-of-N over video, audio and 3D candidates (docs/judges-evaluation.md, "Best-of-N"):
the candidates name the project's media of each kind by hash, and the run's page shows the
prompt and every candidate with the comparison page's players (its ``content_parts``)."""

from __future__ import annotations

import re

import pytest

from annotation.core.media_keys import media_path
from annotation.imports.importer import pairs_import
from annotation.models import Media
from judges.models import BestOfNRun, Judge
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import audio_write, glb_bytes, video_write
from tests.annotation.queue.test_workbench_page import assert_csp_clean
from tests.judges.test_best_of_n_page import GOOD, prompt, run

pytestmark = pytest.mark.django_db


@pytest.fixture
def heuristic(db):
    return Judge.objects.create(name="heuristic", kind="heuristic")


@pytest.fixture
def av_media(project, tmp_path) -> dict[str, str]:
    """A video, an audio clip and a 3D model of the project, by kind: their hashes."""
    video_write(tmp_path / "a.mp4")
    audio_write(tmp_path / "b.wav")
    (tmp_path / "c.glb").write_bytes(glb_bytes())
    pair = text_pair("av-1", task="t2v")
    pair["response_a"]["response_content"] = [["video", "a.mp4"], ["audio", "b.wav"]]
    pair["response_b"]["response_content"] = [["model3d", "c.glb"]]
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", [pair]), media_root=tmp_path
    )
    return {kind: Media.objects.get(kind=kind).sha256 for kind in ("video", "audio", "model3d")}


def test_the_run_page_plays_each_candidate(client_for, carol, project, heuristic, av_media):
    client = client_for(carol)
    line = prompt(
        "p1",
        [["text", GOOD], ["video", av_media["video"]]],
        [["audio", av_media["audio"]]],
        [["text", "A model"], ["model3d", av_media["model3d"]]],
    )
    line["prompt"] = [["text", "Show me a bar"], ["audio", av_media["audio"]]]
    response = run(client, project, heuristic, "scores", line)
    assert response.status_code == 302, response.context["form"].errors
    saved = BestOfNRun.objects.get()
    assert [c["id"] for c in saved.contents[0]["candidates"]] == ["c0", "c1", "c2"]
    body = client.get(response["Location"]).content.decode()
    media = {kind: media_path(slug=project.slug, sha256=sha) for kind, sha in av_media.items()}
    poster = media_path(slug=project.slug, sha256=Media.objects.get(kind="video").poster_sha256)
    assert re.search(rf'<video src="{re.escape(media["video"])}"[^>]*poster="{poster}"', body)
    assert 'aria-label="Video 2 of the candidate c0"' in body
    assert body.count(f'<audio src="{media["audio"]}"') == 2  # the prompt's and c1's
    assert f'<a href="{media["model3d"]}" download="model-2.glb">' in body
    assert "Candidate c2" in body
    assert "Show me a bar" in body
    assert_csp_clean(body)
    # The players' files are served to the run's viewers.
    assert client.get(media["video"]).status_code == 200


def test_a_hash_of_another_kind_is_refused(client_for, carol, project, heuristic, av_media):
    line = prompt("p1", [["audio", av_media["video"]]], GOOD)
    response = run(client_for(carol), project, heuristic, "knockout", line)
    assert response.status_code == 400
    assert "is stored as video, not audio" in str(response.context["form"].errors)
    assert not BestOfNRun.objects.exists()
