"""What an OpenAI-compatible judge receives of a 3D response: a ``.glb`` as the views
rendered at import, rendered-view responses as their images, each labelled "view k of n"
(docs/judges.md, "3D models"); judges that are not sent 3D still refuse such pairs."""

from __future__ import annotations

import base64
import re

import pytest
from django.conf import settings

from annotation.core.content import image_part, text_part
from annotation.models import Media, Pair
from judges.backends import get_backend
from judges.backends.base import JudgeBackend, JudgeResult, judge_judgeable
from judges.models import Judge
from tests.annotation.media.conftest import mesh_glb
from tests.annotation.media.test_import_av import import_media, media_pair
from tests.judges.backend_helpers import item, noisy_image, store_image
from tests.judges.fake_openai import FakeOpenAI, verdict

pytestmark = pytest.mark.django_db


@pytest.fixture
def server():
    with FakeOpenAI(verdict("1")) as fake:
        yield fake


@pytest.fixture
def judge(server) -> Judge:
    return Judge.objects.create(
        name="fake-judge", kind="openai", base_url=server.base_url, model="judge-model",
        timeout_s=5.0, options={"retry_base_s": 0.01, "retry_max_s": 0.2},
    )  # fmt: skip


@pytest.fixture
def models_pair(project, tmp_path) -> Pair:
    (tmp_path / "red.glb").write_bytes(mesh_glb(base_colour=[1, 0, 0, 1]))
    (tmp_path / "blue.glb").write_bytes(mesh_glb(base_colour=[0, 0, 1, 1]))
    import_media(project, tmp_path, [media_pair("m1", "model3d", "red.glb", "blue.glb")])
    return Pair.objects.get(project=project)


def _sent_images(request) -> list[bytes]:
    return [base64.b64decode(url.split(",", 1)[1]) for url in request.image_urls]


def _stored(sha256: str) -> bytes:
    return (settings.MEDIA_ROOT / Media.objects.get(pk=sha256).relative_path).read_bytes()


def _judge(judge: Judge, items):
    backend = get_backend(judge)
    try:
        return judge_judgeable(backend, items)
    finally:
        backend.close()


def test_a_glb_goes_to_the_judge_as_its_views_rendered_at_import(server, judge, models_pair):
    red = Media.objects.get(pk=models_pair.response_a.content[0]["media"])
    blue = Media.objects.get(pk=models_pair.response_b.content[0]["media"])
    task_item = item(models_pair.response_a.content, models_pair.response_b.content, task="t23d")
    [result] = _judge(judge, [task_item])
    assert result.outcome == "ok"
    assert result.preferred == "first"
    [request] = server.requests
    views = [*red.rendered_views, *blue.rendered_views]
    assert _sent_images(request) == [_stored(sha) for sha in views]
    # Each image follows its label, in order, within each response.
    labels = re.findall(r"view (\d) of (\d)", request.text)
    assert labels == [(str(k), "6") for k in range(1, 7)] * 2
    assert "view 1 of 6" in request.response_text(1)
    assert "view 6 of 6" in request.response_text(2)
    parts = request.content_parts
    for index, part in enumerate(parts):
        if part["type"] == "image_url":
            assert re.search(r"view \d of 6$", parts[index - 1]["text"])


def test_rendered_view_responses_are_sent_as_labelled_views(server, judge, models_pair):
    shots = [store_image(noisy_image(32, 32, seed=seed)) for seed in range(3)]
    rendered = [image_part(shot.sha256) for shot in shots]
    glb = models_pair.response_b.content
    [result] = _judge(judge, [item(rendered, glb, task="t23d")])
    assert result.outcome == "ok"
    [request] = server.requests
    assert re.findall(r"view (\d) of (\d)", request.response_text(1)) == [
        ("1", "3"), ("2", "3"), ("3", "3"),
    ]  # fmt: skip
    assert _sent_images(request)[:3] == [_stored(shot.sha256) for shot in shots]
    assert len(_sent_images(request)) == 3 + 6


def test_images_of_other_tasks_are_not_labelled_as_views(server, judge):
    shots = [image_part(store_image(noisy_image(32, 32, seed=seed)).sha256) for seed in range(2)]
    _judge(judge, [item(shots, [text_part("no image")], task="t2i")])
    assert "view 1 of" not in server.requests[0].text


def test_a_model_without_rendered_views_is_a_permanent_error_without_a_call(
    server, judge, models_pair
):
    model = models_pair.response_a.content[0]["media"]
    Media.objects.filter(pk=model).update(rendered_views=None)
    task_item = item(models_pair.response_a.content, models_pair.response_b.content, task="t23d")
    missing = item([{"type": "model3d", "media": "0" * 64}], "text", task="t23d", pair_id=2)
    first, second = _judge(judge, [task_item, missing])
    assert first.outcome == "error"
    assert not first.transient
    assert f"3D model {model[:12]} has no rendered views" in first.error
    assert second.outcome == "error"
    assert "not in the media store" in second.error
    assert server.request_count == 0


class _TextOnly(JudgeBackend):
    def judge_batch(self, items):
        return [JudgeResult(outcome="ok", preferred="first") for _ in items]


def test_a_judge_not_sent_3d_still_refuses_a_3d_pair(models_pair):
    task_item = item(models_pair.response_a.content, models_pair.response_b.content, task="t23d")
    [result] = judge_judgeable(_TextOnly(judge=None), [task_item])
    assert result.outcome == "skipped"
    assert not result.transient
    assert result.error == "this pair has model3d parts, which this judge is not sent"
    # Sending 3D to openai judges leaves their other refusals as they were: audio, to a judge
    # that does not take it.
    audio = item([{"type": "audio", "media": "0" * 64}], "text", task="t2a")
    [refused] = _judge_refusals(audio)
    assert "this pair has audio parts" in refused.error


def _judge_refusals(*items):
    backend = get_backend(Judge(name="x", kind="openai", base_url="http://127.0.0.1:9", model="m"))
    return judge_judgeable(backend, list(items))
