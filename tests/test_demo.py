"""The demo: the generator is reproducible and covers every task; load_demo is idempotent."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count
from django.urls import reverse
from PIL import Image

from annotation.core.media_keys import media_path
from annotation.media.demo import demo_media_write
from annotation.media.glb import glb_inspect
from annotation.models import Media, Membership, Pair, PairStatus, Project, Prompt, Response, Role
from fixtures.make_demo import generate_demo, task_counts
from judges.models import FilterRun, Judge

TASKS = {"t2i", "edit", "interleaved", "text"}
# Video, audio and 3D pairs (annotation/media/demo.py): one per flaw.
MEDIA_TASKS = {"t2v": 3, "t2a": 3, "t23d": 2}
MEDIA_PAIRS = sum(MEDIA_TASKS.values())
DEMO_USERS = {
    "curator": Role.CURATOR,
    "researcher": Role.RESEARCHER,
    "annotator1": Role.ANNOTATOR,
    "annotator2": Role.ANNOTATOR,
    "annotator3": Role.ANNOTATOR,
}


def _hashes(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _hashes_of(folder: Path, relative: str) -> str:
    return hashlib.sha256((folder / relative).read_bytes()).hexdigest()


def _records(jsonl: Path) -> list[dict]:
    return [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]


def _image_paths(parts: list[list[str]]) -> list[str]:
    return [value for kind, value in parts if kind == "image"]


@pytest.fixture(scope="module")
def demo_set(tmp_path_factory) -> Path:
    return generate_demo(tmp_path_factory.mktemp("demo"))


def test_generator_gives_the_same_bytes_every_time(demo_set, tmp_path):
    again = generate_demo(tmp_path / "again")
    first, second = _hashes(demo_set.parent), _hashes(again.parent)
    assert len(first) > 200
    assert first == second


def test_another_seed_gives_another_demo(demo_set, tmp_path):
    other = generate_demo(tmp_path / "other", seed=8)
    assert _hashes(other.parent)["demo.jsonl"] != _hashes(demo_set.parent)["demo.jsonl"]


def test_demo_has_200_pairs_over_the_four_tasks_with_real_images(demo_set):
    records = _records(demo_set)
    assert len(records) == 200
    assert len({r["id"] for r in records}) == 200
    assert {r["task"] for r in records} == TASKS
    assert all(r["response_a"]["model_name"] != r["response_b"]["model_name"] for r in records)
    for record in records:
        for label in ("a", "b"):
            response = record[f"response_{label}"]["response_content"]
            assert response, f"{record['id']}: empty response {label}"
        paths = _image_paths(record["prompt_content"])
        paths += _image_paths(record["response_a"]["response_content"])
        paths += _image_paths(record["response_b"]["response_content"])
        for relative in paths:
            assert not Path(relative).is_absolute()
            with Image.open(demo_set.parent / relative) as image:
                assert image.format == "PNG"
                assert 256 <= image.width <= 384
                assert 256 <= image.height <= 384
                image.verify()


def test_each_task_has_the_content_its_task_needs(demo_set):
    by_task: dict[str, list[dict]] = {}
    for record in _records(demo_set):
        by_task.setdefault(record["task"], []).append(record)

    def kinds(parts):
        return {kind for kind, _ in parts}

    for record in by_task["t2i"]:
        assert kinds(record["prompt_content"]) == {"text"}
        assert kinds(record["response_a"]["response_content"]) == {"image"}
    for record in by_task["edit"]:
        assert kinds(record["prompt_content"]) == {"text", "image"}
        assert kinds(record["response_b"]["response_content"]) == {"image"}
    for record in by_task["interleaved"]:
        for side in ("response_a", "response_b"):
            parts = record[side]["response_content"]
            assert kinds(parts) == {"text", "image"}
            assert len(parts) >= 4
    for record in by_task["text"]:
        assert kinds(record["response_a"]["response_content"]) == {"text"}
        assert record["response_a"]["response_content"] != record["response_b"]["response_content"]


def test_rivals_differ_and_the_set_mixes_clear_pairs_with_close_calls(demo_set):
    records = _records(demo_set)
    folder = demo_set.parent
    for record in records:
        a = _image_paths(record["response_a"]["response_content"])
        b = _image_paths(record["response_b"]["response_content"])
        if a and b and len(a) == len(b):
            assert [_hashes_of(folder, p) for p in a] != [_hashes_of(folder, p) for p in b]
    difficulty = {r["difficulty"] for r in records}
    assert difficulty == {"clear", "close call"}
    assert any("text rendering" in r.get("criterion", "") for r in records)
    annotated = [r for r in records if "human_annotations" in r]
    assert 5 <= len(annotated) <= 40
    assert all(r["prompt_source"].startswith("arbiter-demo/") for r in records)


def test_offline_judges_prefer_the_better_side_of_clear_pairs(demo_set):
    """The offline scores the demo's filter run reads: on a clear pair the scorer favours the
    side the prior label names, and the pairwise judge gives one side in both orders unless it
    falls for the position (always on close calls)."""
    records = _records(demo_set)
    for record in records:
        scorer, pairwise = record["scores"]["offline-scorer"], record["scores"]["offline-pairwise"]
        assert set(scorer) == {"A", "B"}
        assert set(pairwise) == {"AB", "BA"}
        if record["difficulty"] == "close call":
            assert pairwise == {"AB": "A", "BA": "B"}
        elif "chosen" in record:
            better = record["chosen"]
            assert scorer[better] > scorer["B" if better == "A" else "A"] + 0.3
    clear = [r for r in records if r["difficulty"] == "clear"]
    consistent = [r for r in clear if len(set(r["scores"]["offline-pairwise"].values())) == 1]
    assert 0.7 * len(clear) <= len(consistent) < len(clear)


def test_small_demo_still_covers_every_task():
    assert task_counts(4) == {"t2i": 1, "edit": 1, "interleaved": 1, "text": 1}
    assert sum(task_counts(24).values()) == 24
    with pytest.raises(ValueError, match="at least 4 pairs"):
        task_counts(3)


# --- load_demo -----------------------------------------------------------------------------


def _load(tmp_path: Path, *extra: str) -> str:
    out = StringIO()
    call_command("load_demo", "--pairs", "24", "--out", str(tmp_path / "demo"), *extra, stdout=out)
    return out.getvalue()


def _counts() -> dict[str, int]:
    return {
        "projects": Project.objects.count(),
        "pairs": Pair.objects.count(),
        "prompts": Prompt.objects.count(),
        "responses": Response.objects.count(),
        "media": Media.objects.count(),
        "users": get_user_model().objects.count(),
        "memberships": Membership.objects.count(),
        "judges": Judge.objects.count(),
    }


@pytest.mark.django_db(transaction=True)  # the filter run starts on commit
def test_load_demo_creates_the_project_users_and_queued_pairs(tmp_path, client):
    output = _load(tmp_path)
    project = Project.objects.get(slug="demo")
    assert project.scale == "ternary"
    assert project.overlap == 3
    assert "How to judge" in project.guidelines
    roles = dict(Membership.objects.filter(project=project).values_list("user__username", "role"))
    assert roles == DEMO_USERS
    pairs = Pair.objects.filter(project=project)
    assert pairs.count() == 24 + MEDIA_PAIRS
    assert set(pairs.values_list("task", flat=True)) == TASKS | set(MEDIA_TASKS)
    assert Media.objects.exists()
    assert Judge.objects.get(name="heuristic-sanity").kind == Judge.Kind.HEURISTIC
    assert set(Judge.objects.filter(kind=Judge.Kind.SCORES).values_list("name", flat=True)) == {
        "offline-scorer",
        "offline-pairwise",
    }
    # Pairs whose three prior votes reach the overlap were decided at import, before any run.
    decided = pairs.filter(status__in=[PairStatus.CONSENSUS, PairStatus.DISPUTED])
    assert decided.exists()
    assert all(pair.prior_annotations.count() == 3 for pair in decided)
    # The filter run finished: the judges' unanimous pairs are easy, the rest queued, and
    # every close call is among the queued (the pairwise judge falls for the position).
    run = FilterRun.objects.get(project=project)
    assert run.status == FilterRun.Status.SUCCEEDED
    assert run.judges.count() == 3
    easy = pairs.filter(status=PairStatus.EASY)
    queued = pairs.filter(status=PairStatus.QUEUED)
    assert easy.exists()
    assert queued.exists()
    assert easy.count() + queued.count() + decided.count() == 24 + MEDIA_PAIRS
    assert queued.filter(task__in=MEDIA_TASKS).count() == MEDIA_PAIRS
    assert {p.metadata["difficulty"] for p in easy} == {"clear"}
    assert not pairs.filter(status=PairStatus.EASY, metadata__difficulty="close call").exists()
    assert all(p.ensemble_label in ("A", "B") for p in easy)
    assert "Filter run" in output
    assert "easy" in output
    # The printed table holds working logins.
    for username in DEMO_USERS:
        assert f"arbiter-{username}" in output
        assert username in output
    response = client.post(
        reverse("login"), {"username": "annotator1", "password": "arbiter-annotator1"}
    )
    assert response.status_code == 302
    assert project.name in client.get(reverse("home")).content.decode()


@pytest.mark.django_db(transaction=True)
def test_load_demo_shows_every_modality_with_its_media_served(tmp_path, client):
    _load(tmp_path)
    project = Project.objects.get(slug="demo")
    pairs = Pair.objects.filter(project=project, task__in=MEDIA_TASKS)
    counts = {task: pairs.filter(task=task).count() for task in MEDIA_TASKS}
    assert counts == MEDIA_TASKS
    flaws = {pair.external_id: pair.prior_label for pair in pairs}
    assert set(flaws) == {
        "t2v-colour", "t2v-stutter", "t2v-direction",
        "t2a-pitch", "t2a-clipping", "t2a-silence",
        "t23d-shape", "t23d-colour",
    }  # fmt: skip
    assert set(flaws.values()) <= {"A", "B"}
    client.force_login(get_user_model().objects.get(username="annotator1"))
    served = {}
    for pair in pairs.select_related("response_a", "response_b"):
        for response in (pair.response_a, pair.response_b):
            [part] = response.content
            media = Media.objects.get(pk=part["media"])
            answer = client.get(media_path(slug=project.slug, sha256=media.sha256))
            assert answer.status_code == 200, pair.external_id
            served[part["type"]] = answer["Content-Type"]
            if part["type"] == "video":
                assert media.duration_seconds == pytest.approx(2.0, abs=0.1)
                assert media.poster_sha256
            if part["type"] == "audio":
                assert media.peaks
                assert media.duration_seconds == pytest.approx(1.5, abs=0.05)
    assert served == {"video": "video/mp4", "audio": "audio/wav", "model3d": "model/gltf-binary"}
    # The rivals differ from the good side in what the flaw names.
    silence = pairs.get(external_id="t2a-silence")
    peaks = [
        max(Media.objects.get(pk=r.content[0]["media"]).peaks)
        for r in (silence.response_a, silence.response_b)
    ]
    assert sorted(peaks)[0] == 0.0
    assert sorted(peaks)[1] > 0.4


@pytest.mark.django_db(transaction=True)
def test_load_demo_twice_adds_nothing_and_prints_the_logins_again(tmp_path):
    _load(tmp_path)
    before = _counts()
    output = _load(tmp_path)
    assert _counts() == before
    assert "annotator3" in output
    assert "arbiter-annotator3" in output


@pytest.mark.django_db(transaction=True)
def test_load_demo_reset_starts_the_project_afresh(tmp_path):
    _load(tmp_path)
    old = Project.objects.get(slug="demo")
    Pair.objects.filter(project=old).update(status=PairStatus.DISPUTED)
    _load(tmp_path, "--reset")
    project = Project.objects.get(slug="demo")
    assert project.pk != old.pk
    statuses = set(Pair.objects.filter(project=project).values_list("status", flat=True))
    # Fresh: filtered or queued, or decided at import by their prior votes (none disputed
    # by hand any more).
    assert {PairStatus.EASY, PairStatus.QUEUED} <= statuses
    assert statuses <= {PairStatus.EASY, PairStatus.QUEUED, PairStatus.CONSENSUS}
    assert FilterRun.objects.filter(project=project).count() == 1
    assert Membership.objects.filter(project=project).count() == len(DEMO_USERS)


@pytest.mark.django_db
def test_load_demo_refuses_production(tmp_path, settings):
    settings.PRODUCTION = True
    with pytest.raises(CommandError, match="not in production"):
        _load(tmp_path)
    assert not Project.objects.exists()


def test_media_generator_gives_the_same_pairs_every_time(tmp_path):
    first = demo_media_write(tmp_path / "one")
    before = _hashes(first.parent)
    assert _hashes(demo_media_write(tmp_path / "one").parent) == before  # videos kept
    # Elsewhere: the same pairs file, tones and models (the videos are encoded afresh).
    other = _hashes(demo_media_write(tmp_path / "two").parent)
    assert {k: v for k, v in other.items() if not k.endswith(".mp4")} == {
        k: v for k, v in before.items() if not k.endswith(".mp4")
    }
    records = _records(first)
    assert {record["task"] for record in records} == set(MEDIA_TASKS)
    for name in ("model-shape-good.glb", "model-shape-bad.glb"):
        glb_inspect((first.parent / "media" / name).read_bytes())
    # The stutter holds each position for three frames; the smooth clip moves every frame.
    assert _distinct_frames(first.parent / "media" / "video-stutter-bad.mp4") == 8
    assert _distinct_frames(first.parent / "media" / "video-stutter-good.mp4") == 24


def _distinct_frames(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        shown = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    # x264 keeps a held frame near enough to the last one: compare coarsely.
    return 1 + sum(
        int(abs(a.astype(int) - b.astype(int)).mean() > 1.0) for a, b in itertools.pairwise(shown)
    )


# --- the README's account of the demo --------------------------------------------------------

README = Path(__file__).resolve().parent.parent / "README.md"
NUMBER_WORDS = {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def _readme_demo() -> dict:
    """What the README says ``make demo`` loads: the pairs, the tasks by name and number, the
    pairs drawn and those made with media, and the logins of its table."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    shows = text[text.index("**What the demo shows.**") : text.index("**Where to click.**")]
    holds = re.search(r"The demo project holds (\d+) pairs over (\w+) tasks", shows)
    drawn = re.search(r"(\d+) are drawn with Pillow over (\w+) of them", shows)
    made = re.search(r"The other (\d+) are made when the demo loads", shows)
    step = re.search(r"then it makes (\d+) video, audio and 3D pairs", text)
    assert holds, "the README no longer says how many pairs and tasks the demo holds"
    assert drawn, "the README no longer says how many of the demo's pairs are drawn"
    assert made, "the README no longer says how many of the demo's pairs are media pairs"
    assert step, "make demo's steps no longer say how many media pairs load_demo makes"
    table = README.read_text(encoding="utf-8")
    logins = re.findall(r"^\| (\w+) \| `(\w+)` \| `([^`]+)` \|$", table, re.MULTILINE)
    return {
        "pairs": int(holds.group(1)),
        "task_count": NUMBER_WORDS[holds.group(2)],
        "tasks": re.findall(r"\(`(\w+)`: ", shows),
        "drawn": int(drawn.group(1)),
        "drawn_tasks": NUMBER_WORDS[drawn.group(2)],
        "made": {int(made.group(1)), int(step.group(1))},
        "users": {username: (role, password) for role, username, password in logins},
    }


@pytest.mark.django_db(transaction=True)  # the filter run starts on commit
def test_the_readme_describes_the_demo_load_demo_makes(tmp_path):
    said = _readme_demo()
    # As `make demo` runs it: the default number of pairs.
    call_command("load_demo", "--out", str(tmp_path / "demo"), stdout=StringIO())
    pairs = Pair.objects.filter(project__slug="demo")
    by_task = dict(pairs.values_list("task").annotate(n=Count("id")).order_by())
    assert said["pairs"] == pairs.count()
    assert said["task_count"] == len(by_task)
    assert sorted(said["tasks"]) == sorted(by_task)
    made = sum(n for task, n in by_task.items() if task in MEDIA_TASKS)
    assert said["made"] == {made}
    assert said["drawn"] == pairs.count() - made
    assert said["drawn_tasks"] == len(set(by_task) - set(MEDIA_TASKS))
    members = Membership.objects.filter(project__slug="demo").select_related("user")
    assert {m.user.username: m.role for m in members} == {
        username: role for username, (role, _) in said["users"].items()
    }
    for member in members:
        assert member.user.check_password(said["users"][member.user.username][1])
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert f"creates {_word(len(said['users']))} users" in readme


def _word(number: int) -> str:
    return {n: word for word, n in NUMBER_WORDS.items()}[number]
