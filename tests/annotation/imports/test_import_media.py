"""Images in an import: verified by Pillow, kept byte for byte once per sha256, read only
from inside the media folder, and unpacked from uploaded archives without escaping them."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from annotation.imports.archive import ArchiveError, archive_extract
from annotation.imports.errors import ImportFailed
from annotation.imports.importer import pairs_import
from annotation.imports.media import MediaStore
from annotation.media.services import MediaError, image_inspect
from annotation.models import Media, ProjectMedia
from tests.annotation.imports.conftest import (
    assert_nothing_imported,
    image_bytes,
    image_pair,
    png_bomb,
    stored_files,
    write_jsonl,
)
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("pillow_format", "stored_format"),
    [("JPEG", "JPEG"), ("PNG", "PNG"), ("WEBP", "WEBP"), ("GIF", "GIF")],
)
def test_the_four_formats_are_accepted(pillow_format, stored_format):
    data = image_bytes(size=(30, 20), fmt=pillow_format)
    info = image_inspect(data)
    assert (info.format, info.width, info.height, info.size_bytes) == (
        stored_format,
        30,
        20,
        len(data),
    )


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<!DOCTYPE html><html><title>404</title></html>", "not an image Arbiter accepts"),
        (image_bytes(fmt="BMP"), "not an image Arbiter accepts"),
        (image_bytes(fmt="TIFF"), "not an image Arbiter accepts"),
        (image_bytes(size=(200, 200), fmt="JPEG")[:300], "corrupt image"),
        (png_bomb(), "decompression bomb"),
        (b"", "not an image Arbiter accepts"),
    ],
    ids=["html", "bmp", "tiff", "truncated-jpeg", "bomb", "empty"],
)
def test_what_is_not_a_usable_image_is_refused(data, reason):
    with pytest.raises(MediaError, match=reason):
        image_inspect(data)


def test_pixel_limit_comes_from_settings(settings):
    settings.ARBITER_MAX_IMAGE_PIXELS = 100
    with pytest.raises(MediaError, match="12x12 is 144 pixels, more than the limit of 100"):
        image_inspect(image_bytes(size=(12, 12)))


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("/etc/passwd", "must be relative to the media folder"),
        ("../outside.png", "must not contain '..'"),
        ("imgs/../../outside.png", "must not contain '..'"),
        ("link.png", "leads outside the media folder"),
        ("imgs", "is not a file"),
    ],
)
def test_paths_stay_inside_the_media_folder(tmp_path, reference, reason):
    root = tmp_path / "root"
    (root / "imgs").mkdir(parents=True)
    (tmp_path / "outside.png").write_bytes(image_bytes())
    os.symlink(tmp_path / "outside.png", root / "link.png")
    store = MediaStore(media_root=root)
    with pytest.raises(MediaError, match=reason):
        store.resolve(reference)


def test_image_over_the_size_limit_is_refused(tmp_path, settings):
    settings.ARBITER_MAX_IMAGE_BYTES = 50
    (tmp_path / "a.png").write_bytes(image_bytes())
    with pytest.raises(MediaError, match="larger than 50 bytes"):
        MediaStore(media_root=tmp_path).resolve("a.png")


def test_media_shared_between_projects_is_stored_once(project, other_project, tmp_path, settings):
    (tmp_path / "a.png").write_bytes(image_bytes((1, 1, 1)))
    (tmp_path / "b.png").write_bytes(image_bytes((2, 2, 2)))
    path = write_jsonl(tmp_path / "p.jsonl", [image_pair("p1", "a.png", "b.png")])
    first = pairs_import(project=project, source=path, media_root=tmp_path)
    second = pairs_import(project=other_project, source=path, media_root=tmp_path)
    assert (first.media_created, first.media_reused) == (2, 0)
    assert (second.media_created, second.media_reused) == (0, 2)
    assert Media.objects.count() == 2
    assert ProjectMedia.objects.filter(project=other_project).count() == 2
    files = [p for p in stored_files() if ".uploads" not in p.parts]
    assert len(files) == 2
    assert sorted(p.read_bytes() for p in files) == sorted(
        [(tmp_path / "a.png").read_bytes(), (tmp_path / "b.png").read_bytes()]
    )
    # Stored under the content hash, with the extension of the verified format.
    media = Media.objects.first()
    assert (Path(settings.MEDIA_ROOT) / media.relative_path).name == f"{media.sha256}.png"


def test_refused_import_removes_the_images_it_had_staged(project, tmp_path):
    (tmp_path / "a.png").write_bytes(image_bytes((5, 5, 5)))
    (tmp_path / "b.png").write_bytes(image_bytes((6, 6, 6)))
    pairs = [image_pair("p1", "a.png", "b.png"), image_pair("p2", "a.png", "missing.png")]
    with pytest.raises(ImportFailed):
        pairs_import(
            project=project,
            source=write_jsonl(tmp_path / "p.jsonl", pairs),
            media_root=tmp_path,
            batch_size=1,
        )
    assert_nothing_imported(project)


# Archives --------------------------------------------------------------------------------


def zip_archive(files: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def tar_archive(members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member in members:
            body = (data or {}).get(member.name)
            if body is not None:
                member.size = len(body)
            archive.addfile(member, io.BytesIO(body) if body is not None else None)
    buffer.seek(0)
    return buffer


def test_zip_and_tar_gz_unpack(tmp_path):
    png = image_bytes()
    archive_extract(source=zip_archive({"a/b.png": png, "c.png": png}), dest=tmp_path / "z")
    assert (tmp_path / "z" / "a" / "b.png").read_bytes() == png
    member = tarfile.TarInfo("imgs/x.png")
    archive_extract(source=tar_archive([member], {"imgs/x.png": png}), dest=tmp_path / "t")
    assert (tmp_path / "t" / "imgs" / "x.png").read_bytes() == png


@pytest.mark.parametrize(
    ("name", "reason"),
    [("/etc/cron.d/evil", "absolute path"), ("a/../../evil.png", "contains '..'")],
)
def test_zip_members_cannot_escape(tmp_path, name, reason):
    with pytest.raises(ArchiveError, match=reason):
        archive_extract(source=zip_archive({name: b"x"}), dest=tmp_path / "out")
    assert not (tmp_path / "evil.png").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE])
def test_tar_links_and_devices_are_refused(tmp_path, kind):
    member = tarfile.TarInfo("imgs/a.png")
    member.type = kind
    member.linkname = "/etc/passwd"
    with pytest.raises(ArchiveError, match="not a regular file"):
        archive_extract(source=tar_archive([member]), dest=tmp_path / "out")
    assert not (tmp_path / "out" / "imgs" / "a.png").exists()


def test_zip_symlink_member_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("link.png")
        info.external_attr = (0o120777 << 16) | 0x10
        archive.writestr(info, "/etc/passwd")
    buffer.seek(0)
    with pytest.raises(ArchiveError, match="not a regular file"):
        archive_extract(source=buffer, dest=tmp_path / "out")


def test_tar_path_traversal_is_refused(tmp_path):
    member = tarfile.TarInfo("../../evil.png")
    with pytest.raises(ArchiveError, match=r"contains '\.\.'"):
        archive_extract(source=tar_archive([member], {"../../evil.png": b"x"}), dest=tmp_path / "o")
    assert not (tmp_path / "evil.png").exists()


def test_archive_size_caps(tmp_path, settings):
    settings.ARBITER_MAX_IMAGE_BYTES = 1000
    # A member may be as large as the largest kind of file allows.
    settings.ARBITER_MAX_VIDEO_BYTES = 800
    settings.ARBITER_MAX_AUDIO_BYTES = settings.ARBITER_MAX_MODEL3D_BYTES = 10
    with pytest.raises(ArchiveError, match="larger than 1,000 bytes"):
        archive_extract(source=zip_archive({"big.png": b"\0" * 5000}), dest=tmp_path / "a")
    settings.ARBITER_MAX_UPLOAD_BYTES = 1500
    files = {f"{i}.png": b"\0" * 900 for i in range(3)}
    with pytest.raises(ArchiveError, match="unpacks to more than 1,500 bytes"):
        archive_extract(source=zip_archive(files), dest=tmp_path / "b")


def test_import_with_an_archive_reads_images_from_it(tmp_path):
    project = ProjectFactory(slug="archived")
    png_a, png_b = image_bytes((1, 2, 3)), image_bytes((3, 2, 1))
    archive = tmp_path / "media.tar.gz"
    archive.write_bytes(
        tar_archive(
            [tarfile.TarInfo("images/a.png"), tarfile.TarInfo("images/b.png")],
            {"images/a.png": png_a, "images/b.png": png_b},
        ).getvalue()
    )
    path = write_jsonl(tmp_path / "p.jsonl", [image_pair("p1", "images/a.png", "images/b.png")])
    summary = pairs_import(project=project, source=path, archive=archive)
    assert (summary.created_pairs, summary.media_created) == (1, 2)
    # The unpacked copy is gone; only the content-addressed store remains.
    assert len(stored_files()) == 2
