"""Releases (docs/releases.md): what a build writes, read back with pyarrow, pandas and
`datasets`; determinism; the MMRB2 file scored; splits by prompt."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from PIL import Image

from annotation.imports.importer import pairs_import
from annotation.models import Media, Pair, Release
from annotation.releases.archive import archive_write, verify_release_path
from annotation.releases.selection import check_selection
from annotation.releases.selectors import release_rows
from annotation.releases.services import release_build, release_create
from tests.annotation.releases.conftest import (
    ADJUDICATED_ID,
    CONSENSUS_VOTES,
    EASY_ID,
    IMAGE_ID,
    LEFT_OUT,
    SECRET_EXIF,
    TIE_ID,
    archive_file,
    built_release,
    releasable_project,
)
from tests.annotation.releases.mmrb2_scorer import mmrb2_accuracy
from tests.factories import PairFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def filled(project, alice, bob, carol):
    releasable_project(project, alice, bob, carol)
    return project


def _rows(release) -> dict[str, dict]:
    return {row["id"]: row for row in release_rows(release)}


def test_a_release_holds_the_decided_pairs_as_the_database_has_them(filled, dave):
    release = built_release(filled, dave)
    assert release.status == Release.Status.BUILT
    rows = _rows(release)
    assert set(rows) == {*CONSENSUS_VOTES, ADJUDICATED_ID, IMAGE_ID}
    for pair in Pair.objects.filter(external_id__in=rows).select_related(
        "response_a", "response_b"
    ):
        row = rows[pair.external_id]
        assert row["label"] == pair.consensus_label
        winner, loser = (
            (pair.response_b, pair.response_a)
            if pair.consensus_label == "B"
            else (pair.response_a, pair.response_b)
        )
        assert (row["chosen_model"], row["rejected_model"]) == (
            winner.model_name,
            loser.model_name,
        )
        assert row["task"] == pair.task
        assert row["criterion"] == pair.criterion
    assert rows["rel-00"]["votes"] == [3, 3, 1]
    assert rows["rel-00"]["agreement"] == pytest.approx(2 / 3)
    assert rows["rel-00"]["source"] == "consensus"
    assert rows[ADJUDICATED_ID]["source"] == "adjudicated"
    assert release.pair_count == len(rows)


def _files(folder) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_parquet_and_jsonl_hold_the_same_rows_and_pyarrow_and_pandas_read_them(filled, dave):
    release = built_release(filled, dave, splits="train=0.5,test=0.5")
    for split in release.statistics["splits"]:
        table = pq.read_table(release.folder / "data" / f"{split}.parquet")
        lines = (release.folder / "jsonl" / f"{split}.jsonl").read_text().splitlines()
        rows = table.to_pylist()
        # Parquet embeds each image (datasets.Image: its bytes and path); JSONL names its path.
        for row in rows:
            for column in ("images", "chosen_images", "rejected_images"):
                for image in row[column]:
                    assert image["bytes"] == (release.folder / image["path"]).read_bytes()
                row[column] = [image["path"] for image in row[column]]
        assert rows == [json.loads(line) for line in lines]
        frame = pd.read_parquet(release.folder / "data" / f"{split}.parquet")
        assert list(frame["id"]) == sorted(frame["id"])
        assert len(frame) == release.statistics["splits"][split]


def test_datasets_loads_the_folder_with_the_card_and_the_parquet_files(filled, dave, tmp_path):
    datasets = pytest.importorskip("datasets")
    release = built_release(filled, dave, splits="train=0.5,test=0.5")
    # A cache of this test's own: the shared one is keyed by path, size and time, and pytest
    # reuses its temporary paths, so an earlier run's rows could come back.
    cache = str(tmp_path / "datasets-cache")
    from_card = datasets.load_dataset(str(release.folder), cache_dir=cache)
    from_parquet = datasets.load_dataset(
        "parquet", data_dir=str(release.folder / "data"), cache_dir=cache
    )
    assert set(from_card) == set(release.statistics["splits"])
    card_features = datasets.Features.from_arrow_schema(
        pq.read_schema(release.folder / "data" / "train.parquet")
    )
    for split, count in release.statistics["splits"].items():
        assert from_card[split].num_rows == count
        assert from_card[split].features == card_features
        assert from_card[split].to_list() == from_parquet[split].to_list()
    image_columns = ("images", "chosen_images", "rejected_images")
    for column in image_columns:
        assert card_features[column] == datasets.List(datasets.Image())
    by_id = {
        row["id"]: row
        for split in from_card
        for row in from_card[split].cast(
            datasets.Features(
                {
                    **card_features,
                    **dict.fromkeys(image_columns, datasets.List(datasets.Image(decode=False))),
                }
            )
        )
    }
    for row in by_id.values():
        for column in image_columns:
            row[column] = [image["path"] for image in row[column]]
        row["label"] = row.pop("preferred_side")  # release_rows' name for it
    assert by_id == {
        row["id"]: {k: v for k, v in row.items() if k != "split"} for row in release_rows(release)
    }


def test_a_multimodal_pair_has_placeholders_and_image_files_without_metadata(filled, dave):
    release = built_release(filled, dave)
    row = _rows(release)[IMAGE_ID]
    assert row["prompt"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Draw this again"},
                {"type": "image", "text": None},
            ],
        }
    ]
    # B won: chosen is painter-b's text and image, rejected painter-a's image
    assert row["chosen_model"] == "painter-b"
    assert [part["type"] for part in row["chosen"][0]["content"]] == ["text", "image"]
    assert len(row["images"]) == len(row["chosen_images"]) == len(row["rejected_images"]) == 1
    assert row["votes"] == [1, 1]  # the prior annotation first, then alice's vote
    for path in row["images"] + row["chosen_images"] + row["rejected_images"]:
        data = (release.folder / path).read_bytes()
        # The served copy: the JPEG's pixels rebuilt as PNG.
        assert path == f"images/{hashlib.sha256(data).hexdigest()}.png"
        assert SECRET_EXIF.encode() not in data
        assert not Image.open(io.BytesIO(data)).getexif()
    originals = [
        (Path(settings.MEDIA_ROOT) / media.relative_path).read_bytes()
        for media in Media.objects.all()
    ]
    assert all(SECRET_EXIF.encode() in original for original in originals)
    assert release.statistics["images"] == 3
    assert len(list((release.folder / "images").iterdir())) == 3


def test_text_only_projects_get_string_content_for_chat_templates(project, dave):
    PairFactory(project=project, external_id="t-1", status="consensus", consensus_label="A")
    row = next(release_rows(built_release(project, dave)))
    assert row["prompt"] == [{"role": "user", "content": "Prompt for t-1"}]
    assert row["chosen"] == [{"role": "assistant", "content": "Answer one to t-1"}]
    assert row["images"] == []


def test_the_selection_takes_ties_the_ensemble_and_filters_as_asked(filled, dave):
    rows = _rows(built_release(filled, dave, include_ties=True, include_ensemble=True))
    assert set(rows) == {*CONSENSUS_VOTES, ADJUDICATED_ID, IMAGE_ID, TIE_ID, EASY_ID}
    assert not set(LEFT_OUT) & set(rows)
    tie = rows[TIE_ID]
    assert (tie["label"], tie["chosen_model"], tie["rejected_model"]) == (
        "tie",
        "model-alpha",
        "model-beta",
    )
    easy = rows[EASY_ID]
    assert (easy["source"], easy["label"], easy["votes"]) == ("ensemble", "A", [])
    assert easy["agreement"] == pytest.approx(17 / 18)
    assert json.loads(easy["ensemble_summary"]) == {"votes": {"A": 17, "B": 1}, "run": 1}

    only = _rows(built_release(filled, dave, "1.1.0", tasks=["code"], criteria=["correctness"]))
    assert set(only) == {"rel-00", "rel-02", "rel-04"}
    agreed = _rows(built_release(filled, dave, "1.2.0", min_agreement=0.9))
    assert set(agreed) == {"rel-01", "rel-02", IMAGE_ID}
    adjudicated = _rows(built_release(filled, dave, "1.3.0", include_consensus=False))
    assert set(adjudicated) == {ADJUDICATED_ID}
    none_adjudicated = _rows(built_release(filled, dave, "1.4.0", include_adjudicated=False))
    assert ADJUDICATED_ID not in none_adjudicated
    assert "rel-00" in none_adjudicated


def test_no_prompt_is_in_two_splits(filled, dave):
    release = built_release(filled, dave, splits="train=0.4,dev=0.3,test=0.3", seed=7)
    split_of_prompt: dict[str, set[str]] = {}
    for row in release_rows(release):
        split_of_prompt.setdefault(json.dumps(row["prompt"]), set()).add(row["split"])
    assert all(len(splits) == 1 for splits in split_of_prompt.values())
    rows = _rows(release)
    assert rows["rel-00"]["split"] == rows["rel-01"]["split"]  # one prompt, two pairs
    assert rows["rel-02"]["split"] == rows["rel-03"]["split"]
    # many prompts: the shares come near the ratios, and a prompt keeps its split per seed
    selection = check_selection({"splits": "train=0.8,test=0.2", "seed": 3})
    picks = Counter(selection.split_of(f"prompt-{n}") for n in range(10_000))
    assert 0.78 < picks["train"] / 10_000 < 0.82
    # the split follows from the seed alone: a selection built again from it agrees on every
    # prompt, and another seed moves some prompts
    keys = [f"prompt-{n}" for n in range(1_000)]
    again = check_selection({"splits": "train=0.8,test=0.2", "seed": 3})
    assert [again.split_of(key) for key in keys] == [selection.split_of(key) for key in keys]
    reseeded = check_selection({"splits": "train=0.8,test=0.2", "seed": 4})
    assert [reseeded.split_of(key) for key in keys] != [selection.split_of(key) for key in keys]


def test_the_same_data_gives_the_same_bytes_under_another_version(filled, dave, settings, tmp_path):
    first = built_release(filled, dave, "1.0.0", include_ties=True, splits="train=0.5,test=0.5")
    first_files = _files(first.folder)
    (tmp_path / "first").mkdir()
    first_archive = archive_file(first, tmp_path / "first").read_bytes()
    settings.ARBITER_RELEASE_ROOT = tmp_path / "elsewhere"
    second = built_release(filled, dave, "7.3.1", include_ties=True, splits="train=0.5,test=0.5")
    assert _files(second.folder) == first_files
    second_archive = archive_file(second, tmp_path)
    assert second_archive.read_bytes() == first_archive
    assert second.manifest_sha256 == first.manifest_sha256
    assert second.manifest_sha256 == hashlib.sha256(first_files["manifest.json"]).hexdigest()
    assert b"7.3.1" not in second_archive.read_bytes()
    with tarfile.open(second_archive) as tar:
        members = tar.getmembers()
    names = [member.name for member in members]
    assert names == sorted(names)
    assert all(name.startswith("demo/") for name in names)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {
        (0, 0, 0, "", "", 0o644)
    }
    assert first_archive[4:8] == b"\x00\x00\x00\x00"  # gzip header mtime
    # the archive a build frames as it goes is the one its folder gives afterwards
    again = tmp_path / "again.tar.gz"
    archive_write(second.folder, again, root="demo", work=tmp_path / "parts")
    assert again.read_bytes() == first_archive
    # one gzip stream to every reader, members joined
    with gzip.open(again) as stream, tarfile.open(fileobj=stream) as tar:
        assert tar.getnames() == names


def test_a_changed_label_changes_the_release(filled, dave, settings, tmp_path):
    first = built_release(filled, dave, "1.0.0")
    Pair.objects.filter(external_id="rel-00").update(consensus_label="B")
    second = built_release(filled, dave, "1.0.1")
    assert second.manifest_sha256 != first.manifest_sha256
    assert _rows(second)["rel-00"]["label"] == "B"


def test_verify_release_names_a_flipped_byte_in_the_folder_and_the_archive(filled, dave, tmp_path):
    release = built_release(filled, dave)
    archive = archive_file(release, tmp_path)
    assert verify_release_path(release.folder) == []
    assert verify_release_path(archive) == []
    target = release.folder / "data" / "test.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    assert verify_release_path(release.folder) == [
        "data/test.parquet: sha256 differs from the manifest"
    ]
    (release.folder / "extra.txt").write_text("hello")
    (release.folder / "README.md").unlink()
    assert verify_release_path(release.folder) == [
        "README.md: missing",
        "data/test.parquet: sha256 differs from the manifest",
        "extra.txt: not in the manifest",
    ]
    # an archive with one file changed inside (rebuilt from the changed folder)
    changed = tmp_path / "changed.tar.gz"
    archive_write(release.folder, changed, root="demo", work=tmp_path / "w")
    assert "data/test.parquet: sha256 differs from the manifest" in verify_release_path(changed)
    # a flipped byte in the compressed stream
    raw = bytearray(archive.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    archive.write_bytes(bytes(raw))
    problems = verify_release_path(archive)
    assert problems[-1].startswith(f"{archive.name}: not a readable .tar.gz")
    # a download cut short
    archive.write_bytes(bytes(raw[: len(raw) // 3]))
    problems = verify_release_path(archive)
    assert problems[-1].startswith(f"{archive.name}: not a readable .tar.gz")


def test_the_mmrb2_file_imports_back_and_is_scored_with_mmrb2s_accuracy(
    filled, dave, other_project
):
    release = built_release(filled, dave)
    path = release.folder / "mmrb2" / "test.json"
    pairs = json.loads(path.read_text())["pairs"]
    assert {pair["id"] for pair in pairs} == set(_rows(release))
    image = next(pair for pair in pairs if pair["id"] == IMAGE_ID)
    assert image["human_annotations"] == [1, 1]
    assert image["chosen"] == "B"
    assert image["prompt_content"][1][0] == "image"
    flip = {"A": "B", "B": "A"}
    # a judge that agrees with people in both orders
    right = {p["id"]: {"forward": p["chosen"], "reverse": flip[p["chosen"]]} for p in pairs}
    assert mmrb2_accuracy(path, right) == 1.0
    # one that always says "the first shown": right once per pair, whatever the labels
    positional = {p["id"]: {"forward": "A", "reverse": "A"} for p in pairs}
    assert mmrb2_accuracy(path, positional) == 0.5
    # one that answers A in the forward order only, and skips one pair
    forward_only = {p["id"]: {"forward": "A"} for p in pairs[1:]}
    sided = pairs[1:]
    assert mmrb2_accuracy(path, forward_only) == pytest.approx(
        sum(p["chosen"] == "A" for p in sided) / len(sided)
    )
    summary = pairs_import(project=other_project, source=path, media_root=release.folder)
    assert summary.created_pairs == len(pairs)


def test_the_card_counts_what_the_release_holds(filled, dave):
    release = built_release(filled, dave, include_ensemble=True)
    stats = release.statistics
    assert stats["pairs"] == release.pair_count == 11
    assert stats["sources"] == {"adjudicated": 1, "consensus": 9, "ensemble": 1}
    assert stats["annotators"] == 3
    assert stats["prior_raters"] == 1
    assert stats["ensemble_removed"] == 1
    assert stats["votes"] == 3 * 9 + 2
    assert stats["alpha_side_ci95"][0] <= stats["alpha_side"] <= stats["alpha_side_ci95"][1]
    card = (release.folder / "README.md").read_text()
    assert card == release.card
    assert card.startswith('---\npretty_name: "Demo project"\n')
    assert "1.0.0" not in card
    assert "| **All** | 11 | 11 |" in card


def test_reading_in_chunks_gives_the_same_release(filled, dave, settings, tmp_path, monkeypatch):
    whole = built_release(filled, dave, "1.0.0", include_ensemble=True, splits="a=0.5,b=0.5")
    whole_files = _files(whole.folder)
    monkeypatch.setattr("annotation.releases.rows.CHUNK_PAIRS", 3)
    settings.ARBITER_RELEASE_ROOT = tmp_path / "chunked"
    seen = []
    release = release_create(
        project=filled,
        version="1.0.1",
        selection={"include_ensemble": True, "splits": "a=0.5,b=0.5"},
        user=dave,
    )
    chunked = release_build(
        release=release, progress=lambda done, total, stage: seen.append((done, total, stage))
    )
    assert _files(chunked.folder) == whole_files
    reading = [done for done, total, stage in seen if stage == "reading"]
    assert reading == [0, 3, 6, 9, 11]  # 11 pairs, 3 at a time
