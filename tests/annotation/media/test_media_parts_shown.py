"""Video, audio and 3D parts where pages, judges and releases meet them
(docs/import-format.md, "Video, audio and 3D"):
the comparison page plays them from their served copies, a judge never votes on a pair it
would see only half of, and a release carries them
(tests/annotation/releases/test_release_media.py)."""

from __future__ import annotations

import pytest

from annotation.imports.importer import pairs_import
from annotation.models import Pair
from annotation.releases.selectors import release_rows
from annotation.releases.services import release_build, release_create
from judges.backends.base import JudgeBackend, JudgeItem, JudgeResult, judge_judgeable
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import PLANTED, audio_write, glb_bytes, video_write

pytestmark = pytest.mark.django_db


def _import(project, tmp_path, pair: dict) -> Pair:
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", [pair]), media_root=tmp_path
    )
    return Pair.objects.get(project=project, external_id=pair["id"])


def _av_pair(tmp_path) -> dict:
    video_write(tmp_path / "a.mp4")
    audio_write(tmp_path / "b.wav")
    (tmp_path / "c.glb").write_bytes(glb_bytes())
    pair = text_pair("av-1", task="t2v")
    pair["response_a"]["response_content"] = [["video", "a.mp4"]]
    pair["response_b"]["response_content"] = [["audio", "b.wav"], ["model3d", "c.glb"]]
    return pair


def test_the_comparison_page_plays_the_served_copies(project, alice, client_for, tmp_path):
    pair = _import(project, tmp_path, _av_pair(tmp_path))
    Pair.objects.filter(pk=pair.pk).update(status="queued")
    page = client_for(alice).get(f"/p/{project.slug}/annotate/", follow=True)
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count("<video ") == 1
    assert "poster=" in html
    assert html.count("<audio ") == 1
    assert "binary glTF" in html
    assert PLANTED not in html
    assert "a.mp4" not in html
    assert "m-one" not in html
    for url in [part for part in html.split('"') if f"/p/{project.slug}/media/" in part]:
        served = client_for(alice).get(url)
        assert served.status_code == 200, url
        assert PLANTED.encode() not in b"".join(served.streaming_content)


class _Counting(JudgeBackend):
    def __init__(self) -> None:
        super().__init__(judge=None)
        self.seen: list[int] = []

    def judge_batch(self, items):
        self.seen += [item.pair_id for item in items]
        return [JudgeResult(outcome="ok", preferred="first") for _ in items]


def test_a_judge_is_never_asked_about_parts_it_is_not_sent():
    text = [{"type": "text", "text": "hello"}]
    video = [{"type": "video", "media": "0" * 64}]
    items = [
        JudgeItem(pair_id=1, order="AB", task="t2t", prompt=text, first=text, second=text),
        JudgeItem(pair_id=2, order="AB", task="t2v", prompt=text, first=video, second=text),
    ]
    backend = _Counting()
    first, second = judge_judgeable(backend, items)
    assert backend.seen == [1]
    assert first.outcome == "ok"
    assert second.outcome == "skipped"
    assert not second.transient
    assert "video parts" in second.error


def test_a_release_carries_the_video_audio_and_3d_parts(project, dave, tmp_path):
    pair = _import(project, tmp_path, _av_pair(tmp_path))
    Pair.objects.filter(pk=pair.pk).update(status="consensus", consensus_label="A")
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)
    release = release_build(release=release)
    assert release.status == release.Status.BUILT
    (row,) = release_rows(release)
    assert [part["type"] for part in row["chosen"][0]["content"]] == ["video"]
    assert [part["type"] for part in row["rejected"][0]["content"]] == ["audio", "model3d"]
    assert row["chosen_videos"][0].startswith("videos/")
    assert row["rejected_audios"][0].startswith("audio/")
    assert row["rejected_models3d"][0].startswith("models/")
