"""An openai judge's video and audio settings (frames per video, their size, whether it takes
audio) set and checked alike on the command line, the judges page and the admin (docs/
judges.md, "Video and audio")."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from judges.models import Judge
from tests.judges.test_add_judge import ADMIN_FORM, add_judge
from tests.judges.test_judge_pages import LIST, edit_url, openai_data, operator  # noqa: F401

pytestmark = pytest.mark.django_db
ARGS = ("--kind=openai", "--base-url=http://127.0.0.1:9/v1", "--model=m")
EDIT_SETTINGS = {
    "temperature": "0",
    "max_tokens": "1024",
    "timeout_s": "60",
    "requests_per_minute": "0",
    "max_image_side": "1024",
    "video_frame_side": "256",
}


def test_defaults_are_eight_frames_of_512_pixels_and_no_audio():
    add_judge("plain", *ARGS)
    judge = Judge.objects.get(name="plain")
    assert (judge.video_frames, judge.video_frame_side, judge.takes_audio) == (8, 512, False)


def test_add_judge_sets_frames_their_side_and_audio():
    add_judge("omni", *ARGS, "--video-frames=16", "--video-frame-side=336", "--takes-audio")
    judge = Judge.objects.get(name="omni")
    assert (judge.video_frames, judge.video_frame_side, judge.takes_audio) == (16, 336, True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--video-frames=0"], "video_frames: Send from 1 to 64 frames of a video."),
        (["--video-frames=65"], "video_frames: Send from 1 to 64 frames of a video."),
        (["--video-frame-side=8"], "video_frame_side: The largest video frame side must be"),
    ],
)
def test_bad_video_settings_are_refused_naming_the_field(args, message):
    with pytest.raises(CommandError, match=message):
        add_judge("bad", *ARGS, *args)
    assert not Judge.objects.exists()


def test_video_and_audio_flags_do_not_apply_to_other_kinds():
    with pytest.raises(CommandError, match="--takes-audio does not apply to --kind heuristic"):
        add_judge("h", "--kind=heuristic", "--takes-audio")


def test_the_judges_page_sets_and_edits_them(client_for, operator):  # noqa: F811
    client = client_for(operator)
    page = client.get(LIST).content.decode()
    assert 'name="takes_audio"' in page
    assert "Frames per video (openai)" in page
    data = openai_data(video_frames="4", video_frame_side="256", takes_audio="on")
    assert client.post(LIST, data).status_code == 302
    judge = Judge.objects.get(name="qwen3-vl")
    assert (judge.video_frames, judge.video_frame_side, judge.takes_audio) == (4, 256, True)

    # the edit form sends every setting it shows; an unticked box is not sent
    edited = {**data, **EDIT_SETTINGS, "video_frames": "12"}
    del edited["takes_audio"]
    assert client.post(edit_url(judge), edited).status_code == 302
    judge.refresh_from_db()
    assert (judge.video_frames, judge.takes_audio) == (12, False)

    refused = client.post(edit_url(judge), {**edited, "video_frames": "100"})
    assert refused.status_code == 400
    assert "Send from 1 to 64 frames of a video." in refused.content.decode()


def test_the_admin_sets_them_with_the_same_checks(admin_client):
    form = {**ADMIN_FORM, "base_url": "http://h/v1", "takes_audio": "on", "video_frames": "0"}
    refused = admin_client.post("/admin/judges/judge/add/", form)
    assert "Send from 1 to 64 frames of a video." in refused.content.decode()
    created = admin_client.post("/admin/judges/judge/add/", {**form, "video_frames": "6"})
    assert created.status_code == 302
    judge = Judge.objects.get(name="admin-judge")
    assert (judge.video_frames, judge.takes_audio) == (6, True)
