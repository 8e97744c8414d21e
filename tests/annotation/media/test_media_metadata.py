"""Blinding through images: a generator's name, planted in every place a JPEG, PNG, WebP or
GIF has room for it (metadata fields, segments, chunks, extensions, colour profiles, padding,
bytes a decoder skips, trailing bytes), never reaches anyone in the app. Images are imported
through ``import_pairs`` and fetched through the media URL, as an annotator would; the served
copy is a PNG written anew from the pixels a browser shows, and the original stays stored
under its hash. A file that cannot be rebuilt is refused, never served as it came."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from PIL import Image, ImageCms, ImageOps, ImageSequence, PngImagePlugin

from annotation.core.media_keys import media_etag, media_path
from annotation.imports.media import MediaStore
from annotation.media.services import MediaError, served_copy_make
from annotation.models import Media, ProjectMedia
from tests.annotation.imports.conftest import image_pair, write_jsonl
from tests.annotation.media.conftest import assert_no_planted
from tests.annotation.queue.conftest import make_image

pytestmark = pytest.mark.django_db

SECRET = "SecretGen-9"
XMP = (
    '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
    'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
    f'xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmp:CreatorTool="{SECRET}"/></rdf:RDF>'
    "</x:xmpmeta>"
).encode()
ORIENTATION = 0x0112
# What a served PNG may hold: the pixels, a palette's transparency, an animation's frames.
SERVED_CHUNKS = {b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND", b"acTL", b"fcTL", b"fdAT"}


def secret_exif(orientation: int | None = None) -> Image.Exif:
    exif = Image.Exif()
    exif[0x010E] = f"made by {SECRET}"  # ImageDescription
    exif[0x0131] = SECRET  # Software
    exif[0x013B] = SECRET  # Artist
    exif[0x010F] = SECRET.upper()  # Make
    ifd = exif.get_ifd(0x8769)  # the Exif sub-IFD
    ifd[0x927C] = b"Maker " + SECRET.encode()  # MakerNote
    ifd[0x9286] = b"ASCII\x00\x00\x00" + SECRET.encode()  # UserComment
    if orientation is not None:
        exif[ORIENTATION] = orientation
    return exif


def picture(flip: bool = False, alpha: bool = False) -> Image.Image:
    image = Image.merge(
        "RGB",
        [
            Image.linear_gradient("L").resize((64, 48)),
            Image.radial_gradient("L").resize((64, 48)),
            Image.new("L", (64, 48), 90),
        ],
    )
    if alpha:
        image.putalpha(Image.linear_gradient("L").resize((64, 48)).rotate(90))
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if flip else image


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def jpeg_segment(marker: int, payload: bytes) -> bytes:
    return bytes((0xFF, marker)) + struct.pack(">H", len(payload) + 2) + payload


def with_jpeg_segments(jpeg: bytes, *segments: bytes) -> bytes:
    """``jpeg`` with ``segments`` inserted right after its start marker."""
    return jpeg[:2] + b"".join(segments) + jpeg[2:]


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def with_png_chunks(png: bytes, *chunks: bytes, before: bytes = b"IDAT") -> bytes:
    """``png`` with ``chunks`` inserted before its first ``before`` chunk."""
    at = png.index(before) - 4
    return png[:at] + b"".join(chunks) + png[at:]


def riff_chunk(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("<I", len(body)) + body + b"\x00" * (len(body) & 1)


def with_riff_chunks(webp: bytes, *chunks: bytes) -> bytes:
    """``webp`` with ``chunks`` appended inside its RIFF, the RIFF size fixed."""
    body = webp[12:] + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def gif_extension(label: int, *blocks: bytes) -> bytes:
    return bytes((0x21, label)) + b"".join(bytes((len(b),)) + b for b in blocks) + b"\x00"


def icc_profile(*tags: tuple[bytes, bytes], trailer: bytes = b"") -> bytes:
    """A version 2 RGB display profile holding ``tags``, then ``trailer`` (inside its size)."""
    table_end = 128 + 4 + 12 * len(tags)
    table, area = [struct.pack(">I", len(tags))], b""
    for signature, data in tags:
        area += bytes(-len(area) % 4)
        table.append(signature + struct.pack(">II", table_end + len(area), len(data)))
        area += data
    body = b"".join(table) + area + trailer
    header = bytearray(128)
    header[0:4] = struct.pack(">I", 128 + len(body))
    header[4:8] = SECRET[:4].encode()  # preferred CMM
    header[8:12] = bytes((2, 0x10, 0, 0))
    header[12:24] = b"mntrRGB XYZ "
    header[36:40] = b"acsp"
    header[48:56] = SECRET[:8].encode()  # device manufacturer and model
    header[68:80] = struct.pack(">3i", 63190, 65536, 54061)  # D50
    header[80:84] = SECRET[4:8].encode()  # creator
    return bytes(header) + body


def xyz(x: float, y: float, z: float) -> bytes:
    return b"XYZ " + bytes(4) + struct.pack(">3i", *(round(v * 65536) for v in (x, y, z)))


def text_description(text: str) -> bytes:
    ascii_text = text.encode() + b"\x00"
    return b"desc" + bytes(4) + struct.pack(">I", len(ascii_text)) + ascii_text + bytes(78)


GAMMA_22 = b"curv" + bytes(4) + struct.pack(">IH", 1, 0x0233)
WIDE_PRIMARIES = (xyz(0.61, 0.31, 0.02), xyz(0.21, 0.69, 0.05), xyz(0.15, 0.04, 0.76))


def secret_profile() -> bytes:
    """Wide-gamut primaries (not sRGB), with the secret in every text a profile may hold: its
    description, copyright, device descriptions, a private tag, the header and the bytes
    after the tags."""
    return icc_profile(
        (b"desc", text_description(f"made by {SECRET}")),
        (b"cprt", b"text" + bytes(4) + f"(c) {SECRET}".encode() + b"\x00"),
        (b"dmnd", text_description(SECRET)),
        (b"wtpt", xyz(0.9642, 1.0, 0.8249)),
        (b"rXYZ", WIDE_PRIMARIES[0] + SECRET.encode()),  # text after an XYZ value
        (b"gXYZ", WIDE_PRIMARIES[1]),
        (b"bXYZ", WIDE_PRIMARIES[2]),
        (b"rTRC", GAMMA_22),
        (b"gTRC", GAMMA_22),
        (b"bTRC", GAMMA_22 + SECRET.encode()),  # text after a curve
        (b"zzzz", b"zzzz" + bytes(4) + SECRET.encode() * 4),
        trailer=f"trailing {SECRET}".encode(),
    )


def planted(text: str = "") -> bytes:
    return f"{text} parameters: model {SECRET}".encode()


# --- the corpus: one file for each place a name can hide ------------------------------------


def jpeg_metadata() -> bytes:
    """EXIF (with MakerNote and UserComment), XMP, a comment, IPTC, Ducky and a private APPn."""
    jpeg = encode(picture(), "JPEG", exif=secret_exif(), xmp=XMP, comment=SECRET, quality=90)
    iptc = jpeg_segment(0xED, b"Photoshop 3.0\x008BIM\x04\x04\x00\x00" + SECRET.encode())
    ducky = jpeg_segment(0xEC, b"Ducky\x00" + SECRET.encode())
    private = jpeg_segment(0xE9, planted("APP9"))
    return with_jpeg_segments(jpeg, iptc, ducky, private)


def jpeg_icc() -> bytes:
    return encode(picture(), "JPEG", icc_profile=secret_profile(), quality=90)


def jpeg_bytes_in_scans() -> bytes:
    """Text between the end of the scan's codes and the next marker (and of each restart
    interval), which decoders skip, and an APPn segment after the first scan."""
    jpeg = encode(picture(), "JPEG", quality=90, restart_marker_blocks=4)
    scan = jpeg.index(b"\xff\xda")
    cuts = [i for i in range(scan, len(jpeg) - 1) if jpeg[i] == 0xFF and jpeg[i + 1] >= 0xD0]
    out, last = [], 0
    for cut in cuts:
        out += [jpeg[last:cut], planted()]
        last = cut
    out.append(jpeg[last:])
    data = b"".join(out)
    end = data.rindex(b"\xff\xd9")
    return data[:end] + jpeg_segment(0xE3, planted("late APP3")) + data[end:]


def jpeg_trailing() -> bytes:
    """An MPO's second view with its own EXIF, then text after the end of the image."""
    mpo = encode(
        picture(), "MPO", save_all=True, append_images=[picture(flip=True)], exif=secret_exif()
    )
    return mpo + planted("after EOI")


def png_metadata() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", f"model: {SECRET}")
    info.add_text("Software", SECRET, zip=True)  # zTXt
    info.add_itxt("Description", f"generated by {SECRET}", zip=True)
    info.add_itxt("Title", SECRET, lang="en", tkey=SECRET)
    info.add(b"tIME", b"\x07\xe9\x01\x02\x03\x04\x05")
    info.add(b"prVt", planted("private chunk"))
    png = encode(picture(alpha=True), "PNG", pnginfo=info, exif=secret_exif())
    padded = f" {SECRET}".encode()
    return with_png_chunks(
        png,
        png_chunk(b"gAMA", struct.pack(">I", 45455) + padded),
        png_chunk(b"pHYs", struct.pack(">IIB", 2835, 2835, 1) + padded),
    )


def png_icc() -> bytes:
    return encode(picture(), "PNG", icc_profile=secret_profile())


def png_hidden_data() -> bytes:
    """Bytes after the zlib stream inside IDAT, an ancillary chunk after it, and text after
    IEND."""
    png = encode(picture(), "PNG")
    idat = png.index(b"IDAT") - 4
    length = int.from_bytes(png[idat : idat + 4], "big")
    padded = png_chunk(b"IDAT", png[idat + 8 : idat + 8 + length] + planted())
    rest = png[idat + 12 + length :]
    return png[:idat] + padded + png_chunk(b"tEXt", b"Comment\x00" + planted()) + rest + planted()


def apng_metadata() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", f"model: {SECRET}")
    return encode(
        picture(),
        "PNG",
        save_all=True,
        append_images=[picture(flip=True), picture(alpha=True)],
        duration=[120, 80, 200],
        loop=3,
        pnginfo=info,
    )


def webp_metadata(animated: bool = False) -> bytes:
    frames = {"save_all": True, "append_images": [picture(flip=True)], "duration": [120, 90]}
    return encode(
        picture(),
        "WEBP",
        exif=secret_exif(),
        xmp=XMP,
        icc_profile=secret_profile(),
        lossless=True,
        **(frames if animated else {}),
    )


def webp_malformed_exif() -> bytes:
    """Failure 5: an EXIF chunk that is no EXIF (it used to make the stripper give up and
    serve the original bytes), an unknown chunk, and text after the RIFF."""
    webp = encode(picture(), "WEBP", exif=b"Exif\x00\x00MM\x00*" + planted(), lossless=True)
    return with_riff_chunks(webp, riff_chunk(b"ZZZZ", planted("chunk"))) + planted("after")


def gif_extensions() -> bytes:
    """A comment, an XMP application extension, a private one, a plain-text extension and
    text after the LZW end code and after the trailer."""
    gif = encode(
        picture(),
        "GIF",
        save_all=True,
        append_images=[picture(flip=True)],
        duration=[120, 70],
        loop=0,
        comment=SECRET,
    )
    loop = gif.index(b"\x21\xff\x0bNETSCAPE2.0")
    xmp = gif_extension(0xFF, b"XMP DataXMP", XMP[:200], XMP[200:])
    private = gif_extension(0xFF, b"SECRETGN1.0", planted())
    text = gif_extension(0x01, bytes(12), planted("plain text"))
    gif = gif[:loop] + xmp + private + text + gif[loop:]
    terminator = gif.rindex(b"\x00\x3b")  # the last image's data ends, then the trailer
    hidden = bytes((len(planted()),)) + planted()
    return gif[:terminator] + hidden + gif[terminator:] + planted("after trailer")


CORPUS = {
    "metadata.jpg": jpeg_metadata,
    "icc.jpg": jpeg_icc,
    "bytes_in_scans.jpg": jpeg_bytes_in_scans,
    "trailing.jpg": jpeg_trailing,
    "metadata.png": png_metadata,
    "icc.png": png_icc,
    "hidden_data.png": png_hidden_data,
    "animated.png": apng_metadata,
    "metadata.webp": webp_metadata,
    "animated.webp": lambda: webp_metadata(animated=True),
    "malformed_exif.webp": webp_malformed_exif,
    "extensions.gif": gif_extensions,
}
WITH_PROFILE = {"icc.jpg", "icc.png", "metadata.webp", "animated.webp"}


def import_images(project, folder: Path, images: dict[str, bytes]) -> dict[str, Media]:
    """Imports one pair per image through ``import_pairs``; returns the media by file name."""
    for name, data in images.items():
        (folder / name).write_bytes(data)
    pairs = [image_pair(f"p{n}", name, name) for n, name in enumerate(images)]
    pairs_file = write_jsonl(folder / "pairs.jsonl", pairs)
    call_command("import_pairs", project.slug, str(pairs_file), "--media-root", str(folder))
    return {
        name: Media.objects.get(sha256=hashlib.sha256(data).hexdigest())
        for name, data in images.items()
    }


def fetch(client, project, media: Media):
    return client.get(media_path(slug=project.slug, sha256=media.sha256))


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def shown(data: bytes, *, profile: bool = False) -> tuple:
    """What a browser shows of ``data``: its size, each frame's RGBA pixels (oriented by EXIF,
    in sRGB through its profile when ``profile``), and an animation's durations and plays."""
    with Image.open(io.BytesIO(data)) as image:
        icc = image.info.get("icc_profile") if profile else None
        frames, durations = [], []
        for frame in ImageSequence.Iterator(image):
            frame.load()
            durations.append(round(frame.info.get("duration", 0)))
            if icc:
                rgb = ImageCms.profileToProfile(
                    frame.convert("RGB"),
                    ImageCms.ImageCmsProfile(io.BytesIO(icc)),
                    ImageCms.createProfile("sRGB"),
                )
                if frame.mode in ("RGBA", "P"):
                    rgb.putalpha(frame.convert("RGBA").getchannel("A"))
                frame = rgb
            oriented = ImageOps.exif_transpose(frame.convert("RGBA"))
            frames.append((oriented.size, oriented.tobytes()))
            if image.format in ("JPEG", "MPO"):
                break
        if len(frames) == 1:
            return frames, None
        loop = image.info.get("loop")
        if image.format == "GIF":
            loop = 1 if loop is None else 0 if loop == 0 else loop + 1
        return frames, (durations, loop)


def png_chunks(data: bytes) -> list[bytes]:
    """The chunk types of a PNG, failing on anything after IEND."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    kinds, pos = [], 8
    while pos < len(data):
        kinds.append(data[pos + 4 : pos + 8])
        pos += 12 + int.from_bytes(data[pos : pos + 4], "big")
    assert kinds[-1] == b"IEND"
    assert pos == len(data)
    return kinds


@pytest.fixture(scope="module")
def corpus() -> dict[str, bytes]:
    originals = {name: make() for name, make in CORPUS.items()}
    for data in originals.values():
        with Image.open(io.BytesIO(data)) as image:
            image.load()  # each is an image Pillow reads whole
            profile = image.info.get("icc_profile") or b""  # compressed in a PNG
        assert SECRET.encode() in data + profile  # and carries the name
    return originals


@pytest.fixture
def imported(project, tmp_path, corpus):
    return import_images(project, tmp_path, corpus)


@pytest.mark.parametrize("name", list(CORPUS))
def test_annotator_gets_a_rebuilt_png_without_the_name_and_the_same_pixels(
    client_for, alice, project, corpus, imported, name
):
    original, stored = corpus[name], imported[name]
    response = fetch(client_for(alice), project, stored)
    assert response.status_code == 200
    served = body(response)

    assert_no_planted(served, SECRET)
    assert set(png_chunks(served)) <= SERVED_CHUNKS
    assert shown(served) == shown(original, profile=name in WITH_PROFILE)
    assert response["Content-Type"] == "image/png"
    assert response["ETag"] == f'"{media_etag(hashlib.sha256(served).hexdigest())}"'
    assert (stored.strip_result, stored.served_format) == (Media.StripResult.REBUILT, "PNG")
    assert stored.served_sha256 == hashlib.sha256(served).hexdigest() != stored.sha256
    assert (stored.width, stored.height) == Image.open(io.BytesIO(served)).size
    # The original stays stored, byte for byte, under its own hash (for releases and judges).
    assert (Path(settings.MEDIA_ROOT) / stored.relative_path).read_bytes() == original
    assert (Path(settings.MEDIA_ROOT) / stored.served_relative_path).read_bytes() == served
    # Rebuilding a served copy gives the same bytes: the rebuild is deterministic.
    assert served_copy_make(data=served).data == served


def test_animations_keep_their_frames_durations_and_loop(client_for, alice, project, imported):
    client = client_for(alice)
    for name, frames, plays in (
        ("animated.png", 3, 3),
        ("animated.webp", 2, 0),
        ("extensions.gif", 2, 0),
    ):
        served = body(fetch(client, project, imported[name]))
        assert {b"acTL", b"fcTL", b"fdAT"} <= set(png_chunks(served))
        with Image.open(io.BytesIO(served)) as image:
            assert (image.n_frames, image.info["loop"]) == (frames, plays)


@pytest.mark.parametrize("persona", ["carol", "dave"])
def test_curators_and_researchers_get_the_rebuilt_copy(
    request, client_for, project, imported, persona
):
    client = client_for(request.getfixturevalue(persona))
    for stored in imported.values():
        assert_no_planted(body(fetch(client, project, stored)), SECRET)


def test_api_token_gets_the_rebuilt_copy(api_for, alice, project, imported):
    assert_no_planted(body(fetch(api_for(alice), project, imported["metadata.png"])), SECRET)


def test_outsider_still_gets_404(client_for, eve, project, imported):
    for stored in imported.values():
        assert fetch(client_for(eve), project, stored).status_code == 404


def test_etag_names_the_served_copy_opaquely(client_for, alice, project, imported):
    stored = imported["metadata.jpg"]
    client = client_for(alice)
    tag = f'"{media_etag(stored.served_sha256)}"'
    assert fetch(client, project, stored)["ETag"] == tag
    url = media_path(slug=project.slug, sha256=stored.sha256)
    assert client.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 304
    # The original's hash is another entity: a client holding it gets the served copy.
    assert client.get(url, HTTP_IF_NONE_MATCH=f'"{stored.sha256}"').status_code == 200


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_exif_orientation_is_applied_to_the_pixels(
    client_for, alice, project, tmp_path, orientation
):
    """Browsers turn an image by its EXIF orientation: the served copy is turned already, and
    its size (recorded on the row) is the turned one."""
    original = encode(picture(), "JPEG", exif=secret_exif(orientation=orientation))
    stored = import_images(project, tmp_path, {"rotated.jpg": original})["rotated.jpg"]
    served = body(fetch(client_for(alice), project, stored))
    assert_no_planted(served, SECRET)
    with Image.open(io.BytesIO(served)) as image:
        assert not image.getexif()
        turned = orientation != 3
        assert (stored.width, stored.height) == image.size == ((48, 64) if turned else (64, 48))
    assert shown(served) == shown(original)


def test_a_profile_is_applied_and_not_kept(client_for, alice, project, corpus, imported):
    """The profile's colours are converted to sRGB; no profile (and none of its text) goes out."""
    served = body(fetch(client_for(alice), project, imported["icc.jpg"]))
    with Image.open(io.BytesIO(served)) as image:
        assert "icc_profile" not in image.info
        plain = image.convert("RGB").tobytes()
    with Image.open(io.BytesIO(corpus["icc.jpg"])) as image:
        assert plain != image.convert("RGB").tobytes()  # the profile made a difference


def test_a_webp_with_a_malformed_exif_chunk_is_never_served_as_it_came(
    client_for, alice, project, corpus, imported
):
    """Failure 5 as the tester replayed it: the copy is rebuilt, not the original bytes."""
    stored = imported["malformed_exif.webp"]
    served = body(fetch(client_for(alice), project, stored))
    assert served != corpus["malformed_exif.webp"]
    assert served.startswith(b"\x89PNG")
    assert_no_planted(served, SECRET)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (jpeg_metadata()[:1200], "corrupt image"),
        (png_metadata()[:-40], "corrupt image"),
        (webp_metadata()[:300], "corrupt image"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8X" + planted(), "refused as a decompression bomb"),
        (b"GIF89a" + planted(), "not an image Arbiter accepts"),
    ],
    ids=["truncated-jpeg", "png-without-its-end", "truncated-webp", "vp8x-of-text", "gif-of-text"],
)
def test_an_image_that_cannot_be_rebuilt_is_refused_with_its_reason(tmp_path, data, reason):
    (tmp_path / "bad.img").write_bytes(data)
    with pytest.raises(MediaError, match=rf"^image 'bad.img' refused: {reason}"):
        MediaStore(media_root=tmp_path).resolve("bad.img")


# --- media imported before served copies were rebuilt -----------------------------------------


def legacy_media(project, data: bytes, image_format: str = "JPEG", **served) -> Media:
    """Media stored as earlier versions did: no served copy, or (``served``) the columns an
    earlier stripper wrote."""
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    media = Media.objects.create(
        sha256=hashlib.sha256(data).hexdigest(),
        format=image_format,
        width=width,
        height=height,
        size_bytes=len(data),
        **served,
    )
    path = Path(settings.MEDIA_ROOT) / media.relative_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    ProjectMedia.objects.create(project=project, media=media)
    return media


def test_strip_media_metadata_rebuilds_older_media(project, capsys):
    original = jpeg_metadata()
    media = legacy_media(project, original)
    failed = legacy_media(
        project,
        webp_malformed_exif(),
        "WEBP",
        served_sha256=hashlib.sha256(webp_malformed_exif()).hexdigest(),
        strip_result=Media.StripResult.FAILED,
    )
    call_command("strip_media_metadata")
    assert "Served copies rebuilt: 2" in capsys.readouterr().out
    for row in (media, failed):
        row.refresh_from_db()
        assert (row.strip_result, row.served_format) == (Media.StripResult.REBUILT, "PNG")
        assert_no_planted((Path(settings.MEDIA_ROOT) / row.served_relative_path).read_bytes())
    assert (Path(settings.MEDIA_ROOT) / media.relative_path).read_bytes() == original
    call_command("strip_media_metadata")  # nothing left to do
    assert "Served copies rebuilt: 0" in capsys.readouterr().out
    call_command("strip_media_metadata", "--all")
    assert "Served copies rebuilt: 2" in capsys.readouterr().out


def test_strip_media_metadata_reports_missing_files_and_refusals(project, capsys):
    media = legacy_media(project, jpeg_metadata())
    (Path(settings.MEDIA_ROOT) / media.relative_path).unlink()
    broken = legacy_media(project, jpeg_icc())
    path = Path(settings.MEDIA_ROOT) / broken.relative_path
    path.write_bytes(path.read_bytes()[:1500])
    with pytest.raises(Exception, match="1 media missing from storage"):
        call_command("strip_media_metadata")
    out = capsys.readouterr().out
    assert f"1 files cannot be rebuilt and are not served:\n  {broken.sha256}: corrupt" in out


def test_an_older_copy_is_rebuilt_on_first_request_never_served_as_it_was(
    client_for, alice, project
):
    """A row an earlier version marked failed served its original: it is rebuilt instead."""
    original = webp_malformed_exif()
    media = legacy_media(
        project,
        original,
        "WEBP",
        served_sha256=hashlib.sha256(original).hexdigest(),
        strip_result=Media.StripResult.FAILED,
    )
    served = body(fetch(client_for(alice), project, media))
    assert_no_planted(served, SECRET)
    media.refresh_from_db()
    assert media.served_sha256 == hashlib.sha256(served).hexdigest()
    assert media.strip_result == Media.StripResult.REBUILT


def test_an_older_image_that_cannot_be_rebuilt_is_not_served(client_for, alice, project):
    data = jpeg_metadata()
    media = legacy_media(
        project, data, served_sha256=hashlib.sha256(data).hexdigest(), strip_result="failed"
    )
    path = Path(settings.MEDIA_ROOT) / media.relative_path
    path.write_bytes(data[:1500])
    assert fetch(client_for(alice), project, media).status_code == 404
    media.refresh_from_db()
    assert (media.served_sha256, media.strip_result) == (None, None)


def test_releases_hold_the_rebuilt_copies(project, alice, bob, carol, dave, monkeypatch):
    from tests.annotation.releases import conftest as release_support

    def image_with_profile(project, colour):
        return make_image(project, colour, image_format="JPEG", icc_profile=secret_profile())

    monkeypatch.setattr(release_support, "image_with_exif", image_with_profile)
    release_support.releasable_project(project, alice, bob, carol)
    release = release_support.built_release(project, dave)
    images = list((release.folder / "images").iterdir())
    assert images
    for path in images:
        data = path.read_bytes()
        assert_no_planted(data, SECRET)
        assert path.suffix == ".png"
        media = Media.objects.get(served_sha256=path.stem)
        assert (Path(settings.MEDIA_ROOT) / media.served_relative_path).read_bytes() == data
        assert SECRET.encode() in (Path(settings.MEDIA_ROOT) / media.relative_path).read_bytes()


def test_served_copy_make_refuses_what_it_cannot_decode():
    with pytest.raises(MediaError, match="corrupt image"):
        served_copy_make(data=jpeg_metadata()[:1500])


def test_a_video_poster_passes_through_the_same_rebuild(project, tmp_path):
    """A poster is made by Arbiter's own code, and rebuilt like any image all the same."""
    from tests.annotation.media.conftest import video_write
    from tests.annotation.media.test_import_av import import_media, media_pair

    video_write(tmp_path / "a.mp4")
    video_write(tmp_path / "b.mp4", frames=5)
    import_media(project, tmp_path, [media_pair("v1", "video", "a.mp4", "b.mp4")])
    for video in Media.objects.filter(kind=Media.Kind.VIDEO):
        poster = Media.objects.get(sha256=video.poster_sha256)
        assert (poster.strip_result, poster.served_format) == (Media.StripResult.REBUILT, "PNG")
        served = (Path(settings.MEDIA_ROOT) / poster.served_relative_path).read_bytes()
        assert served_copy_make(data=served).data == served
