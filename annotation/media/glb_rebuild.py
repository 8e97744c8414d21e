"""The copy of a binary glTF model the app serves and blinded releases ship: a new file written
from a checked model (``glb.glb_inspect``), never the original with parts taken out
(docs/import-format.md, "What the served copy of a 3D model keeps").

It holds the default scene only: the nodes under it, their meshes, and the accessors,
materials, textures, samplers and images those use, renumbered in the order a walk of the scene
meets them, so that rebuilding a rebuilt model gives the same bytes. Its ``asset`` is
``{"version": "2.0"}``; it has no ``extras``, extensions, names or unknown keys, since the
checked document holds none. Each accessor's elements are copied into a buffer view of their
own, tightly packed (vertex attributes padded to 4 bytes, as glTF asks), so the BIN chunk holds
the bytes the model reads and nothing else: no slack after the last view, between interleaved
elements or inside a view no accessor reads. Each texture is decoded (its pixel count checked
against ``ARBITER_MAX_IMAGE_PIXELS`` first) and written anew as a PNG of its pixels without
ancillary chunks; one that cannot be decoded refuses the model.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from django.conf import settings
from PIL import Image

from annotation.media.glb import GlbError, GlbInfo, glb_pack
from annotation.media.glb_json import element_bytes

# All the textures of one model together, in multiples of ARBITER_MAX_IMAGE_PIXELS.
TEXTURE_PIXELS_FACTOR = 4
_ARRAY_BUFFER, _ELEMENT_ARRAY_BUFFER = 34962, 34963
_PIL_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG"}
# Decoded modes written as they are; the others are converted to one of them first.
_KEPT_MODES = ("RGB", "RGBA", "L", "LA")
_CONVERTED_MODES = {"1": "L", "PA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB", "LAB": "RGB"}


class _Numbering:
    """New indices for the items of one list, given in the order they are first asked for."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self._new: dict[int, int] = {}

    def __call__(self, old: int) -> int:
        if old not in self._new:
            self._new[old] = len(self.order)
            self.order.append(old)
        return self._new[old]


def glb_rebuild(info: GlbInfo) -> bytes:
    """The served copy of a checked model; raises ``GlbError`` when a texture cannot be
    decoded or the textures are too large."""
    document = info.document
    nodes, meshes, materials = _Numbering(), _Numbering(), _Numbering()
    accessors, textures, samplers, images = _Numbering(), _Numbering(), _Numbering(), _Numbering()
    for node, _ in info.scene_nodes:
        nodes(node)
    roots = [nodes(node) for node, parent in info.scene_nodes if parent == -1]
    new_nodes = [_node(document["nodes"][old], nodes, meshes) for old in nodes.order]
    attribute_accessors: set[int] = set()
    new_meshes = []
    for old in meshes.order:
        primitives = []
        for primitive in document["meshes"][old]["primitives"]:
            attributes = {name: accessors(index) for name, index in primitive["attributes"].items()}
            attribute_accessors.update(primitive["attributes"].values())
            kept: dict[str, Any] = {"attributes": attributes}
            if "indices" in primitive:
                kept["indices"] = accessors(primitive["indices"])
            if "material" in primitive:
                kept["material"] = materials(primitive["material"])
            if "mode" in primitive:
                kept["mode"] = primitive["mode"]
            primitives.append(kept)
        new_meshes.append({"primitives": primitives})
    new_materials = [_material(document["materials"][old], textures) for old in materials.order]
    new_textures = []
    for old in textures.order:
        texture = document["textures"][old]
        kept = {"source": images(texture["source"])}
        if "sampler" in texture:
            kept["sampler"] = samplers(texture["sampler"])
        new_textures.append(kept)
    new_samplers = [dict(document["samplers"][old]) for old in samplers.order]

    blobs: list[bytes] = []
    views: list[dict] = []
    new_accessors = []
    for old in accessors.order:
        accessor = document["accessors"][old]
        kept = {key: value for key, value in accessor.items()
                if key not in ("bufferView", "byteOffset")}  # fmt: skip
        if "bufferView" in accessor:
            is_attribute = old in attribute_accessors
            data, stride = _accessor_bytes(info, accessor, padded=is_attribute)
            view: dict[str, Any] = {"buffer": 0, "byteLength": len(data)}
            if stride is not None:
                view["byteStride"] = stride
            view["target"] = _ARRAY_BUFFER if is_attribute else _ELEMENT_ARRAY_BUFFER
            kept = {"bufferView": _add_view(blobs, views, view, data), **kept}
        new_accessors.append(kept)
    new_images = []
    for png in _textures_png(info, images.order):
        view_index = _add_view(blobs, views, {"buffer": 0, "byteLength": len(png)}, png)
        new_images.append({"bufferView": view_index, "mimeType": "image/png"})

    scene: dict[str, Any] = {"nodes": roots} if roots else {}
    rebuilt: dict[str, Any] = {"asset": {"version": "2.0"}, "scene": 0, "scenes": [scene]}
    binary = b"".join(blobs)
    for key, items in (
        ("nodes", new_nodes), ("meshes", new_meshes), ("materials", new_materials),
        ("textures", new_textures), ("samplers", new_samplers), ("images", new_images),
        ("accessors", new_accessors), ("bufferViews", views),
        ("buffers", [{"byteLength": len(binary)}] if binary else []),
    ):  # fmt: skip
        if items:
            rebuilt[key] = items
    json_chunk = json.dumps(rebuilt, separators=(",", ":"), allow_nan=False).encode("ascii")
    return glb_pack(json_chunk, binary)


def _node(node: dict, nodes: _Numbering, meshes: _Numbering) -> dict:
    kept: dict[str, Any] = {}
    if node["children"]:
        kept["children"] = [nodes(child) for child in node["children"]]
    if "mesh" in node:
        kept["mesh"] = meshes(node["mesh"])
    for key in ("matrix", "translation", "rotation", "scale"):
        if key in node:
            kept[key] = node[key]
    return kept


def _material(material: dict, textures: _Numbering) -> dict:
    """The material with its textures renumbered (every other field is a number or a word
    the checked document holds already)."""

    def renumbered(info: dict) -> dict:
        return {**info, "index": textures(info["index"])}

    kept: dict[str, Any] = {}
    for key, value in material.items():
        if key == "pbrMetallicRoughness":
            value = {
                name: renumbered(item) if name.endswith("Texture") else item
                for name, item in value.items()
            }
        elif key.endswith("Texture"):
            value = renumbered(value)
        kept[key] = value
    return kept


def _add_view(blobs: list[bytes], views: list[dict], view: dict, data: bytes) -> int:
    """Appends ``data`` to the BIN chunk at the next 4-byte boundary, zero padded, and its
    buffer view; returns the view's index."""
    offset = sum(len(blob) for blob in blobs)
    blobs.append(data + b"\x00" * (-len(data) % 4))
    views.append({"buffer": 0, "byteOffset": offset, **view})
    return len(views) - 1


def _accessor_bytes(info: GlbInfo, accessor: dict, *, padded: bool) -> tuple[bytes, int | None]:
    """The accessor's elements, one after the other, each padded with zeros to 4 bytes when
    it is a vertex attribute; and the byteStride that padding needs (None when none). The
    bounds were checked by ``glb_inspect``."""
    view = info.document["bufferViews"][accessor["bufferView"]]
    element = element_bytes(accessor)
    stride = view.get("byteStride", element)
    start = view["byteOffset"] + accessor["byteOffset"]
    count = accessor["count"]
    out_stride = -(-element // 4) * 4 if padded else element
    if stride == element == out_stride:
        return info.bin_chunk[start : start + count * element], None
    source = np.ndarray(
        (count, element), dtype=np.uint8, buffer=info.bin_chunk, offset=start,
        strides=(stride, 1),
    )  # fmt: skip
    packed = np.zeros((count, out_stride), dtype=np.uint8)
    packed[:, :element] = source
    return packed.tobytes(), (out_stride if out_stride != element else None)


def _textures_png(info: GlbInfo, order: list[int]) -> list[bytes]:
    """Each image of ``order`` decoded and written anew as a PNG of its pixels alone; every
    pixel count is checked against the limits before any image is decoded."""
    limit = settings.ARBITER_MAX_IMAGE_PIXELS
    total_limit = TEXTURE_PIXELS_FACTOR * limit
    sources = []
    total = 0
    for old in order:
        image = info.document["images"][old]
        view = info.document["bufferViews"][image["bufferView"]]
        data = info.bin_chunk[view["byteOffset"] : view["byteOffset"] + view["byteLength"]]
        where = f"images[{old}]"
        with (
            _decoding(where, image["mimeType"]),
            Image.open(io.BytesIO(data), formats=[_PIL_FORMATS[image["mimeType"]]]) as opened,
        ):
            width, height = opened.size
        if width * height > limit:
            raise GlbError(f"{where}: a {width}x{height} texture is {width * height:,} pixels, "
                           f"more than the limit of {limit:,}")  # fmt: skip
        total += width * height
        if total > total_limit:
            raise GlbError(f"{where}: the model's textures together are more than "
                           f"{total_limit:,} pixels")  # fmt: skip
        sources.append((where, image["mimeType"], data))
    return [_png(where, mime, data) for where, mime, data in sources]


def _png(where: str, mime: str, data: bytes) -> bytes:
    with (
        _decoding(where, mime),
        Image.open(io.BytesIO(data), formats=[_PIL_FORMATS[mime]]) as opened,
    ):
        opened.load()
        decoded: Image.Image = opened
        if decoded.mode == "P":
            decoded = decoded.convert("RGBA" if "transparency" in decoded.info else "RGB")
        elif decoded.mode in _CONVERTED_MODES:
            decoded = decoded.convert(_CONVERTED_MODES[decoded.mode])
        if decoded.mode not in _KEPT_MODES:
            raise GlbError(f"{where}: a texture of {decoded.mode} pixels is not supported; "
                           "export it as 8-bit RGB, RGBA or grey")  # fmt: skip
        # A new image of the pixels alone: nothing of the file's own (text, profile, EXIF,
        # gamma) reaches the encoder.
        pixels = Image.frombytes(decoded.mode, decoded.size, decoded.tobytes())
    out = io.BytesIO()
    pixels.save(out, format="PNG", compress_level=6)
    return out.getvalue()


@contextmanager
def _decoding(where: str, mime: str) -> Iterator[None]:
    """Turns whatever Pillow raises on a hostile image into a ``GlbError`` naming it."""
    try:
        yield
    except GlbError:
        raise
    except Image.DecompressionBombError as exc:
        raise GlbError(f"{where}: refused as a decompression bomb: {exc}") from None
    except Exception as exc:
        # Pillow's decoders raise OSError, ValueError, SyntaxError, EOFError, struct.error
        # and more on corrupt input; any of them means the texture cannot be shown.
        raise GlbError(
            f"{where}: the texture cannot be decoded as {mime}: {exc or type(exc).__name__}"
        ) from None
