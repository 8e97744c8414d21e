"""Importing pairs (docs/import-format.md): MMRB2's files as released, deduplication,
idempotent re-import, and every kind of bad input refused with its line and field, leaving
nothing imported. The command line, the upload page and the API on top of it."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from kombu.exceptions import OperationalError

from annotation.imports.errors import ImportFailed
from annotation.imports.importer import pairs_import
from annotation.imports.services import import_job_submit
from annotation.models import (
    ImportJob,
    Media,
    Pair,
    PriorAnnotation,
    ProjectMedia,
    Prompt,
    Response,
    Role,
)
from tests.annotation.imports.conftest import (
    assert_nothing_imported,
    image_bytes,
    image_pair,
    import_pairs_process,
    jsonl_bytes,
    stored_files,
    text_pair,
    upload,
    write_jsonl,
)
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

ROOT = Path(__file__).resolve().parents[3]
MMRB2 = ROOT / "fixtures" / "mmrb2_sample"

pytestmark = pytest.mark.django_db


@pytest.fixture
def likert_project(db):
    return ProjectFactory(slug="mmrb2", name="MMRB2", scale="likert6", overlap=3)


def refused(project, source, **kwargs) -> ImportFailed:
    with pytest.raises(ImportFailed) as info:
        pairs_import(project=project, source=source, **kwargs)
    return info.value


# MMRB2 ---------------------------------------------------------------------------------


def test_mmrb2_released_files_import_unchanged(likert_project, settings):
    totals = {}
    for name in ("t2i", "edit", "interleaved", "reasoning"):
        summary = pairs_import(
            project=likert_project, source=MMRB2 / f"{name}.json", media_root=MMRB2
        )
        totals[name] = summary.created_pairs
    assert totals == {"t2i": 2, "edit": 2, "interleaved": 1, "reasoning": 2}

    released = json.loads((MMRB2 / "edit.json").read_text())["pairs"][0]
    pair = Pair.objects.select_related("prompt", "response_a", "response_b").get(
        project=likert_project, external_id=released["id"]
    )
    assert pair.response_a.model_name == "gpt-image-1"
    assert pair.response_b.model_name == "flux-kontext"
    assert pair.prior_label == "A"
    assert pair.target_votes == likert_project.overlap
    assert pair.prompt.source == "dreambench"
    assert pair.prompt.metadata == {"id": 100, "category": "object"}
    assert pair.metadata["prompt_source"] == "dreambench"
    # The edit prompt: the input image, then the instruction, in the released order.
    kinds = [part["type"] for part in pair.prompt.content]
    assert kinds == ["image", "text"]
    assert pair.prompt.text == "Make the square red."
    priors = list(pair.prior_annotations.values_list("position", "value", "label"))
    assert priors == [(0, 6, "A"), (1, 6, "A"), (2, 4, "A")]

    # Every image is kept byte for byte.
    input_image = MMRB2 / released["prompt_content"][0][1]
    media = Media.objects.get(pk=pair.prompt.media_hashes[0])
    stored = Path(settings.MEDIA_ROOT) / media.relative_path
    assert stored.read_bytes() == input_image.read_bytes()
    assert (media.format, media.width, media.height) == ("JPEG", 64, 48)
    assert ProjectMedia.objects.filter(project=likert_project, media=media).exists()

    interleaved = Pair.objects.get(project=likert_project, task="", external_id__startswith="isg")
    assert [p["type"] for p in interleaved.response_a.content] == ["text", "image", "text"]


def test_mmrb2_reasoning_ratings_are_kept_per_response(likert_project):
    """reasoning.json rates each response by letter, in an object, one list possibly empty."""
    summary = pairs_import(
        project=likert_project, source=MMRB2 / "reasoning.json", media_root=MMRB2
    )
    assert (summary.created_pairs, summary.prior_ratings, summary.prior_annotations) == (2, 8, 0)
    first, second = Pair.objects.filter(project=likert_project).order_by("external_id")
    ratings = list(first.prior_annotations.values_list("position", "value", "response", "rating"))
    assert ratings == [
        (0, None, "A", "B"), (1, None, "A", "B"), (2, None, "A", "B"),
        (3, None, "B", "C"), (4, None, "B", "C"), (5, None, "B", "C"),
    ]  # fmt: skip
    assert list(second.prior_annotations.values_list("response", "rating")) == [
        ("A", "A"),
        ("A", "B"),
    ]
    # ``chosen`` is the pair's reference label; ratings are not votes, so nothing is decided.
    assert (first.prior_label, first.status, second.prior_label) == ("A", "imported", "A")
    assert summary.decided_pairs == 0


def test_ratings_in_the_wrong_shape_name_their_field(likert_project, tmp_path):
    pairs = [
        text_pair("p1", human_annotations={"response_a_ratings": "B"}),
        text_pair("p2", human_annotations={"response_a_ratings": [3], "notes": []}),
        text_pair("p3", human_annotations="B"),
    ]
    failure = refused(likert_project, write_jsonl(tmp_path / "p.jsonl", pairs))
    assert [str(issue) for issue in failure.issues] == [
        "line 1, field human_annotations.response_a_ratings: must be a list of ratings, not a "
        "string",
        "line 2, field human_annotations.notes: unknown field (use response_a_ratings and "
        "response_b_ratings)",
        "line 2, field human_annotations.response_a_ratings[0]: 3 is not a rating (a letter)",
        "line 3, field human_annotations: must be a list of votes or an object of ratings, not "
        "a string",
    ]


def test_prior_votes_that_reach_the_target_decide_the_pair_at_import(project, tmp_path):
    """Overlap 3, majority of 2: complete priors are decided in the import itself, as a
    vote completing the pair would decide it; incomplete ones wait for the annotators."""
    pairs = [
        text_pair("agreed", human_annotations=["A", "A", "B"]),
        text_pair("split", human_annotations=["A", "tie", "B"]),
        text_pair("short", human_annotations=["B", "B"]),
        text_pair("none"),
    ]
    summary = pairs_import(project=project, source=write_jsonl(tmp_path / "p.jsonl", pairs))
    assert (summary.decided_consensus, summary.decided_disputed) == (1, 1)
    assert "Decided by priors:  2 (1 consensus, 1 disputed)" in summary.describe()
    state = {
        pair.external_id: (pair.status, pair.consensus_label, pair.dispute_reason)
        for pair in Pair.objects.filter(project=project)
    }
    assert state == {
        "agreed": ("consensus", "A", ""),
        "split": ("disputed", "", "no_majority"),
        "short": ("imported", "", ""),
        "none": ("imported", "", ""),
    }
    assert Pair.objects.get(project=project, external_id="agreed").decided_at is not None


def test_mmrb2_voted_files_give_consensus_pairs_with_nothing_else_run(likert_project):
    decided = 0
    for name in ("t2i", "edit", "interleaved"):
        summary = pairs_import(
            project=likert_project, source=MMRB2 / f"{name}.json", media_root=MMRB2
        )
        decided += summary.decided_pairs
    pairs = Pair.objects.filter(project=likert_project)
    assert decided == pairs.count() == 5
    assert set(pairs.values_list("status", flat=True)) == {"consensus"}
    assert all(pair.consensus_label == pair.prior_label for pair in pairs)


def test_mmrb2_identical_images_are_stored_once(likert_project):
    pairs_import(project=likert_project, source=MMRB2 / "edit.json", media_root=MMRB2)
    # Two pairs share the input image, and their responses repeat the same two drawings.
    assert Media.objects.count() == 3
    assert ProjectMedia.objects.filter(project=likert_project).count() == 3
    assert Prompt.objects.filter(project=likert_project).count() == 2


# Deduplication and re-import -------------------------------------------------------------


def test_identical_prompts_responses_and_media_are_stored_once(project, tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(image_bytes((255, 0, 0)))
    (tmp_path / "img" / "copy-of-a.png").write_bytes(image_bytes((255, 0, 0)))
    (tmp_path / "img" / "b.png").write_bytes(image_bytes((0, 0, 255)))
    shared = {
        "prompt_content": "Draw a flag",
        "response_b": {"model_name": "m", "response_content": "no"},
    }
    pairs = [
        {**image_pair("p1", "img/a.png", "img/b.png"), **shared},
        {**image_pair("p2", "img/copy-of-a.png", "img/b.png"), **shared},
    ]
    summary = pairs_import(
        project=project, source=write_jsonl(tmp_path / "p.jsonl", pairs), media_root=tmp_path
    )
    assert summary.created_pairs == 2
    assert Prompt.objects.filter(project=project).count() == 1
    # response_a of p1 and p2 show the same bytes under two names: one response, one media.
    assert Response.objects.filter(project=project).count() == 2
    assert summary.media_created == 1
    assert Media.objects.count() == 1
    assert summary.prompts_created == 1
    assert summary.responses_created == 2


@pytest.mark.parametrize("remembered_ids", [1_000_000, 1], ids=["remembered", "looked-up"])
def test_content_shared_across_batches_is_stored_once(
    project, tmp_path, monkeypatch, remembered_ids
):
    from annotation.imports import importer

    monkeypatch.setattr(importer, "WRITTEN_IDS_LIMIT", remembered_ids)
    same = {"prompt_content": "One prompt for all", "response_b": {"response_content": "same"}}
    pairs = [{**text_pair(f"p{i}"), **same} for i in range(5)]
    summary = pairs_import(
        project=project, source=write_jsonl(tmp_path / "p.jsonl", pairs), batch_size=2
    )
    assert (summary.created_pairs, summary.prompts_created, summary.responses_created) == (5, 1, 6)
    assert Prompt.objects.filter(project=project).count() == 1
    assert Response.objects.filter(project=project).count() == 6


def test_reimporting_the_same_file_adds_nothing_and_says_so(project, tmp_path):
    (tmp_path / "a.png").write_bytes(image_bytes())
    (tmp_path / "b.png").write_bytes(image_bytes((0, 90, 0)))
    pairs = [image_pair("p1", "a.png", "b.png")] + [text_pair(f"t{i}") for i in range(5)]
    path = write_jsonl(tmp_path / "pairs.jsonl", pairs)
    first = pairs_import(project=project, source=path, media_root=tmp_path, batch_size=4)
    counts = [
        Pair.objects.count(),
        Prompt.objects.count(),
        Response.objects.count(),
        Media.objects.count(),
        ProjectMedia.objects.count(),
    ]
    second = pairs_import(project=project, source=path, media_root=tmp_path, batch_size=4)
    assert (first.created_pairs, first.existing_pairs) == (6, 0)
    assert (second.created_pairs, second.existing_pairs) == (0, 6)
    assert (second.prompts_created, second.responses_created, second.media_created) == (0, 0, 0)
    assert counts == [
        Pair.objects.count(),
        Prompt.objects.count(),
        Response.objects.count(),
        Media.objects.count(),
        ProjectMedia.objects.count(),
    ]


def test_a_pair_id_reused_with_different_content_is_refused(project, tmp_path):
    pairs_import(project=project, source=write_jsonl(tmp_path / "a.jsonl", [text_pair("p1")]))
    changed = text_pair("p1", prompt="Something else")
    failure = refused(project, write_jsonl(tmp_path / "b.jsonl", [text_pair("new-one"), changed]))
    assert [str(issue) for issue in failure.issues] == [
        "line 2, field id: pair id 'p1' is already used in this project (or earlier in this "
        "file) with a different prompt; give this pair a new id"
    ]
    assert not Pair.objects.filter(external_id="new-one").exists()
    assert Pair.objects.get(external_id="p1").prompt.text == "Which is better? (p1)"


def test_a_pair_id_repeated_in_one_file_with_different_content_is_refused(project, tmp_path):
    pairs = [text_pair("p1"), text_pair("p2"), text_pair("p1", criterion="only the style")]
    failure = refused(project, write_jsonl(tmp_path / "a.jsonl", pairs))
    assert (
        "line 3, field id: pair id 'p1' is already used on line 1 with a different criterion"
        in str(failure)
    )
    assert_nothing_imported(project)


def test_large_import_is_all_or_nothing_across_batches(project, tmp_path):
    (tmp_path / "a.png").write_bytes(image_bytes())
    (tmp_path / "b.png").write_bytes(image_bytes((0, 0, 0)))
    pairs = [image_pair("img", "a.png", "b.png")] + [text_pair(f"t{i}") for i in range(60)]
    pairs.append({"id": "last", "prompt": "no responses"})
    failure = refused(
        project, write_jsonl(tmp_path / "p.jsonl", pairs), media_root=tmp_path, batch_size=7
    )
    assert [issue.line for issue in failure.issues] == [62, 62]
    assert_nothing_imported(project)


# Bad input: one test each, nothing imported ------------------------------------------------


def test_malformed_json_line_is_named(project, tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [text_pair("ok"), '{"id": "x", "prompt": "a",'])
    failure = refused(project, path)
    assert str(failure.issues[0]).startswith("line 2: not valid JSON:")
    assert_nothing_imported(project)


def test_malformed_json_document_names_the_line(project, tmp_path):
    document = json.dumps({"pairs": [text_pair("a"), text_pair("b")]}, indent=2)
    broken = document.replace('"B for b"', '"B for b",', 1)  # a trailing comma
    path = tmp_path / "pairs.json"
    path.write_text(broken)
    failure = refused(project, path)
    line = broken.splitlines().index('            "B for b",') + 2  # the "]" after it
    assert failure.issues[0].line == line
    assert "not valid JSON" in failure.issues[0].message
    assert_nothing_imported(project)


def test_missing_field_names_line_and_field(project, tmp_path):
    pair = text_pair("p2")
    del pair["response_b"]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", [text_pair("p1"), pair]))
    assert [str(issue) for issue in failure.issues] == [
        "line 2, field response_b: missing (each pair needs response_a and response_b)"
    ]
    assert_nothing_imported(project)


def test_missing_response_content_and_bad_part_name_their_fields(project, tmp_path):
    pair = text_pair("p1")
    del pair["response_a"]["response_content"]
    pair["prompt_content"] = [["text", "x"], ["hologram", "clip.hg"]]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", [pair]))
    fields = {issue.field for issue in failure.issues}
    assert fields == {"response_a.response_content", "prompt_content[1]"}
    assert_nothing_imported(project)


def test_unknown_media_path_is_refused(project, tmp_path):
    (tmp_path / "a.png").write_bytes(image_bytes())
    pairs = [image_pair("p1", "a.png", "missing/b.png")]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", pairs), media_root=tmp_path)
    assert [str(issue) for issue in failure.issues] == [
        "line 1, field response_b.response_content[0]: no file 'missing/b.png' in the media folder"
    ]
    assert_nothing_imported(project)


def test_corrupt_image_is_refused(project, tmp_path):
    (tmp_path / "a.png").write_bytes(image_bytes())
    (tmp_path / "broken.png").write_bytes(image_bytes((1, 2, 3), size=(64, 64))[:80])
    pairs = [image_pair("p1", "a.png", "broken.png")]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", pairs), media_root=tmp_path)
    issue = failure.issues[0]
    assert (issue.line, issue.field) == (1, "response_b.response_content[0]")
    assert issue.message.startswith("image 'broken.png' refused: corrupt image")
    assert_nothing_imported(project)


def test_decompression_bomb_is_refused(project, tmp_path):
    from tests.annotation.imports.conftest import png_bomb

    (tmp_path / "a.png").write_bytes(image_bytes())
    (tmp_path / "bomb.png").write_bytes(png_bomb())
    pairs = [image_pair("p1", "a.png", "bomb.png")]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", pairs), media_root=tmp_path)
    assert failure.issues[0].line == 1
    assert "decompression bomb" in failure.issues[0].message
    assert_nothing_imported(project)


def test_html_page_named_jpg_is_refused(project, tmp_path):
    (tmp_path / "a.png").write_bytes(image_bytes())
    (tmp_path / "photo.jpg").write_text("<!doctype html><html><body>Not found</body></html>")
    pairs = [image_pair("p1", "photo.jpg", "a.png")]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", pairs), media_root=tmp_path)
    assert str(failure.issues[0]) == (
        "line 1, field response_a.response_content[0]: image 'photo.jpg' refused: not an image "
        "Arbiter accepts (JPEG, PNG, WebP or GIF): Pillow cannot read it"
    )
    assert_nothing_imported(project)


def test_image_format_outside_the_four_is_refused(project, tmp_path):
    (tmp_path / "a.bmp").write_bytes(image_bytes(fmt="BMP"))
    (tmp_path / "b.png").write_bytes(image_bytes())
    pairs = [image_pair("p1", "a.bmp", "b.png")]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", pairs), media_root=tmp_path)
    assert "not an image Arbiter accepts" in failure.issues[0].message
    assert_nothing_imported(project)


def test_image_url_refused_when_the_project_does_not_fetch(project, tmp_path):
    assert not project.allow_media_urls
    pairs = [image_pair("p1", "https://example.org/a.png", "https://example.org/b.png")]
    failure = refused(project, write_jsonl(tmp_path / "p.jsonl", pairs))
    assert failure.issues[0].field == "response_a.response_content[0]"
    assert "does not fetch media by URL" in failure.issues[0].message
    assert_nothing_imported(project)


def test_annotation_off_the_project_scale_is_refused(likert_project, tmp_path):
    pairs = [text_pair("p1", human_annotations=[6, 7, 1], chosen="A")]
    failure = refused(likert_project, write_jsonl(tmp_path / "p.jsonl", pairs))
    assert [str(issue) for issue in failure.issues] == [
        "line 1, field human_annotations[1]: 7 is not on this project's likert6 scale (1 to 6)"
    ]
    assert_nothing_imported(likert_project)


def test_ternary_project_takes_side_labels(project, tmp_path):
    pairs = [text_pair("p1", human_annotations=["A", "tie", 1], chosen="tie")]
    pairs_import(project=project, source=write_jsonl(tmp_path / "p.jsonl", pairs))
    pair = Pair.objects.get(external_id="p1")
    assert pair.prior_label == "tie"
    assert list(PriorAnnotation.objects.values_list("value", "label")) == [
        (3, "A"),
        (2, "tie"),
        (1, "B"),
    ]


def test_errors_are_capped_with_a_count_of_the_rest(project, tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", ["not json"] * 130)
    failure = refused(project, path)
    assert len(failure.issues) == 100
    assert failure.more == 30
    assert failure.lines()[-1] == "... and 30 more errors"
    assert_nothing_imported(project)


@pytest.mark.parametrize(
    "content", ["", "\n\n", '{"pairs": []}'], ids=["empty", "blank", "no-pairs"]
)
def test_a_file_without_pairs_is_refused(project, tmp_path, content):
    path = tmp_path / "p.json"
    path.write_text(content)
    assert [str(issue) for issue in refused(project, path).issues] == ["the file holds no pairs"]


def test_json_document_without_a_pairs_list_is_refused(project, tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"pairs": {"id": "x"}}')
    assert (
        str(refused(project, path).issues[0])
        == "line 1, field pairs: must be a list of pairs (column 11)"
    )


def test_json_document_without_pairs_is_refused(project, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"data": [text_pair("a")]}, indent=2))
    assert str(refused(project, path).issues[0]) == (
        'a JSON file must be {"pairs": [...]}: no "pairs" found'
    )


def test_file_named_json_holding_json_lines_is_read_as_json_lines(project, tmp_path):
    path = write_jsonl(tmp_path / "pairs.json", [text_pair("a"), text_pair("b")])
    assert pairs_import(project=project, source=path).created_pairs == 2


# Command line --------------------------------------------------------------------------


def test_import_pairs_command_prints_a_summary(project, tmp_path, capsys):
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "a.png").write_bytes(image_bytes())
    (tmp_path / "media" / "b.png").write_bytes(image_bytes((0, 0, 0)))
    path = write_jsonl(tmp_path / "p.jsonl", [image_pair("p1", "a.png", "b.png"), text_pair("t")])
    call_command("import_pairs", project.slug, str(path), "--media-root", str(tmp_path / "media"))
    call_command("import_pairs", project.slug, str(path), "--media-root", str(tmp_path / "media"))
    out = capsys.readouterr().out
    assert "Created pairs:      2" in out
    assert "Already present:    2" in out
    assert "Media:              2 new, 0 reused" in out


def test_the_four_mmrb2_files_import_with_the_media_root_and_nothing_else(likert_project, capsys):
    for name in ("t2i", "edit", "interleaved", "reasoning"):
        call_command(
            "import_pairs", likert_project.slug, str(MMRB2 / f"{name}.json"), "--media-root",
            str(MMRB2),
        )  # fmt: skip
    out = capsys.readouterr().out
    assert out.count("Decided by priors:  ") == 4
    assert "Decided by priors:  2 (2 consensus, 0 disputed)" in out  # t2i, edit
    assert "Prior ratings:      8" in out  # reasoning
    assert Pair.objects.filter(project=likert_project).count() == 7


def test_import_pairs_command_fails_with_line_numbers(project, tmp_path, capsys):
    path = write_jsonl(tmp_path / "p.jsonl", [text_pair("ok"), {"id": "bad"}])
    with pytest.raises(CommandError) as info:
        call_command("import_pairs", project.slug, str(path))
    assert info.value.returncode == 1
    err = capsys.readouterr().err
    assert "line 2, field prompt_content: missing" in err
    assert_nothing_imported(project)


@pytest.mark.django_db(transaction=True)
def test_import_pairs_exit_code_is_1_on_bad_input(tmp_path):
    project = ProjectFactory(slug="cli")
    path = write_jsonl(tmp_path / "p.jsonl", [text_pair("ok"), "{oops"])
    process = import_pairs_process("cli", path)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "line 2: not valid JSON" in stderr
    assert not Pair.objects.filter(project=project).exists()


# Upload page -----------------------------------------------------------------------------


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_curator_sees_the_import_page(client_for, carol, project):
    response = client_for(carol).get(reverse("imports", args=[project.slug]))
    assert response.status_code == 200
    assert b'enctype="multipart/form-data"' in response.content
    detail = client_for(carol).get(reverse("project-detail", args=[project.slug]))
    assert reverse("imports", args=[project.slug]).encode() in detail.content


def test_annotator_gets_403_and_outsider_404(client, alice, eve, project):
    url = reverse("imports", args=[project.slug])
    client.force_login(alice)
    assert client.get(url).status_code == 403
    assert client.post(url, {"file": upload("p.jsonl", b"")}).status_code == 403
    detail = client.get(reverse("project-detail", args=[project.slug]))
    assert url.encode() not in detail.content
    client.force_login(eve)
    assert client.get(url).status_code == 404
    assert client.post(url, {"file": upload("p.jsonl", b"")}).status_code == 404


def test_import_status_fragment_is_for_curators_of_the_project(client, alice, eve, carol, project):
    job = ImportJob.objects.create(project=project, filename="x.jsonl")
    url = reverse("import-status", args=[project.slug, job.pk])
    client.force_login(alice)
    assert client.get(url).status_code == 403
    client.force_login(eve)
    assert client.get(url).status_code == 404
    other = ProjectFactory(slug="elsewhere")
    MembershipFactory(project=other, user=carol, role=Role.CURATOR)
    foreign = ImportJob.objects.create(project=other, filename="y.jsonl")
    client.force_login(carol)
    assert client.get(reverse("import-status", args=[project.slug, foreign.pk])).status_code == 404


def test_curator_uploads_a_file_with_a_media_archive(
    client_for, carol, project, django_capture_on_commit_callbacks
):
    archive = zip_bytes({"imgs/a.png": image_bytes(), "imgs/b.png": image_bytes((9, 9, 9))})
    data = jsonl_bytes([image_pair("p1", "imgs/a.png", "imgs/b.png"), text_pair("t1")])
    client = client_for(carol)
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(
            reverse("imports", args=[project.slug]),
            {"file": upload("pairs.jsonl", data), "media_archive": upload("media.zip", archive)},
        )
    assert response.status_code == 302
    job = ImportJob.objects.get(project=project)
    assert response.url.endswith(f"?job={job.pk}")
    # The form never imports in the request: the job waits for its task.
    assert job.status == "pending"
    assert len(queued) == 1
    queued[0]()
    job.refresh_from_db()
    assert (job.status, job.created_pairs, job.created_media, job.created_by) == (
        "succeeded",
        2,
        2,
        carol,
    )
    page = client.get(response.url).content.decode()
    assert "Created <strong>2</strong> pairs" in page
    assert "pairs.jsonl" in page
    # The uploaded files do not outlive the job.
    assert not [p for p in stored_files() if ".uploads" in p.parts]


def test_refused_upload_shows_the_errors_and_imports_nothing(
    client_for, carol, project, django_capture_on_commit_callbacks
):
    data = jsonl_bytes([text_pair("p1"), {"id": "p2", "prompt": "x"}])
    client = client_for(carol)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("imports", args=[project.slug]), {"file": upload("p.jsonl", data)}
        )
    job = ImportJob.objects.get(project=project)
    assert job.status == "failed"
    page = client.get(response.url).content.decode()
    assert "Nothing was imported" in page
    assert "line 2, field <code>response_a</code>: missing" in page
    assert_nothing_imported(project)


def test_archive_escaping_its_folder_is_refused(
    client_for, carol, project, django_capture_on_commit_callbacks
):
    archive = zip_bytes({"../../evil.png": image_bytes()})
    data = jsonl_bytes([image_pair("p1", "evil.png", "evil.png")])
    with django_capture_on_commit_callbacks(execute=True):
        client_for(carol).post(
            reverse("imports", args=[project.slug]),
            {"file": upload("p.jsonl", data), "media_archive": upload("m.zip", archive)},
        )
    job = ImportJob.objects.get(project=project)
    assert job.status == "failed"
    assert job.errors == [
        {"line": None, "field": "media archive", "message": "'../../evil.png' contains '..'"}
    ]
    assert_nothing_imported(project)


def test_upload_form_requires_a_pairs_file(client_for, carol, project):
    response = client_for(carol).post(
        reverse("imports", args=[project.slug]), {"file": upload("notes.txt", b"hello")}
    )
    assert response.status_code == 400
    assert b"Upload a .jsonl or .json file." in response.content
    assert not ImportJob.objects.exists()


def test_upload_larger_than_the_limit_is_refused(client_for, carol, project, settings):
    settings.ARBITER_MAX_REQUEST_BYTES = settings.ARBITER_MAX_UPLOAD_BYTES = 100
    data = jsonl_bytes([text_pair(f"p{i}") for i in range(5)])
    response = client_for(carol).post(
        reverse("imports", args=[project.slug]), {"file": upload("p.jsonl", data)}
    )
    assert response.status_code == 413
    assert not ImportJob.objects.exists()


def test_upload_page_enforces_csrf(carol, project, django_capture_on_commit_callbacks):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    url = reverse("imports", args=[project.slug])
    data = jsonl_bytes([text_pair("p1")])
    assert client.post(url, {"file": upload("p.jsonl", data)}).status_code == 403
    assert not ImportJob.objects.exists()
    client.get(url)
    token = client.cookies["csrftoken"].value
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"file": upload("p.jsonl", data), "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert Pair.objects.filter(project=project).count() == 1


@pytest.fixture
def eager_tasks():
    """Tasks run in this process (the real worker has its own test below)."""
    from config.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = eager


def test_large_upload_runs_in_a_task_with_a_progress_bar(
    client_for, carol, project, settings, django_capture_on_commit_callbacks, eager_tasks
):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    client = client_for(carol)
    data = jsonl_bytes([text_pair(f"p{i}") for i in range(3)])
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(
            reverse("imports", args=[project.slug]), {"file": upload("big.jsonl", data)}
        )
    job = ImportJob.objects.get(project=project)
    assert job.status == "pending"
    assert len(callbacks) == 1
    status_url = reverse("import-status", args=[project.slug, job.pk])
    running = client.get(status_url, HTTP_HX_REQUEST="true").content.decode()
    assert "<progress" in running
    assert 'hx-trigger="every 1s"' in running
    assert "<html" not in running  # the fragment only
    callbacks[0]()  # the commit enqueues the task
    job.refresh_from_db()
    assert (job.status, job.created_pairs, job.percent) == ("succeeded", 3, 100)
    done = client.get(status_url).content.decode()
    assert "hx-trigger" not in done
    assert "Created <strong>3</strong> pairs" in done
    assert client.get(response.url).status_code == 200


def test_upload_that_cannot_be_queued_fails_instead_of_waiting(
    carol, project, settings, monkeypatch, django_capture_on_commit_callbacks
):
    from annotation import tasks

    def broker_down(*args, **kwargs):
        raise OperationalError("broker unreachable")

    monkeypatch.setattr(tasks.import_run, "apply_async", broker_down)
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    data = jsonl_bytes([text_pair("p1")])
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_submit(project=project, user=carol, upload=upload("big.jsonl", data))
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.errors[0]["message"] == (
        "The task queue is unreachable. The import could not be queued; try again."
    )
    assert not [p for p in stored_files() if ".uploads" in p.parts]


# API -----------------------------------------------------------------------------------


def test_api_curator_imports_a_file(api_for, carol, project):
    data = jsonl_bytes([text_pair("p1"), text_pair("p2", human_annotations=["A", "A", "A"])])
    response = api_for(carol).post(
        f"/api/v1/projects/{project.slug}/imports/",
        {"file": upload("p.jsonl", data)},
        format="multipart",
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["created_pairs"], body["percent"]) == ("succeeded", 2, 100)
    assert body["decided_pairs"] == 1  # p2's three prior votes reach the overlap
    detail = api_for(carol).get(f"/api/v1/projects/{project.slug}/imports/{body['id']}/")
    assert detail.status_code == 200
    assert detail.json()["created_pairs"] == 2
    listing = api_for(carol).get(f"/api/v1/projects/{project.slug}/imports/").json()
    assert [job["id"] for job in listing] == [body["id"]]


def test_api_refused_import_is_400_with_line_numbers(api_for, carol, project):
    data = jsonl_bytes([text_pair("p1"), "{not json"])
    response = api_for(carol).post(
        f"/api/v1/projects/{project.slug}/imports/",
        {"file": upload("p.jsonl", data)},
        format="multipart",
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors[0]["line"] == 2
    assert errors[0]["message"].startswith("not valid JSON")
    assert_nothing_imported(project)


def test_api_imports_are_for_curators_only(api_for, alice, dave, eve, carol, project):
    job = ImportJob.objects.create(project=project, filename="x.jsonl")
    data = {"file": upload("p.jsonl", jsonl_bytes([text_pair("p1")]))}
    base = f"/api/v1/projects/{project.slug}/imports/"
    for user, expected in ((alice, 403), (dave, 403), (eve, 404)):
        api = api_for(user)
        assert api.post(base, data, format="multipart").status_code == expected
        assert api.get(f"{base}{job.pk}/").status_code == expected
        assert api.get(base).status_code == expected
    assert not Pair.objects.exists()


def test_api_session_requests_need_csrf(carol, project):
    from rest_framework.test import APIClient

    api = APIClient(enforce_csrf_checks=True)
    api.force_login(carol)
    data = {"file": upload("p.jsonl", jsonl_bytes([text_pair("p1")]))}
    response = api.post(f"/api/v1/projects/{project.slug}/imports/", data, format="multipart")
    assert response.status_code == 403
    assert not ImportJob.objects.exists()


def test_api_schema_describes_the_import_endpoints(client):
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert "/api/v1/projects/{slug}/imports/" in schema["paths"]
    post = schema["paths"]["/api/v1/projects/{slug}/imports/"]["post"]
    assert "multipart/form-data" in post["requestBody"]["content"]
    assert {"201", "400"} <= set(post["responses"])
    assert "/api/v1/projects/{slug}/imports/{id}/" in schema["paths"]


# A real worker ---------------------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_real_celery_worker_runs_a_large_import(celery_worker_process, settings, tmp_path):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    project = ProjectFactory(slug="worker-import")
    curator = UserFactory(username="curator-w")
    MembershipFactory(project=project, user=curator, role=Role.CURATOR)
    celery_worker_process(queues="imports", concurrency=1)
    data = jsonl_bytes([text_pair(f"p{i}") for i in range(50)])
    job = import_job_submit(project=project, user=curator, upload=upload("big.jsonl", data))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.finished:
            break
        time.sleep(0.25)
    assert job.status == "succeeded", job.errors
    assert (job.created_pairs, job.bytes_done, job.bytes_total) == (50, len(data), len(data))
    assert Pair.objects.filter(project=project).count() == 50


def test_a_second_file_reuses_the_prompts_and_responses_the_first_wrote(project, tmp_path):
    """Ids found in the table (not remembered by this import) are matched as they are
    stored: the second import writes only its new response."""
    first = [text_pair("p1"), text_pair("p2")]
    pairs_import(project=project, source=write_jsonl(tmp_path / "a.jsonl", first))
    again = {
        **text_pair("p3"),
        "prompt_content": first[0]["prompt_content"],
        "response_a": {"model_name": "m-new", "response_content": "new answer"},
        "response_b": first[0]["response_b"],
    }
    summary = pairs_import(project=project, source=write_jsonl(tmp_path / "b.jsonl", [again]))
    assert (summary.created_pairs, summary.prompts_created, summary.responses_created) == (1, 0, 1)
    p1, p3 = (Pair.objects.get(project=project, external_id=e) for e in ("p1", "p3"))
    assert (p3.prompt_id, p3.response_b_id) == (p1.prompt_id, p1.response_b_id)


@pytest.mark.parametrize("remembered_ids", [1_000_000, 1], ids=["remembered", "looked-up"])
def test_a_pair_id_repeated_in_a_later_batch_is_found(
    project, tmp_path, monkeypatch, remembered_ids
):
    """Pairs written by earlier batches are known without asking the database (or, past the
    memory's limit, by asking it): the same pair again is counted, a changed one refused."""
    from annotation.imports import importer

    monkeypatch.setattr(importer, "WRITTEN_IDS_LIMIT", remembered_ids)
    pairs = [text_pair("p1"), text_pair("p2"), text_pair("p3"), text_pair("p1")]
    summary = pairs_import(
        project=project, source=write_jsonl(tmp_path / "a.jsonl", pairs), batch_size=2
    )
    assert (summary.created_pairs, summary.existing_pairs) == (3, 1)
    other = ProjectFactory()
    changed = [*pairs[:3], text_pair("p2", criterion="only the style")]
    with pytest.raises(ImportFailed) as info:
        pairs_import(project=other, source=write_jsonl(tmp_path / "b.jsonl", changed), batch_size=2)
    assert [str(issue) for issue in info.value.issues] == [
        "line 4, field id: pair id 'p2' is already used in this project (or earlier in this "
        "file) with a different criterion; give this pair a new id"
    ]
    assert not Pair.objects.filter(project=other).exists()
