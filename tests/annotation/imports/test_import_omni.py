"""Omni-RewardBench's task files import as they are: the task from the file name, the
criterion from ``criteria``, ``criteria_preference`` kept as the reference label
(``Pair.prior_label``), media paths relative to the media folder, and the pair's id
``<task>/<id>``, since the benchmark's ids repeat across its task files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from annotation.imports.errors import ImportFailed
from annotation.imports.importer import pairs_import
from annotation.imports.omni import omni_task
from annotation.models import Media, Pair
from annotation.releases.selectors import release_rows
from annotation.releases.services import release_build, release_create
from tests.annotation.imports.conftest import assert_nothing_imported
from tests.annotation.media.conftest import audio_write, glb_bytes, video_write
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


def _image(path: Path, colour: tuple[int, int, int]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 12), colour).save(path)
    return path.name


def _record(number: int, preference: str, **fields) -> dict:
    return {
        "id": f"omni-{number}",
        "prompt": f"Prompt {number}",
        "model1": "alpha-model",
        "model2": "beta-model",
        "criteria": f"Criterion {number}: faithful to the prompt",
        "criteria_preference": preference,
        **fields,
    }


def _media(root: Path) -> None:
    video_write(root / "v1.mp4")
    video_write(root / "v2.mp4", frames=3)
    audio_write(root / "a1.wav")
    audio_write(root / "a2.wav", seconds=0.3)
    (root / "m1.glb").write_bytes(glb_bytes())
    (root / "m2.glb").write_bytes(glb_bytes(generator="x"))
    _image(root / "i1.png", (200, 0, 0))
    _image(root / "i2.png", (0, 200, 0))
    _image(root / "views" / "r1.png", (0, 0, 200))
    _image(root / "views" / "r2.png", (9, 9, 9))


# file stem, task, the fields of each task's records beside the common ones, the part types
# of (prompt, response 1)
TASKS = [
    ("text_to_text", "t2t", {"response1": "Text one", "response2": "Text two"},
     (["text"], ["text"])),
    ("text_image_to_text", "ti2t",
     {"image_path": "i1.png", "response1": "It is red", "response2": "It is green"},
     (["image", "text"], ["text"])),
    ("text_video_to_text", "tv2t",
     {"video": "v1.mp4", "response1": "A bar moves", "response2": "Nothing moves"},
     (["video", "text"], ["text"])),
    ("text_audio_to_text", "ta2t",
     {"audio_path": "a1.wav", "response1": "A tone", "response2": "Speech"},
     (["audio", "text"], ["text"])),
    ("text_to_image", "t2i", {"response1_path": "i1.png", "response2_path": "i2.png"},
     (["text"], ["image"])),
    ("text_to_video", "t2v", {"response1": "v1.mp4", "response2": "v2.mp4"},
     (["text"], ["video"])),
    ("text_to_audio", "t2a", {"response1_path": "a1.wav", "response2_path": "a2.wav"},
     (["text"], ["audio"])),
    ("text_to_3D", "t23d", {"response1_path": "m1.glb", "response2_path": "m2.glb"},
     (["text"], ["model3d"])),
    ("text_image_to_image", "ti2i",
     {"image_path": "i1.png", "response1_path": "i2.png", "response2_path": "views/r1.png"},
     (["image", "text"], ["image"])),
]  # fmt: skip


@pytest.mark.parametrize(("stem", "task", "fields", "types"), TASKS, ids=[t[1] for t in TASKS])
def test_each_task_file_imports_as_it_is(project, tmp_path, stem, task, fields, types):
    _media(tmp_path)
    records = [
        _record(1, "response1", **fields),
        _record(2, "response2", **fields, id_suffix="x"),
        _record(3, "tie", **fields),
    ]
    records[1]["prompt"] = "Prompt two"
    source = tmp_path / f"{stem}_preferences.json"
    source.write_text(json.dumps(records, indent=2))
    summary = pairs_import(project=project, source=source, media_root=tmp_path)
    assert summary.created_pairs == 3
    pairs = {pair.external_id: pair for pair in Pair.objects.filter(project=project)}
    # The benchmark's ids are unique within a task only: the task is put before them.
    assert {external: pair.prior_label for external, pair in pairs.items()} == {
        f"{task}/omni-1": "A",
        f"{task}/omni-2": "B",
        f"{task}/omni-3": "tie",
    }
    first = pairs[f"{task}/omni-1"]
    assert first.metadata["omni_id"] == "omni-1"
    assert first.task == task
    assert first.criterion == "Criterion 1: faithful to the prompt"
    assert (first.response_a.model_name, first.response_b.model_name) == (
        "alpha-model",
        "beta-model",
    )
    prompt_types, response_types = types
    assert [part["type"] for part in first.prompt.content] == prompt_types
    assert first.prompt.content[-1] == {"type": "text", "text": "Prompt 1"}
    assert [part["type"] for part in first.response_a.content] == response_types
    # Fields the import format does not know are kept with the pair, as for any file.
    assert pairs[f"{task}/omni-2"].metadata.get("id_suffix") == "x"


def test_rendered_views_of_a_3d_response_are_images(project, tmp_path):
    _media(tmp_path)
    record = _record(
        1, "response2", response1_path=["views/r1.png", "views/r2.png"], response2_path="m1.glb"
    )
    source = tmp_path / "text_to_3D_preferences.json"
    source.write_text(json.dumps([record]))
    pairs_import(project=project, source=source, media_root=tmp_path)
    pair = Pair.objects.get(project=project)
    assert [part["type"] for part in pair.response_a.content] == ["image", "image"]
    assert [part["type"] for part in pair.response_b.content] == ["model3d"]
    assert Media.objects.filter(kind="model3d").count() == 1


def test_a_missing_media_file_is_a_line_error_naming_it(project, tmp_path):
    _media(tmp_path)
    records = [
        _record(1, "tie", response1="v1.mp4", response2="v2.mp4"),
        _record(2, "response1", response1="v1.mp4", response2="gone.mp4"),
    ]
    source = tmp_path / "text_to_video_preferences.json"
    source.write_text(json.dumps(records, indent=2))
    with pytest.raises(ImportFailed) as refused:
        pairs_import(project=project, source=source, media_root=tmp_path)
    [issue] = refused.value.issues
    assert issue.line > 1
    assert "gone.mp4" in issue.message
    assert_nothing_imported(project)


def test_an_unknown_preference_is_refused(project, tmp_path):
    source = tmp_path / "text_to_text_preferences.json"
    source.write_text(json.dumps([_record(1, "both", response1="a", response2="b")]))
    with pytest.raises(ImportFailed, match="'both' is not one of A, B or tie"):
        pairs_import(project=project, source=source)


def test_task_names_follow_the_paper():
    assert omni_task("text_to_video_preferences.json") == "t2v"
    assert omni_task("path/to/text_audio_to_text_preferences.json") == "ta2t"
    assert omni_task("text_to_3D_preferences.json") == "t23d"
    assert omni_task("pairs.jsonl") is None


def test_media_exported_by_datasets_are_read_by_their_path(project, tmp_path):
    _media(tmp_path)
    record = _record(1, "response1", image={"bytes": None, "path": "i1.png"})
    record.update(response1="Red", response2="Green")
    source = tmp_path / "text_image_to_text_preferences.json"
    source.write_text(json.dumps([record]))
    pairs_import(project=project, source=source, media_root=tmp_path)
    pair = Pair.objects.get(project=project)
    assert [part["type"] for part in pair.prompt.content] == ["image", "text"]


# ---- Ids repeat across the benchmark's task files (unique per task only) ----


def _shared_id_files(root: Path) -> list[Path]:
    """A text-to-text and a text-to-audio file whose records have the same ids, omni-1 and
    omni-2, as the benchmark's nine files do."""
    _media(root)
    records = {
        "text_to_text": [
            _record(1, "response1", response1="Text one", response2="Text two"),
            _record(2, "response2", response1="Text three", response2="Text four"),
        ],
        "text_to_audio": [
            _record(1, "response2", response1_path="a1.wav", response2_path="a2.wav"),
            _record(2, "tie", response1_path="a2.wav", response2_path="a1.wav"),
        ],
    }
    paths = []
    for stem, rows in records.items():
        path = root / f"{stem}_preferences.json"
        path.write_text(json.dumps(rows, indent=1))
        paths.append(path)
    return paths


@pytest.fixture
def shared_ids(project, tmp_path) -> list[Path]:
    paths = _shared_id_files(tmp_path)
    for path in paths:
        pairs_import(project=project, source=path, media_root=tmp_path)
    return paths


def test_two_task_files_sharing_ids_import_into_one_project(project, shared_ids, tmp_path):
    pairs = {pair.external_id: pair for pair in Pair.objects.filter(project=project)}
    assert {external: (pair.task, pair.prior_label) for external, pair in pairs.items()} == {
        "t2t/omni-1": ("t2t", "A"),
        "t2t/omni-2": ("t2t", "B"),
        "t2a/omni-1": ("t2a", "B"),
        "t2a/omni-2": ("t2a", "tie"),
    }
    assert {pair.metadata["omni_id"] for pair in pairs.values()} == {"omni-1", "omni-2"}
    assert [part["type"] for part in pairs["t2a/omni-1"].response_a.content] == ["audio"]
    # Importing the same files again adds nothing.
    for path in shared_ids:
        summary = pairs_import(project=project, source=path, media_root=tmp_path)
        assert (summary.created_pairs, summary.existing_pairs) == (0, 2)
    assert Pair.objects.filter(project=project).count() == 4


def test_each_pair_is_reached_by_its_url(project, shared_ids, carol, eve, client_for):
    for task in ("t2t", "t2a"):
        url = reverse("pair-by-external-id", args=[project.slug, f"{task}/omni-1"])
        assert url.endswith(f"/pairs/id/{task}/omni-1")
        response = client_for(carol).get(url)
        pair = Pair.objects.get(project=project, external_id=f"{task}/omni-1")
        assert response.status_code == 302
        assert response["Location"] == reverse("pair", args=[project.slug, pair.pk])
    # The benchmark's bare id names no pair: it is ambiguous.
    bare = reverse("pair-by-external-id", args=[project.slug, "omni-1"])
    assert client_for(carol).get(bare).status_code == 404
    # An outsider learns nothing, not even that the pair exists.
    outsider = client_for(eve).get(
        reverse("pair-by-external-id", args=[project.slug, "t2a/omni-1"])
    )
    assert outsider.status_code == 404


def test_a_release_keeps_both_and_writes_the_benchmarks_ids(project, shared_ids, dave):
    release = release_create(
        project=project,
        version="1.0.0",
        selection={"reference_labels": True, "include_ties": True},
        user=dave,
    )
    release = release_build(release=release)
    assert release.status == release.Status.BUILT, release.error
    rows = {row["id"]: row["label"] for row in release_rows(release)}
    assert rows == {"t2t/omni-1": "A", "t2t/omni-2": "B", "t2a/omni-1": "B", "t2a/omni-2": "tie"}
    folder = release.folder / "omni" / "test"
    for stem in ("text_to_text", "text_to_audio"):
        records = json.loads((folder / f"{stem}_preferences.json").read_text())
        assert [record["id"] for record in records] == ["omni-1", "omni-2"]
    # The release's task files import into another project with the same pairs.
    again = ProjectFactory(slug="again", name="Again", scale="ternary")
    for stem in ("text_to_text", "text_to_audio"):
        pairs_import(
            project=again,
            source=folder / f"{stem}_preferences.json",
            media_root=release.folder,
        )
    assert set(Pair.objects.filter(project=again).values_list("external_id", "prior_label")) == set(
        Pair.objects.filter(project=project).values_list("external_id", "prior_label")
    )


def test_the_api_reaches_each_pair_and_adjudicates_it(project, shared_ids, carol, eve, api_for):
    for task in ("t2t", "t2a"):
        answer = api_for(carol).get(f"/api/v1/projects/demo/pairs/{task}/omni-1/")
        assert answer.status_code == 200, answer.content
        assert (answer.json()["id"], answer.json()["task"]) == (f"{task}/omni-1", task)
    assert api_for(eve).get("/api/v1/projects/demo/pairs/t2a/omni-1/").status_code == 404
    # The adjudication route takes the id with its "/": the pair is not disputed, 409.
    Pair.objects.filter(project=project, external_id="t2t/omni-1").update(status="disputed")
    decided = api_for(carol).post(
        "/api/v1/projects/demo/pairs/t2a/omni-1/adjudicate/",
        {"label": "A", "note": "clearer"},
        format="json",
    )
    assert decided.status_code == 409, decided.content
    decided = api_for(carol).post(
        "/api/v1/projects/demo/pairs/t2t/omni-1/adjudicate/",
        {"label": "B", "note": "clearer"},
        format="json",
    )
    assert decided.status_code == 201, decided.content
    assert Pair.objects.get(project=project, external_id="t2t/omni-1").consensus_label == "B"
    assert Pair.objects.get(project=project, external_id="t2a/omni-1").consensus_label == ""


@pytest.mark.parametrize("background", [False, True], ids=["in-the-request", "in-a-job"])
def test_an_uploaded_task_file_is_read_by_its_own_name(
    project, carol, api_for, settings, background, django_capture_on_commit_callbacks
):
    # The upload is stored under a key of the server's choosing ("<folder>/pairs-<name>"):
    # the task still comes from the name the curator's file had.
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 1 if background else 10**6
    records = [_record(1, "response2", response1="Text one", response2="Text two")]
    data = json.dumps(records).encode()
    with django_capture_on_commit_callbacks(execute=True):
        answer = api_for(carol).post(
            f"/api/v1/projects/{project.slug}/imports/",
            {"file": SimpleUploadedFile("text_to_text_preferences.json", data)},
            format="multipart",
        )
    assert answer.status_code == 201, answer.content
    pair = Pair.objects.get(project=project)
    assert (pair.external_id, pair.task, pair.prior_label) == ("t2t/omni-1", "t2t", "B")
