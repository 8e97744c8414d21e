"""Releases carry video, audio and 3D parts (docs/releases.md, "Video, audio and 3D"): each
file once by the hash of its bytes, the served copy (metadata stripped) unless the originals
were asked for, video and audio columns of ``{"bytes", "path"}`` structs that
``load_dataset`` reads without torchcodec (a fresh environment holding only ``datasets`` and
``av`` loads every config and split and decodes them with PyAV), 3D models as paths, and an
Omni-RewardBench file per task that Arbiter's own import reads back with the same pairs and
labels."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import av
import datasets
import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from PIL import Image

from annotation.core import seals
from annotation.core.errors import Conflict, InvalidInput
from annotation.imports.importer import pairs_import
from annotation.models import Media, Pair, PairStatus, Release
from annotation.releases.archive import stored_in_archive, verify_release_path
from annotation.releases.build import HashChecks
from annotation.releases.downloads import message_text
from annotation.releases.selectors import release_rows
from annotation.releases.services import release_build, release_create, release_publish
from tests.annotation.media.conftest import (
    PLANTED,
    audio_write,
    decoded_digests,
    glb_bytes,
    video_write,
)
from tests.annotation.releases.conftest import archive_file, archive_sha256
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


def _omni_files(root: Path) -> dict[str, Path]:
    """Four of Omni-RewardBench's task files, as the benchmark ships them, with their media."""
    video_write(root / "v1.mp4")
    video_write(root / "v2.mp4", frames=3)
    audio_write(root / "a1.wav")
    audio_write(root / "a2.wav", seconds=0.3)
    (root / "m1.glb").write_bytes(glb_bytes())
    (root / "m2.glb").write_bytes(glb_bytes(generator="other"))
    (root / "views").mkdir()
    for n, colour in enumerate(((200, 0, 0), (0, 0, 200))):
        Image.new("RGB", (16, 12), colour).save(root / "views" / f"r{n}.png")

    def record(number: int, preference: str, **fields) -> dict:
        return {
            "id": f"{fields.pop('prefix')}-{number}",
            "prompt": f"Prompt {number}",
            "model1": "alpha-model",
            "model2": "beta-model",
            "criteria": f"Criterion {number}",
            "criteria_preference": preference,
            **fields,
        }

    tasks = {
        "text_to_video": {"prefix": "t2v", "response1": "v1.mp4", "response2": "v2.mp4"},
        "text_to_audio": {"prefix": "t2a", "response1_path": "a1.wav", "response2_path": "a2.wav"},
        "text_audio_to_text": {
            "prefix": "ta2t",
            "audio_path": "a1.wav",
            "response1": "A tone",
            "response2": "Speech",
        },
        "text_to_3d": {
            "prefix": "t23d",
            "response1_path": "m1.glb",
            "response2_path": ["views/r0.png", "views/r1.png"],
        },
    }
    files = {}
    for stem, fields in tasks.items():
        records = [
            record(n, preference, **dict(fields))
            for n, preference in enumerate(("response1", "response2", "tie"))
        ]
        files[stem] = root / f"{stem}_preferences.json"
        files[stem].write_text(json.dumps(records, indent=1))
    return files


def _import(project, files: dict[str, Path], root: Path) -> None:
    for source in files.values():
        pairs_import(project=project, source=source, media_root=root)


def _build(project, user, version: str, **selection):
    release = release_create(
        project=project,
        version=version,
        selection={"reference_labels": True, "include_ties": True, **selection},
        user=user,
    )
    return release_build(release=release)


def _pairs(project) -> dict[str, tuple]:
    """What a pair is, apart from its media's hashes: id, task, criterion, reference label,
    models and the kinds of its parts."""

    def kinds(content):
        return [part["type"] for part in content]

    return {
        pair.external_id: (
            pair.task,
            pair.criterion,
            pair.prior_label,
            pair.response_a.model_name,
            pair.response_b.model_name,
            kinds(pair.prompt.content),
            kinds(pair.response_a.content),
            kinds(pair.response_b.content),
        )
        for pair in Pair.objects.filter(project=project).select_related(
            "prompt", "response_a", "response_b"
        )
    }


@pytest.fixture
def released(project, dave, tmp_path):
    root = tmp_path / "omni"
    root.mkdir()
    _import(project, _omni_files(root), root)
    return _build(project, dave, "1.0.0")


def test_media_files_are_the_stripped_copies_by_their_hash(released):
    folder = released.folder
    manifest = json.loads((folder / "manifest.json").read_text())["files"]
    by_dir = {
        kind: sorted(p for p in manifest if p.startswith(f"{kind}/"))
        for kind in ("videos", "audio", "models", "images")
    }
    assert len(by_dir["videos"]) == 2
    assert len(by_dir["audio"]) == 2
    assert len(by_dir["models"]) == 1
    assert len(by_dir["images"]) == 2
    for paths in by_dir.values():
        for path in paths:
            data = (folder / path).read_bytes()
            assert Path(path).stem == hashlib.sha256(data).hexdigest()
            assert PLANTED.encode() not in data
    # The served copy, re-encoded: H.264 or AAC in MP4, as many video frames as the original.
    for path in by_dir["videos"] + by_dir["audio"]:
        served = Media.objects.get(served_sha256=Path(path).stem)
        assert Path(path).suffix == (".mp4" if served.kind == "video" else ".m4a")
        copy = decoded_digests(folder / path)
        original = decoded_digests(Path(settings.MEDIA_ROOT) / served.relative_path)
        assert len(copy["video"]) == len(original["video"])
        assert copy["audio"]
    assert released.statistics["media"] == {"video": 2, "audio": 2, "model3d": 1}
    assert "Videos: 2 files under `videos/`" in released.card


# A video or audio file in Parquet: its path in the release folder, once there however many
# rows show it (no feature that needs torchcodec).
FILE_FEATURE = datasets.List(datasets.Value("string"))


def test_load_dataset_reads_video_and_audio(released, tmp_path):
    folder = released.folder
    # A cache of this test's own: datasets keys a folder's cache by its path, and pytest's
    # temporary paths come back in later sessions.
    cache = str(tmp_path / "hf-cache")
    features = datasets.load_dataset(
        "parquet", data_dir=str(folder / "data"), split="test", cache_dir=cache
    ).features
    assert features["chosen_videos"] == FILE_FEATURE
    assert features["audios"] == FILE_FEATURE
    assert features["chosen_images"] == datasets.List(datasets.Image())
    assert features["chosen_models3d"].feature.dtype == "string"
    # Through the card's configs too, with the same features; rows are read as they are.
    pairs = datasets.load_dataset(str(folder), split="test", cache_dir=cache)
    assert pairs.features == features
    for column, feature in pairs.features.items():
        inner = getattr(feature, "feature", None)
        assert not isinstance(inner, datasets.Video | datasets.Audio), column
    rows = {row["id"]: row for row in pairs}
    video = rows["t2v/t2v-0"]["chosen_videos"][0]
    assert video.startswith("videos/")
    with av.open(folder / video) as container:
        assert sum(1 for _ in container.decode(video=0)) == 4
    clip = rows["t2a/t2a-0"]["chosen_audios"][0]
    with av.open(folder / clip) as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
    # 0.2 s, served at 48 kHz (AAC decodes whole frames of 1,024 samples).
    assert abs(samples - 48000 * 0.2) <= 2048
    prompt_audio = rows["ta2t/ta2t-1"]["audios"]
    assert [part["type"] for part in rows["ta2t/ta2t-1"]["prompt"][0]["content"]] == [
        "audio",
        "text",
    ]
    assert len(prompt_audio) == 1
    assert prompt_audio[0].startswith("audio/")
    # 3D models are paths in the release folder; rendered views are images.
    model = rows["t23d/t23d-0"]["chosen_models3d"]
    assert len(model) == 1
    assert (folder / model[0]).read_bytes()[:4] == b"glTF"
    assert len(rows["t23d/t23d-0"]["rejected_images"]) == 2


def test_the_jsonl_rows_hold_paths(released):
    rows = {row["id"]: row for row in release_rows(released)}
    assert rows["t2v/t2v-1"]["chosen"][0]["content"] == [{"type": "video", "text": None}]
    assert rows["t2v/t2v-1"]["chosen_videos"][0].startswith("videos/")
    assert rows["t2v/t2v-2"]["label"] == "tie"
    # The CSV marks each placeholder by its kind.
    assert message_text(rows["t2v/t2v-1"]["chosen"]) == "[video]"
    assert message_text(rows["ta2t/ta2t-1"]["prompt"]) == "[audio]\nPrompt 1"


def test_originals_on_request(project, dave, released):
    original = _build(project, dave, "1.1.0", original_media=True)
    assert original.selection["original_media"] is True
    manifest = json.loads((original.folder / "manifest.json").read_text())["files"]
    videos = [path for path in manifest if path.startswith("videos/")]
    originals = set(Media.objects.filter(kind="video").values_list("sha256", flat=True))
    assert {Path(path).stem for path in videos} == originals
    assert all(PLANTED.encode() in (original.folder / path).read_bytes() for path in videos)
    assert "as they were imported" in original.card
    assert original.manifest_sha256 != released.manifest_sha256


def test_a_rebuild_gives_the_same_bytes(project, dave, released):
    again = _build(project, dave, "2.0.0")
    assert again.manifest_sha256 == released.manifest_sha256
    assert archive_sha256(again) == archive_sha256(released)


def test_media_files_are_linked_once_and_stored_undeflated(released, tmp_path):
    """On local disk each media file in the release is the stored file itself (a hard link:
    no bytes written), and its archive member is stored, not deflated, so the archive holds
    each file once at its size (docs/releases.md, "Speed")."""
    manifest = json.loads((released.folder / "manifest.json").read_text())["files"]
    media = {path: entry for path, entry in manifest.items() if stored_in_archive(path)}
    assert {path.split("/")[0] for path in media} == {"videos", "audio", "models", "images"}
    for path in media:
        served = Media.objects.filter(served_sha256=Path(path).stem).first()
        stored = Path(settings.MEDIA_ROOT) / served.served_relative_path
        assert (released.folder / path).stat().st_ino == stored.stat().st_ino
    with tarfile.open(archive_file(released, tmp_path), "r:gz") as archive:
        for member in archive.getmembers():
            relative = member.name.split("/", 1)[1]
            if relative in media:
                assert (
                    archive.extractfile(member).read() == (released.folder / relative).read_bytes()
                )
    media_bytes = sum(entry["size"] for entry in media.values())
    assert released.archive_size >= media_bytes


def test_a_damaged_media_file_fails_the_build_naming_it(project, dave, released):
    manifest = json.loads((released.folder / "manifest.json").read_text())["files"]
    video = next(path for path in manifest if path.startswith("videos/"))
    served = Media.objects.get(served_sha256=Path(video).stem)
    stored = Path(settings.MEDIA_ROOT) / served.served_relative_path
    stored.unlink()  # a new file: the built release keeps the bytes it linked
    stored.write_bytes(b"not the video any more")
    with pytest.raises(ValueError, match="does not hold the bytes it is named by"):
        _build(project, dave, "2.0.0")
    failed = Release.objects.get(project=project, version="2.0.0")
    assert failed.status == "failed"
    assert served.served_relative_path in failed.error
    assert "the media storage is damaged" in failed.error
    assert hashlib.sha256((released.folder / video).read_bytes()).hexdigest() == Path(video).stem


def _stored(released, prefix: str) -> tuple[str, Path]:
    """A media file of the release under ``prefix`` and the stored file it came from."""
    manifest = json.loads((released.folder / "manifest.json").read_text())["files"]
    path = next(path for path in manifest if path.startswith(prefix))
    served = Media.objects.get(served_sha256=Path(path).stem)
    return path, Path(settings.MEDIA_ROOT) / served.served_relative_path


def _without_hard_links(monkeypatch) -> None:
    """A media store on another file system than the releases: no hard link can be made."""

    def cross_device(source, target, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link", str(target))

    monkeypatch.setattr("annotation.releases.build.os.link", cross_device)


def test_a_store_on_another_file_system_gives_the_same_release_by_copies(
    project, dave, released, monkeypatch, tmp_path
):
    """Where no hard link can be made, each file is copied while it is hashed: the same
    bytes, folder and archive, in files of the release's own."""
    _without_hard_links(monkeypatch)
    again = _build(project, dave, "2.0.0")
    assert again.manifest_sha256 == released.manifest_sha256
    assert archive_sha256(again) == archive_sha256(released)
    path, stored = _stored(again, "videos/")
    copied = (again.folder / path).stat()
    assert copied.st_ino != stored.stat().st_ino
    assert copied.st_nlink == 1
    archive = archive_file(again, tmp_path)
    assert verify_release_path(archive, manifest_sha256=again.manifest_sha256) == []


@pytest.mark.parametrize("linked", [True, False], ids=["hard-linked", "copied"])
def test_a_media_file_damaged_in_place_fails_the_build_naming_it(
    project, dave, released, monkeypatch, linked
):
    """A byte changed inside the stored file (its size unchanged), at once after the import
    sealed it: the write breaks the seal, so whether linked or copied its bytes are hashed
    and the build fails naming it. A built release holding a hard link to it holds the
    damage too, and publishing it is refused."""
    if not linked:
        _without_hard_links(monkeypatch)
    path, stored = _stored(released, "videos/")
    assert seals.is_sealed(stored, Path(path).stem)
    with open(stored, "r+b") as handle:
        handle.seek(stored.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert not seals.is_sealed(stored, Path(path).stem)
    with pytest.raises(ValueError, match="does not hold the bytes it is named by"):
        _build(project, dave, "2.0.0")
    failed = Release.objects.get(project=project, version="2.0.0")
    assert failed.status == "failed"
    assert stored.name in failed.error
    # The release built before shares the stored file's bytes (docs/releases.md).
    assert (released.folder / path).stat().st_ino == stored.stat().st_ino
    with pytest.raises(Conflict, match=f"{path}: sha256 differs"):
        release_publish(release=released, user=dave)


def test_imported_media_files_are_sealed_and_a_build_does_not_hash_them_again(
    project, dave, released, monkeypatch
):
    """An import seals each file it stores by the hash it took of its bytes as it wrote them;
    a build hashes only the files whose seal is gone or broken (docs/releases.md, "Sealed
    media files")."""
    manifest = json.loads((released.folder / "manifest.json").read_text())["files"]
    media = sorted(path for path in manifest if stored_in_archive(path))
    assert media
    for path in media:
        assert seals.is_sealed(released.folder / path, Path(path).stem), path
    hashed: list[str] = []
    check = HashChecks._check

    def counted(path, name, expected):
        hashed.append(expected)
        check(path, name, expected)

    monkeypatch.setattr(HashChecks, "_check", staticmethod(counted))
    again = _build(project, dave, "2.0.0")
    assert hashed == []
    assert again.manifest_sha256 == released.manifest_sha256
    path, stored = _stored(released, "audio/")
    os.removexattr(stored, seals.SEAL_ATTRIBUTE)
    third = _build(project, dave, "3.0.0")
    assert hashed == [Path(path).stem]
    assert third.manifest_sha256 == released.manifest_sha256


def test_a_damage_that_keeps_the_seal_is_refused_at_publishing(project, dave, released):
    """What a seal cannot see: bytes changed in place with the size and the modification time
    put back (a disk's own damage looks so). The build trusts the seal; publishing hashes
    every byte and refuses the release, naming the file."""
    path, stored = _stored(released, "videos/")
    held = stored.stat()
    with open(stored, "r+b") as handle:
        handle.seek(held.st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(stored, ns=(held.st_atime_ns, held.st_mtime_ns))
    assert seals.is_sealed(stored, Path(path).stem)
    again = _build(project, dave, "2.0.0")
    assert again.status == "built"
    with pytest.raises(Conflict, match=f"{path}: sha256 differs"):
        release_publish(release=again, user=dave)
    assert Release.objects.get(pk=again.pk).published_at is None


def test_a_stored_media_file_that_is_a_symbolic_link_fails_the_build(
    project, dave, released, tmp_path
):
    """Never made by Arbiter: a link could point anywhere (the same bytes elsewhere here)."""
    manifest = json.loads((released.folder / "manifest.json").read_text())["files"]
    audio = next(path for path in manifest if path.startswith("audio/"))
    served = Media.objects.get(served_sha256=Path(audio).stem)
    stored = Path(settings.MEDIA_ROOT) / served.served_relative_path
    elsewhere = tmp_path / "elsewhere.m4a"
    shutil.copyfile(stored, elsewhere)
    stored.unlink()
    stored.symlink_to(elsewhere)
    with pytest.raises(ValueError, match="is a symbolic link"):
        _build(project, dave, "2.0.0")


def test_omni_files_import_back_with_the_same_pairs_and_labels(project, dave, released):
    folder = released.folder
    omni = sorted(path.relative_to(folder) for path in (folder / "omni" / "test").iterdir())
    assert [str(path) for path in omni] == [
        "omni/test/text_audio_to_text_preferences.json",
        "omni/test/text_to_3d_preferences.json",
        "omni/test/text_to_audio_preferences.json",
        "omni/test/text_to_video_preferences.json",
    ]
    records = json.loads((folder / omni[3]).read_text())
    # The benchmark's own id, without the task an import put before it.
    assert records[0]["id"] == "t2v-0"
    assert records[0]["criteria_preference"] == "response1"
    assert records[0]["response1_path"].startswith("videos/")
    assert records[0]["criteria"] == "Criterion 0"
    again = ProjectFactory(slug="again", name="Again", scale="ternary")
    for path in omni:
        pairs_import(project=again, source=folder / path, media_root=folder)
    assert _pairs(again) == _pairs(project)
    assert {pair.prior_label for pair in Pair.objects.filter(project=again)} == {"A", "B", "tie"}


def test_a_pair_with_another_part_kind_is_still_refused(project, dave, released):
    pair = Pair.objects.get(project=project, external_id="t2v/t2v-0")
    content = pair.response_a.content
    pair.response_a.content = [*content, {"type": "pointcloud", "media": "x"}]
    pair.response_a.save(update_fields=["content"])
    release = release_create(
        project=project, version="3.0.0", selection={"reference_labels": True}, user=dave
    )
    with pytest.raises(InvalidInput, match="t2v/t2v-0 has pointcloud parts"):
        release_build(release=release)


# ---- The originals, asked for where a release is made ----


@pytest.fixture
def decided(project, tmp_path):
    """The Omni pairs decided by consensus, as their reference labels say."""
    root = tmp_path / "omni"
    root.mkdir()
    _import(project, _omni_files(root), root)
    for label in ("A", "B", "tie"):
        Pair.objects.filter(project=project, prior_label=label).update(
            status=PairStatus.CONSENSUS, consensus_label=label
        )
    return project


def _video_files(release) -> set[str]:
    release.refresh_from_db()
    assert release.status == release.Status.BUILT, release.error
    manifest = json.loads((release.folder / "manifest.json").read_text())["files"]
    return {Path(path).stem for path in manifest if path.startswith("videos/")}


def _originals() -> set[str]:
    return set(Media.objects.filter(kind="video").values_list("sha256", flat=True))


def test_the_command_takes_original_media(decided):
    call_command("create_release", "demo", "--version", "1.0.0", "--original-media")
    release = Release.objects.get(project=decided, version="1.0.0")
    assert release.selection["original_media"] is True
    assert _video_files(release) == _originals()
    call_command("create_release", "demo", "--version", "1.1.0")
    served = Release.objects.get(project=decided, version="1.1.0")
    assert "original_media" not in served.selection
    assert _video_files(served).isdisjoint(_originals())


def test_the_api_takes_original_media(api_for, decided, dave, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api_for(dave).post(
            f"/api/v1/projects/{decided.slug}/releases/",
            {"version": "1.0.0", "selection": {"original_media": True, "include_ties": True}},
            format="json",
        )
    assert response.status_code == 201, response.json()
    release = Release.objects.get(project=decided, version="1.0.0")
    assert release.selection["original_media"] is True
    assert _video_files(release) == _originals()


def test_the_release_form_takes_original_media(
    client_for, decided, dave, django_capture_on_commit_callbacks
):
    client = client_for(dave)
    page = client.get(reverse("release-create", args=[decided.slug]))
    assert b'name="original_media"' in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("release-create", args=[decided.slug]),
            {
                "version": "1.0.0",
                "include_consensus": "on",
                "original_media": "on",
                "splits": "test=1",
                "seed": "0",
            },
        )
    assert response.status_code == 302
    release = Release.objects.get(project=decided, version="1.0.0")
    assert _video_files(release) == _originals()
    detail = client.get(reverse("release", args=[decided.slug, "1.0.0"]))
    assert b"the originals as imported" in detail.content


# ---- Opened with only `datasets` and PyAV installed ----

# What a user of a release installs to read it (docs/releases.md, "Video, audio and 3D"):
# no torchcodec (which needs FFmpeg's shared libraries), no Pillow.
READER_PACKAGES = ("datasets", "av")
# How long pip may take to install them (from its cache, a few seconds; from PyPI, under a
# minute).
PIP_SECONDS = 600


@pytest.fixture(scope="session")
def reader_python(tmp_path_factory) -> Path:
    """The Python of a fresh virtual environment holding only ``datasets`` and ``av`` (and
    what they need), made once per test session outside the checkout."""
    venv = tmp_path_factory.mktemp("datasets-av") / "venv"
    base = shutil.which("python3.11") or sys.executable
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    cannot = (
        f"pip could not install {' and '.join(READER_PACKAGES)} into a fresh virtual environment"
    )
    try:
        installed = subprocess.run(
            [*pip, *READER_PACKAGES], capture_output=True, text=True, timeout=PIP_SECONDS
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"{cannot} in {PIP_SECONDS} s (no package index within reach?)")
    if installed.returncode != 0:
        pytest.skip(f"{cannot}: {installed.stderr.strip()[-500:]}")
    return python


def _run_reader(python: Path, script: str, *args: str, home: Path) -> str:
    """Runs ``script`` with the reader environment's Python, offline, with a cache of its
    own; its standard output."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    done = subprocess.run(
        [str(python), "-c", script, *args], capture_output=True, text=True, env=env, cwd=home
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


# Loads every config and split of the release given and reads every row of its columns but
# the images (whose decoding needs Pillow), then decodes the first video and the first audio
# clip with PyAV from the file at the path in the row.
_READER = textwrap.dedent(
    """
    import importlib.util, json, os, sys

    import av
    import datasets



    # A feature's kind: a Value's dtype, a struct's fields, a list's item, or the feature's
    # name (Image, Video, Audio).
    def kind(feature):
        if isinstance(feature, dict):
            return {key: kind(value) for key, value in feature.items()}
        if hasattr(feature, "feature"):
            return kind(feature.feature)
        return feature.dtype if isinstance(feature, datasets.Value) else type(feature).__name__

    folder = sys.argv[1]
    report = {"configs": {}, "features": {}}
    firsts = {}
    for config in datasets.get_dataset_config_names(folder):
        loaded = datasets.load_dataset(folder, config)
        report["configs"][config] = {split: rows.num_rows for split, rows in loaded.items()}
        for split, rows in loaded.items():
            features = {column: kind(feature) for column, feature in rows.features.items()}
            report["features"][config] = features
            read = [column for column, what in features.items() if what != "Image"]
            for row in rows.select_columns(read):
                for column in read:
                    for media in ("videos", "audios"):
                        if column.endswith(media) and row[column] and media not in firsts:
                            firsts[media] = row[column][0]
    decoded = {}
    for media, clip in sorted(firsts.items()):
        stream = {"videos": "video", "audios": "audio"}[media]
        with av.open(os.path.join(folder, clip)) as container:
            frames = list(container.decode(**{stream: 0}))
        count = sum(getattr(frame, "samples", 1) for frame in frames)
        decoded[media] = {"path": clip, "count": count}
    report["decoded"] = decoded
    # Neither torchcodec nor Pillow is there to be used.
    report["missing"] = [
        name for name in ("torchcodec", "PIL") if importlib.util.find_spec(name) is None
    ]
    print(json.dumps(report))
    """
)


def _card_snippet(card: str) -> str:
    """The card's Python block that opens a part with PyAV."""
    blocks = re.findall(r"```python\n(.*?)```", card, flags=re.DOTALL)
    [snippet] = [block for block in blocks if "import av" in block]
    return snippet


def test_the_release_opens_with_only_datasets_and_pyav(project, dave, tmp_path, reader_python):
    root = tmp_path / "omni"
    root.mkdir()
    _import(project, _omni_files(root), root)
    release = _build(
        project,
        dave,
        "1.0.0",
        splits=[{"name": "train", "ratio": 0.5}, {"name": "test", "ratio": 0.5}],
    )
    folder = str(release.folder)
    home = tmp_path / "reader"
    home.mkdir()
    report = json.loads(_run_reader(reader_python, _READER, folder, home=home))
    assert report["missing"] == ["torchcodec", "PIL"]
    # Every config and split the card lists, with its rows.
    assert report["configs"] == {
        config: {split: rows for split, (rows, _) in splits.items()}
        for config, splits in release.statistics["configs"].items()
        if splits
    }
    assert set(report["configs"]) >= {"default", "ties"}
    # Video and audio as paths; images are still `datasets.Image`.
    file_struct = "string"
    for config, prefixes in (
        ("default", ("", "chosen_", "rejected_")),
        ("ties", ("", "response_a_", "response_b_")),
    ):
        features = report["features"][config]
        for prefix in prefixes:
            assert features[f"{prefix}videos"] == file_struct
            assert features[f"{prefix}audios"] == file_struct
            assert features[f"{prefix}images"] == "Image"
            assert features[f"{prefix}models3d"] == "string"
    # One video's frames and one audio clip's samples, decoded by PyAV from the file at its
    # path in the release.
    decoded = report["decoded"]
    assert decoded["videos"]["path"].startswith("videos/")
    assert decoded["audios"]["path"].startswith("audio/")
    assert decoded["videos"]["count"] in (3, 4)
    # a1.wav or a2.wav: 0.2 s or 0.3 s, served at 48 kHz in whole AAC frames of 1,024 samples
    count = decoded["audios"]["count"]
    assert min(abs(count - 48000 * seconds) for seconds in (0.2, 0.3)) <= 2048
    # The card's snippet runs there as written.
    snippet = _card_snippet(release.card).replace("<this folder>", folder)
    printed = _run_reader(reader_python, snippet + "\nprint(len(frames))\n", home=home)
    assert int(printed) > 0


def test_a_release_built_from_the_bucket_has_the_same_bytes(request, project, dave, released):
    """The media moved to the bucket (``migrate_storage``), the build reads them from there
    and gives the release built from the local disk, byte for byte."""
    from django.core.management import call_command

    expected = archive_sha256(released)
    s3 = request.getfixturevalue("s3_storage")
    call_command("migrate_storage", "--area", "media", stdout=io.StringIO())
    assert s3.keys("media")
    shutil.rmtree(settings.MEDIA_ROOT)  # nothing left to read on disk
    again = _build(project, dave, "2.0.0")
    assert again.manifest_sha256 == released.manifest_sha256
    assert archive_sha256(again) == expected
