"""The served copy of a binary glTF model, written anew by ``glb_rebuild`` from the allowlisted
document (docs/import-format.md, "What the served copy of a 3D model keeps"): for each place a
generator's or a model's name can hide in a ``.glb``, a model with the name planted there, and
the check that no served byte holds it (ASCII, UTF-16, base64), that the copy is itself a valid
model, that rebuilding it again changes nothing, and that it shows what the original shows."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import struct
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from annotation.core.media_keys import media_path
from annotation.imports.errors import ImportFailed
from annotation.media.glb import GlbError, glb_inspect
from annotation.media.glb_rebuild import glb_rebuild
from annotation.media.glb_render import glb_render_views
from annotation.models import Media, Pair
from tests.annotation.media.conftest import (
    CUBE_POSITIONS,
    PLANTED,
    assert_no_planted,
    glb_bytes,
    glb_pack,
    glb_split,
    mesh_glb,
    textured_glb,
)
from tests.annotation.media.test_import_av import import_media, media_pair, original_path

NAME = PLANTED.encode()
# Chunks a PNG written from pixels alone may hold.
_PIXEL_CHUNKS = {b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND"}


def _base() -> bytes:
    colours = np.where(CUBE_POSITIONS[:, 2:] > 0, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0])
    return mesh_glb(base_colour=[1, 0.5, 0.5, 1], colours=colours,
                    node={"translation": [0.1, 0, 0]})  # fmt: skip


def _objects(value) -> list[dict]:
    """Every JSON object in ``value``, ``value`` itself included."""
    found = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _everywhere(key: str, value) -> Callable[[dict, bytes], tuple[dict, bytes]]:
    def plant(document: dict, binary: bytes) -> tuple[dict, bytes]:
        for item in _objects(document):
            item[key] = copy.deepcopy(value)
        return document, binary

    return plant


def _append(binary: bytes, data: bytes) -> tuple[bytes, int]:
    """``binary`` with ``data`` after it at a 4-byte boundary; and where ``data`` starts."""
    binary += b"\x00" * (-len(binary) % 4)
    return binary + data, len(binary)


def _with_view(document: dict, binary: bytes, data: bytes, **view) -> tuple[bytes, int]:
    """Appends ``data`` and a buffer view of it; returns the BIN chunk and the view's index."""
    binary, offset = _append(binary, data)
    document["bufferViews"].append(
        {"buffer": 0, "byteOffset": offset, "byteLength": len(data), **view}
    )
    document["buffers"][0]["byteLength"] = len(binary)
    return binary, len(document["bufferViews"]) - 1


def _name_accessor(document: dict, binary: bytes, kind: str = "SCALAR") -> tuple[bytes, int]:
    """An accessor whose bytes are the planted name (unsigned bytes)."""
    data = NAME + b"\x00" * (-len(NAME) % 12)
    binary, view = _with_view(document, binary, data)
    width = {"SCALAR": 1, "VEC3": 3, "VEC2": 2}[kind]
    document["accessors"].append(
        {"bufferView": view, "componentType": 5121, "count": len(data) // width, "type": kind}
    )
    return binary, len(document["accessors"]) - 1


def _png(**chunks) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", PLANTED)
    info.add_text("Comment", PLANTED, zip=True)  # zTXt
    info.add_itxt("Author", PLANTED, lang="en", tkey="Author", zip=False)
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(out, "PNG", pnginfo=info, **chunks)
    return out.getvalue()


def _jpeg() -> bytes:
    exif = Image.Exif()
    exif[0x010E] = PLANTED  # ImageDescription
    exif[0x0131] = PLANTED  # Software
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(
        out, "JPEG", exif=exif.tobytes(), comment=NAME, quality=95
    )
    return out.getvalue()


def _asset_fields(document: dict, binary: bytes) -> tuple[dict, bytes]:
    for key in ("generator", "copyright", "author", "description"):
        document["asset"][key] = PLANTED
    document["asset"]["model"] = {"id": PLANTED}
    return document, binary


def _unknown_top_level(document: dict, binary: bytes) -> tuple[dict, bytes]:
    document["model"] = PLANTED
    document["generatedBy"] = {"tool": [PLANTED]}
    return document, binary


def _xmp(document: dict, binary: bytes) -> tuple[dict, bytes]:
    packet = {"@context": {"dc": "http://purl.org/dc/elements/1.1/"},
              "dc:creator": {"@list": [PLANTED]}, "xmp:CreatorTool": PLANTED}  # fmt: skip
    document["extensionsUsed"] = ["KHR_xmp_json_ld"]
    document["extensions"] = {"KHR_xmp_json_ld": {"packets": [packet]}}
    for item in (document["asset"], document["nodes"][0], document["meshes"][0]):
        item["extensions"] = {"KHR_xmp_json_ld": {"packet": 0}}
    return document, binary


def _extensions_used(document: dict, binary: bytes) -> tuple[dict, bytes]:
    document["extensionsUsed"] = [f"EXT_{PLANTED}", "KHR_materials_emissive_strength"]
    document["materials"][0]["extensions"] = {
        "KHR_materials_emissive_strength": {"emissiveStrength": 2.0},
        f"EXT_{PLANTED}": {"by": PLANTED},
    }
    return document, binary


def _slack_after_last_view(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, _ = _append(binary, NAME)
    document["buffers"][0]["byteLength"] = len(binary)
    return document, binary


def _slack_past_the_buffer(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, _ = _append(binary, NAME)  # the buffer's byteLength stays short of it
    return document, binary


def _inside_a_view(document: dict, binary: bytes) -> tuple[dict, bytes]:
    view = document["bufferViews"][0]
    data = binary[view["byteOffset"] : view["byteOffset"] + view["byteLength"]]
    binary, offset = _append(binary, data + NAME)
    view.update(byteOffset=offset, byteLength=len(data) + len(NAME))
    document["buffers"][0]["byteLength"] = len(binary)
    return document, binary


def _between_interleaved_elements(document: dict, binary: bytes) -> tuple[dict, bytes]:
    view = document["bufferViews"][0]
    positions = binary[view["byteOffset"] : view["byteOffset"] + 12 * len(CUBE_POSITIONS)]
    gap = NAME + b"\x00" * (16 - len(NAME))
    data = b"".join(positions[i : i + 12] + gap for i in range(0, len(positions), 12))
    binary, offset = _append(binary, data)
    view.update(byteOffset=offset, byteLength=len(data), byteStride=28)
    document["buffers"][0]["byteLength"] = len(binary)
    return document, binary


def _unreferenced_view(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, _ = _with_view(document, binary, NAME)
    return document, binary


def _unreferenced_accessor_mesh_node_scene(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, accessor = _name_accessor(document, binary, "VEC3")
    document["meshes"].append({"primitives": [{"attributes": {"POSITION": accessor}}]})
    document["materials"].append({"pbrMetallicRoughness": {"baseColorFactor": [1, 1, 1, 1]},
                                  "extras": PLANTED})  # fmt: skip
    document["nodes"].append({"mesh": 1, "name": PLANTED})
    document["scenes"].append({"nodes": [1], "name": PLANTED})
    return document, binary


def _unreferenced_image(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, view = _with_view(document, binary, _png())
    document["images"] = [{"bufferView": view, "mimeType": "image/png", "name": PLANTED}]
    document["textures"] = [{"source": 0}]
    return document, binary


def _dropped_attributes(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, accessor = _name_accessor(document, binary)
    binary, joints = _name_accessor(document, binary, "VEC2")
    attributes = document["meshes"][0]["primitives"][0]["attributes"]
    attributes.update(_MODEL=accessor, JOINTS_0=joints, WEIGHTS_0=joints)
    return document, binary


def _morph_targets(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, accessor = _name_accessor(document, binary, "VEC3")
    document["meshes"][0]["primitives"][0]["targets"] = [{"POSITION": accessor}]
    document["meshes"][0]["weights"] = [0.0]
    document["meshes"][0]["extras"] = {"targetNames": [PLANTED]}
    return document, binary


def _animations_skins_cameras(document: dict, binary: bytes) -> tuple[dict, bytes]:
    binary, accessor = _name_accessor(document, binary)
    document["animations"] = [{"name": PLANTED, "channels": [], "samplers": [
        {"input": accessor, "output": accessor}]}]  # fmt: skip
    document["skins"] = [{"name": PLANTED, "joints": [0], "inverseBindMatrices": accessor}]
    document["cameras"] = [{"name": PLANTED, "type": "perspective",
                            "perspective": {"yfov": 1, "znear": 0.1}}]  # fmt: skip
    document["nodes"][0].update(camera=0, skin=0, weights=[0.5])
    return document, binary


CORPUS: dict[str, Callable[[dict, bytes], tuple[dict, bytes]]] = {
    "asset fields": _asset_fields,
    "unknown top-level keys": _unknown_top_level,
    "an unknown key in every object": _everywhere(f"x-{PLANTED}", PLANTED),
    "extras in every object": _everywhere("extras", {"model": PLANTED, "n": [PLANTED]}),
    "a name in every object": _everywhere("name", PLANTED),
    "KHR_xmp_json_ld packets": _xmp,
    "extensionsUsed and material extensions": _extensions_used,
    "extensions in every object": _everywhere("extensions", {"EXT_planted": {"by": PLANTED}}),
    "slack after the last buffer view": _slack_after_last_view,
    "slack in the BIN chunk past the buffer": _slack_past_the_buffer,
    "bytes in a buffer view no accessor reads": _inside_a_view,
    "bytes between interleaved elements": _between_interleaved_elements,
    "an unreferenced buffer view": _unreferenced_view,
    "an unreferenced accessor, mesh, material, node and scene": (
        _unreferenced_accessor_mesh_node_scene
    ),
    "an unreferenced image": _unreferenced_image,
    "joints, weights and an application's own attribute": _dropped_attributes,
    "morph targets": _morph_targets,
    "animations, skins and cameras": _animations_skins_cameras,
}


def _planted(base: bytes, plant: Callable[[dict, bytes], tuple[dict, bytes]]) -> bytes:
    document, binary = plant(*glb_split(base))
    return glb_pack(json.dumps(document).encode(), binary)


def _holds_planted(data: bytes) -> bool:
    try:
        assert_no_planted(data)
    except AssertionError:
        return True
    return False


def _served(original: bytes) -> bytes:
    """The served copy, checked to be a valid model that rebuilds to itself."""
    served = glb_rebuild(glb_inspect(original))
    assert glb_rebuild(glb_inspect(served)) == served
    return served


def _png_chunks(data: bytes) -> list[bytes]:
    chunks, pos = [], 8
    while pos < len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        chunks.append(kind)
        pos += 12 + length
    return chunks


def _served_textures(served: bytes) -> list[bytes]:
    document, binary = glb_split(served)
    images = []
    for image in document.get("images", []):
        view = document["bufferViews"][image["bufferView"]]
        images.append(binary[view["byteOffset"] : view["byteOffset"] + view["byteLength"]])
        assert image == {"bufferView": image["bufferView"], "mimeType": "image/png"}
    return images


@pytest.mark.parametrize("case", list(CORPUS))
def test_a_name_planted_in_the_model_reaches_no_served_byte(case):
    original = _planted(_base(), CORPUS[case])
    assert _holds_planted(original)
    served = _served(original)
    assert_no_planted(served)
    document, _ = glb_split(served)
    assert document["asset"] == {"version": "2.0"}
    assert not {"extensionsUsed", "extensions", "extras"} & set(document)
    for item in _objects(document):
        assert not {"extras", "extensions", "name"} & set(item), item


@pytest.mark.parametrize(
    ("case", "image", "mime"),
    [
        ("tEXt, zTXt and iTXt chunks in a PNG texture", _png(), "image/png"),
        ("a PNG texture with bytes after IEND", _png() + NAME, "image/png"),
        ("a colour profile in a PNG texture", _png(icc_profile=b"\x00" * 40 + NAME), "image/png"),
        ("EXIF and a comment in a JPEG texture", _jpeg(), "image/jpeg"),
    ],
)
def test_a_texture_is_served_as_its_pixels_alone(case, image, mime):
    original = textured_glb(image=image, mime=mime)
    assert NAME in original
    served = _served(original)
    assert_no_planted(served)
    [texture] = _served_textures(served)
    assert set(_png_chunks(texture)) <= _PIXEL_CHUNKS
    with Image.open(io.BytesIO(image)) as source, Image.open(io.BytesIO(texture)) as copied:
        assert copied.format == "PNG"
        assert not copied.info
        assert np.array_equal(np.asarray(source.convert("RGB")), np.asarray(copied))


def _with_header_length(data: bytes) -> bytes:
    return data[:8] + struct.pack("<I", len(data)) + data[12:]


def _chunk_between(good: bytes) -> bytes:
    end = 20 + struct.unpack_from("<I", good, 12)[0]
    extra = struct.pack("<I4s", 16, b"XTRA") + NAME + b"\x00\x00"
    return _with_header_length(good[:end] + extra + good[end:])


def _trailing_bytes(good: bytes) -> bytes:
    return good + NAME + b"\x00\x00"


def _image_uri(document: dict, binary: bytes) -> tuple[dict, bytes]:
    document["images"] = [{"uri": "data:image/png;base64,iVBORw0KGgo" + PLANTED}]
    return document, binary


def _buffer_uri(document: dict, binary: bytes) -> tuple[dict, bytes]:
    document["buffers"].append({"uri": f"https://example.org/{PLANTED}.bin", "byteLength": 4})
    return document, binary


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (_chunk_between, "past the end of the BIN chunk"),
        (_trailing_bytes, "truncated or padded"),
        (lambda good: _planted(good, _image_uri), r"images\[0\]\.uri: points to another file"),
        (lambda good: _planted(good, _buffer_uri), r"buffers\[1\]\.uri: points to another file"),
    ],
    ids=["a chunk between JSON and BIN", "bytes after the file's length", "an image uri",
         "a buffer uri"],
)  # fmt: skip
def test_hiding_places_that_break_the_format_are_refused(make, reason):
    bad = make(_base())
    assert _holds_planted(bad)
    with pytest.raises(GlbError, match=reason):
        glb_inspect(bad)


def test_a_chunk_after_the_bin_chunk_is_not_served():
    bad = _with_header_length(_base() + struct.pack("<I4s", 16, b"XTRA") + NAME + b"\x00\x00")
    assert_no_planted(_served(bad))


def test_the_copy_shows_what_the_original_shows():
    for original in (_base(), _planted(_base(), _between_interleaved_elements)):
        served = _served(original)
        assert glb_render_views(glb_inspect(served), size=48) == glb_render_views(
            glb_inspect(_base()), size=48
        )
    document, _ = glb_split(_served(_base()))
    assert document["nodes"] == [{"mesh": 0, "translation": [0.1, 0.0, 0.0]}]
    [material] = document["materials"]
    assert material == {"pbrMetallicRoughness": {"baseColorFactor": [1.0, 0.5, 0.5, 1.0]}}


def test_the_copy_holds_the_default_scene_only_renumbered():
    document, binary = glb_split(_base())
    # A second scene first in the lists, its node and mesh before the default scene's.
    positions = document["accessors"][0]
    document["accessors"].append({**positions, "max": [9.0, 9.0, 9.0]})
    document["meshes"].insert(0, {"primitives": [{"attributes": {"POSITION": 3}}]})
    document["nodes"] = [
        {"mesh": 0},
        {"children": [2], "scale": [2, 2, 2]},
        {"mesh": 1, "translation": [0.1, 0, 0]},
    ]
    document["scenes"] = [{"nodes": [0]}, {"nodes": [1]}]
    document["scene"] = 1
    served = _served(glb_pack(json.dumps(document).encode(), binary))
    rebuilt, rebuilt_binary = glb_split(served)
    assert rebuilt["scenes"] == [{"nodes": [0]}]
    assert rebuilt["scene"] == 0
    assert rebuilt["nodes"] == [
        {"children": [1], "scale": [2.0, 2.0, 2.0]},
        {"mesh": 0, "translation": [0.1, 0.0, 0.0]},
    ]
    assert len(rebuilt["meshes"]) == 1
    # Numbered as the scene meets them: COLOR_0, POSITION (the first mesh's), the indices.
    maxima = [accessor.get("max") for accessor in rebuilt["accessors"]]
    assert maxima == [None, [0.5, 0.5, 0.5], None]
    # The BIN chunk holds the three accessors' bytes, nothing more.
    assert len(rebuilt_binary) == 8 * 12 + 8 * 12 + 36 * 2
    assert [view["byteLength"] for view in rebuilt["bufferViews"]] == [96, 96, 72]


def test_vertex_attributes_are_padded_to_four_bytes():
    document, binary = glb_split(mesh_glb(indices=None, positions=CUBE_POSITIONS[:3]))
    binary, view = _with_view(document, binary, bytes(range(9)))  # three RGB colours
    document["accessors"].append({"bufferView": view, "componentType": 5121, "count": 3,
                                  "type": "VEC3", "normalized": True})  # fmt: skip
    document["meshes"][0]["primitives"][0]["attributes"]["COLOR_0"] = 1
    served = _served(glb_pack(json.dumps(document).encode(), binary))
    rebuilt, rebuilt_binary = glb_split(served)
    colour_accessor = rebuilt["meshes"][0]["primitives"][0]["attributes"]["COLOR_0"]
    colours = rebuilt["bufferViews"][rebuilt["accessors"][colour_accessor]["bufferView"]]
    assert colours["byteStride"] == 4
    start = colours["byteOffset"]
    assert rebuilt_binary[start : start + 12] == bytes([0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 8, 0])


@pytest.mark.parametrize(
    ("where", "extension", "reason"),
    [
        ("primitive", "KHR_draco_mesh_compression", "compressed with Draco"),
        ("used", "EXT_meshopt_compression", "compressed with meshopt"),
        ("required", "KHR_materials_unlit", "it requires KHR_materials_unlit"),
    ],
)
def test_a_model_that_needs_an_extension_to_be_drawn_is_refused(where, extension, reason):
    document, binary = glb_split(_base())
    if where == "primitive":
        document["meshes"][0]["primitives"][0]["extensions"] = {extension: {"bufferView": 0}}
    else:
        document[f"extensions{where.title()}"] = [extension]
    with pytest.raises(GlbError, match=reason):
        glb_inspect(glb_pack(json.dumps(document).encode(), binary))


@pytest.mark.django_db
def test_the_imported_model_is_served_rebuilt(project, tmp_path, settings):
    planted = _planted(textured_glb(image=_png()), _everywhere("extras", PLANTED))
    (tmp_path / "a.glb").write_bytes(planted)
    (tmp_path / "b.glb").write_bytes(glb_bytes())
    import_media(project, tmp_path, [media_pair("m1", "model3d", "a.glb", "b.glb")])
    pair = Pair.objects.get(project=project)
    model = Media.objects.get(sha256=pair.response_a.content[0]["media"])
    assert original_path(model, settings).read_bytes() == planted
    assert model.strip_result == Media.StripResult.REBUILT
    served = (settings.MEDIA_ROOT / Media.path_for(model.served_sha256, "GLB")).read_bytes()
    assert served == glb_rebuild(glb_inspect(planted))
    assert_no_planted(served)


@pytest.mark.django_db
def test_an_undecodable_texture_is_a_line_error(project, tmp_path):
    (tmp_path / "good.glb").write_bytes(glb_bytes())
    (tmp_path / "bad.glb").write_bytes(textured_glb(image=_png()[:60]))
    pairs = [media_pair("ok", "model3d", "good.glb", "good.glb"),
             media_pair("bad", "model3d", "good.glb", "bad.glb")]  # fmt: skip
    with pytest.raises(ImportFailed) as refused:
        import_media(project, tmp_path, pairs)
    [issue] = refused.value.issues
    assert (issue.line, issue.field) == (2, "response_b.response_content[0]")
    assert "images[0]: the texture cannot be decoded as image/png" in issue.message


@pytest.mark.django_db
def test_a_model_stripped_by_an_earlier_version_is_rebuilt_when_first_served(
    client_for, alice, project, tmp_path, settings
):
    # An earlier version served a copy of the JSON without its generator: asset.author,
    # extras and slack bytes went out as they came.
    planted = _planted(textured_glb(image=_png()), _everywhere("extras", PLANTED))
    (tmp_path / "a.glb").write_bytes(planted)
    (tmp_path / "b.glb").write_bytes(glb_bytes())
    import_media(project, tmp_path, [media_pair("m1", "model3d", "a.glb", "b.glb")])
    model = Media.objects.get(sha256=hashlib.sha256(planted).hexdigest())
    old_copy = settings.MEDIA_ROOT / Media.path_for(model.sha256, "GLB")
    Media.objects.filter(pk=model.pk).update(
        served_sha256=model.sha256, strip_result=Media.StripResult.UNCHANGED
    )
    response = client_for(alice).get(media_path(slug=project.slug, sha256=model.sha256))
    assert response.status_code == 200
    served = b"".join(response.streaming_content)
    assert served == glb_rebuild(glb_inspect(planted))
    assert_no_planted(served)
    model.refresh_from_db()
    assert model.strip_result == Media.StripResult.REBUILT
    assert old_copy.read_bytes() == planted  # the original is kept for releases
