"""A judge that is not sent a pair's media is skipped for that pair, with the reason on the
run's page, in the API and from run_filter; the pairs no judge could see are named; and a pair
is easy only with the run's minimum of valid votes, set on the form, the API and the command
(docs/judges-runs.md, "The ensemble rule" and "Watching a run")."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.core.content import text_part
from annotation.models import Pair, PairStatus
from judges import backends
from judges.backends.base import JUDGED_PART_TYPES
from judges.models import FilterRun, Verdict
from judges.runs import services as runs
from judges.runs.calls import judge_backends_close
from tests.factories import PairFactory, make_response
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    ScriptedBackend,
    canonical,
    celery_eager,
    make_judges,
    outcome,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]

VIDEO_REASON = "this pair has video parts, which this judge is not sent"
AUDIO_REASON = "this pair has audio parts, which this judge is not sent"


class _SeesVideo(ScriptedBackend):
    def received_parts(self) -> frozenset[str]:
        return JUDGED_PART_TYPES | {"video"}


def use_judges(monkeypatch, answers: dict, *, seeing_video=()) -> list:
    """Scripted judges (``tests.judges.scripted``); those in ``seeing_video`` are sent video
    too, the others only text and images. Returns the call log."""
    judge_backends_close()
    ScriptedBackend.calls = []

    def backend(judge):
        kind = _SeesVideo if judge.name in seeing_video else ScriptedBackend
        return kind(judge, answers)

    monkeypatch.setattr(backends, "get_backend", backend)
    return ScriptedBackend.calls


def media_pair(project, external_id: str, kind: str) -> Pair:
    """A pair whose response A holds a ``kind`` part beside its text."""
    part = {"type": kind, "media": (kind[0] * 64)}
    return PairFactory(
        project=project,
        external_id=external_id,
        response_a=make_response(project, "m1", external_id, [text_part("a"), part]),
        response_b=make_response(project, "m2", external_id, [text_part(f"b {external_id}")]),
    )


def start(django_capture_on_commit_callbacks, **kwargs) -> FilterRun:
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.filter_run_create(**kwargs)
    run.refresh_from_db()
    return run


@pytest.fixture
def three_judges(monkeypatch):
    """sees (sent video) and two blind judges (text and images), every one voting A."""
    calls = use_judges(
        monkeypatch,
        {name: canonical("A") for name in ("sees", "blind1", "blind2")},
        seeing_video=("sees",),
    )
    return make_judges("sees", "blind1", "blind2"), calls


@pytest.fixture
def skipped_run(project, three_judges, django_capture_on_commit_callbacks):
    """A text pair every judge votes on, a video pair only ``sees`` can see and an audio pair
    no judge can, with the default minimum of valid votes (3: one per judge)."""
    judges, _ = three_judges
    PairFactory(project=project, external_id="text-1")
    media_pair(project, "video-1", "video")
    media_pair(project, "audio-1", "audio")
    return start(django_capture_on_commit_callbacks, project=project, judges=judges)


def test_a_judge_not_sent_a_pairs_media_is_skipped_with_the_reason(skipped_run, three_judges):
    _, calls = three_judges
    run = skipped_run
    assert run.status == FilterRun.Status.SUCCEEDED
    assert run.min_valid_votes == 3
    verdicts = {
        (v.judge.name, v.pair.external_id, v.order): v
        for v in Verdict.objects.filter(run=run).select_related("judge", "pair")
    }
    for order in ("AB", "BA"):
        for blind in ("blind1", "blind2"):
            video = verdicts[blind, "video-1", order]
            assert (video.outcome, video.side, video.error) == ("skipped", "", VIDEO_REASON)
            assert verdicts[blind, "audio-1", order].error == AUDIO_REASON
        assert verdicts["sees", "video-1", order].outcome == "ok"
        assert verdicts["sees", "audio-1", order].outcome == "skipped"
    # a skipped judge is never called on the pair
    called = {(name, item.pair_id) for name, item in calls}
    video_pk = Pair.objects.get(external_id="video-1").pk
    assert ("sees", video_pk) in called
    assert ("blind1", video_pk) not in called
    assert run.summary["judges"]["blind1"]["skipped"] == 4
    assert run.summary["judges"]["blind1"]["error"] == 0


def test_an_easy_pair_needs_the_runs_minimum_of_valid_votes(
    skipped_run, project, three_judges, django_capture_on_commit_callbacks
):
    """The text pair (6 of 6 A) is easy as before; the video pair's 2 of 2 A from the one
    judge that saw it are fewer than the 3 valid votes the run needs, so it goes to the
    annotators; with a minimum of 2 the same votes make it easy."""
    status = dict(Pair.objects.values_list("external_id", "status"))
    assert status == {
        "text-1": PairStatus.EASY,
        "video-1": PairStatus.QUEUED,
        "audio-1": PairStatus.QUEUED,
    }
    video = Pair.objects.get(external_id="video-1")
    assert video.ensemble_summary["votes"] == {"A": 2, "B": 0, "tie": 0}
    assert video.ensemble_summary["min_valid_votes"] == 3
    assert video.ensemble_summary["judges"]["blind1"] == {"AB": "skipped", "BA": "skipped"}
    summary = skipped_run.summary
    assert (summary["easy"], summary["queued"], summary["too_few_votes"]) == (1, 2, 1)
    assert summary["no_votes"] == 1  # the audio pair

    judges, _ = three_judges
    again = media_pair(project, "video-2", "video")
    run = start(
        django_capture_on_commit_callbacks, project=project, judges=judges, min_valid_votes=2
    )
    again.refresh_from_db()
    assert run.min_valid_votes == 2
    assert again.status == PairStatus.EASY


def test_the_run_page_gives_every_reason_and_names_the_pairs_no_judge_could_see(
    client_for, carol, dave, skipped_run
):
    audio = Pair.objects.get(external_id="audio-1")
    for user in (carol, dave):
        body = client_for(user).get(
            reverse("judges:run", args=[audio.project.slug, skipped_run.number])
        )
        html = body.content.decode()
        assert body.status_code == 200
        assert "and only with at least 3 valid votes" in html
        assert '<th class="num">Skipped</th>' in html
        blind = html.split('data-reasons="blind1"', 1)[1].split("</div>", 1)[0]
        assert f"2 &times; skipped: {VIDEO_REASON}" in blind
        assert f"2 &times; skipped: {AUDIO_REASON}" in blind
        unseen = html.split("data-unseen", 1)[1].split("</div>", 1)[0]
        assert "1 pair no judge could see" in unseen
        assert (
            f'href="{reverse("pair", args=[audio.project.slug, audio.pk])}">audio-1</a>' in unseen
        )
        assert AUDIO_REASON in unseen
        assert "video-1" not in unseen  # one judge saw it
        assert "1 not easy for having fewer than 3 valid votes" in html


def test_the_api_gives_the_reasons_and_the_unseen_pairs(api_for, dave, alice, eve, skipped_run):
    url = f"/api/v1/projects/{skipped_run.project.slug}/filter-runs/{skipped_run.number}/"
    detail = api_for(dave).get(url).json()
    assert detail["min_valid_votes"] == 3
    progress = detail["progress"]
    judges = {judge["name"]: judge for judge in progress["judges"]}
    assert judges["blind2"]["skipped"] == 4
    assert sorted(judges["blind2"]["reasons"], key=lambda r: r["reason"]) == [
        {"outcome": "skipped", "reason": AUDIO_REASON, "count": 2},
        {"outcome": "skipped", "reason": VIDEO_REASON, "count": 2},
    ]
    assert judges["sees"]["reasons"] == [{"outcome": "skipped", "reason": AUDIO_REASON, "count": 2}]
    audio = Pair.objects.get(external_id="audio-1")
    assert progress["unseen"] == {
        "count": 1,
        "pairs": [{"id": audio.pk, "external_id": "audio-1", "reasons": [AUDIO_REASON]}],
    }
    assert progress["pairs"]["too_few_votes"] == 1
    assert api_for(alice).get(url).status_code == 403
    assert api_for(eve).get(url).status_code == 404


def test_every_error_has_its_reason_escaped(
    monkeypatch, project, client_for, carol, django_capture_on_commit_callbacks
):
    use_judges(
        monkeypatch,
        {
            "good": canonical("A"),
            "broken": outcome("error", error="HTTP 500: <b>upstream</b>"),
            "quiet": outcome("error"),
        },
    )
    judges = make_judges("good", "broken", "quiet")
    PairFactory(project=project)
    run = start(django_capture_on_commit_callbacks, project=project, judges=judges)
    html = client_for(carol).get(reverse("judges:run", args=[project.slug, run.number])).content
    html = html.decode()
    assert "2 &times; error: HTTP 500: &lt;b&gt;upstream&lt;/b&gt;" in html
    assert "<b>upstream</b>" not in html
    assert "2 &times; error: no reason recorded" in html
    assert 'data-reasons="good"' not in html  # every call of it was a vote


def test_the_form_api_and_command_set_the_minimum(
    monkeypatch, project, client_for, api_for, carol, capsys, django_capture_on_commit_callbacks
):
    use_judges(monkeypatch, {"j1": canonical("A"), "j2": canonical("A")})
    judges = make_judges("j1", "j2")
    url = reverse("judges:runs", args=[project.slug])
    PairFactory(project=project)
    page = client_for(carol).get(url).content.decode()
    assert 'name="min_valid_votes"' in page
    assert "Minimum valid votes" in page
    form = {"judges": [j.pk for j in judges], "threshold": "0.9", "budget_per_task": ""}
    refused = client_for(carol).post(url, {**form, "min_valid_votes": "5"})
    assert refused.status_code == 200
    assert "At most 4: 2 judges in both orders" in refused.content.decode()
    assert not FilterRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        client_for(carol).post(url, {**form, "min_valid_votes": "4"})
    assert FilterRun.objects.get().min_valid_votes == 4

    api = api_for(carol)
    base = f"/api/v1/projects/{project.slug}/filter-runs/"
    PairFactory(project=project)
    bad = api.post(base, {"judges": ["j1"], "min_valid_votes": 0}, format="json")
    assert bad.status_code == 400
    assert "min_valid_votes" in bad.json()
    bad = api.post(base, {"judges": ["j1"], "min_valid_votes": 3}, format="json")
    assert bad.status_code == 400
    assert "At most 2" in str(bad.json()["min_valid_votes"])
    with django_capture_on_commit_callbacks(execute=True):
        created = api.post(base, {"judges": ["j1", "j2"]}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["min_valid_votes"] == 2  # the default: one per judge

    PairFactory(project=project)
    call_command("run_filter", project.slug, "--judges", "j1,j2", "--min-votes", "3")
    run = FilterRun.objects.order_by("-number").first()
    assert run is not None
    assert run.min_valid_votes == 3
    assert "and only with at least 3 valid votes" in capsys.readouterr().out
