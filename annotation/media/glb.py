"""Binary glTF 2.0 (``.glb``) models for an import: the container checked with bounds on
every length (header, JSON chunk, BIN chunk, buffer views, accessors), and the copy the app
serves, which drops what may name the generator: ``asset.generator`` and ``asset.copyright``,
every ``extras`` and every ``name``. The BIN chunk (geometry, textures) is kept byte for byte;
only the JSON chunk is rewritten. Models whose buffers live in other files (a ``uri``) are
refused: one file is served, and it must be whole.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any, TypeGuard

from django.conf import settings

_MAGIC = b"glTF"
_VERSION = 2
_HEADER_BYTES = 12
_CHUNK_HEADER_BYTES = 8
_JSON_CHUNK = 0x4E4F534A
_BIN_CHUNK = 0x004E4942
# Keys dropped from the served copy: wherever they stand (``extras``, ``name``), or in
# ``asset`` (``generator``, ``copyright``).
_DROPPED_EVERYWHERE = {"extras", "name"}
_DROPPED_FROM_ASSET = {"generator", "copyright"}
_SELF_CONTAINED = "give a self-contained .glb"
_COMPONENT_BYTES = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}
_TYPE_COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}


class GlbError(Exception):
    """The model was refused; the message says why."""


@dataclass(frozen=True)
class GlbInfo:
    sha256: str
    size_bytes: int
    document: dict
    bin_chunk: bytes


def glb_inspect(data: bytes) -> GlbInfo:
    """Parses a binary glTF and checks every length and offset in it; raises ``GlbError``."""
    limit = settings.ARBITER_MAX_MODEL3D_BYTES
    if not data:
        raise GlbError("the file is empty")
    if len(data) > limit:
        raise GlbError(f"the model is larger than {limit:,} bytes")
    if len(data) < _HEADER_BYTES or data[:4] != _MAGIC:
        raise GlbError("not a binary glTF (.glb) file: no 'glTF' header")
    version, length = struct.unpack_from("<II", data, 4)
    if version != _VERSION:
        raise GlbError(f"glTF version {version} is not supported (only 2)")
    if length != len(data):
        raise GlbError(f"truncated or padded: the header says {length:,} bytes, the file has "
                       f"{len(data):,}")  # fmt: skip
    chunks = _chunks(data)
    if not chunks or chunks[0][0] != _JSON_CHUNK:
        raise GlbError("the first chunk is not the JSON chunk")
    try:
        document = json.loads(chunks[0][1].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise GlbError(f"the JSON chunk is not valid JSON: {exc}") from None
    bin_chunk = b""
    if len(chunks) > 1 and chunks[1][0] == _BIN_CHUNK:
        bin_chunk = chunks[1][1]
    _check_document(document, bin_chunk)
    return GlbInfo(
        sha256=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
        document=document,
        bin_chunk=bin_chunk,
    )


def _chunks(data: bytes) -> list[tuple[int, bytes]]:
    chunks = []
    pos = _HEADER_BYTES
    while pos < len(data):
        if pos + _CHUNK_HEADER_BYTES > len(data):
            raise GlbError(f"truncated chunk header at byte {pos}")
        size, kind = struct.unpack_from("<II", data, pos)
        start = pos + _CHUNK_HEADER_BYTES
        if size % 4 or start + size > len(data):
            raise GlbError(f"the chunk at byte {pos} claims {size:,} bytes, past the file's end")
        chunks.append((kind, data[start : start + size]))
        pos = start + size
    return chunks


def _check_document(document: Any, bin_chunk: bytes) -> None:
    if not isinstance(document, dict):
        raise GlbError("the JSON chunk is not an object")
    asset = document.get("asset")
    if not isinstance(asset, dict) or not str(asset.get("version", "")).startswith("2."):
        raise GlbError("asset.version must be 2.x")
    buffers = _list(document, "buffers")
    for index, buffer in enumerate(buffers):
        if "uri" in buffer:
            raise GlbError(
                f"buffers[{index}] points to another file (uri): give a self-contained .glb"
            )
        if index > 0 or not isinstance(buffer.get("byteLength"), int):
            raise GlbError(f"buffers[{index}] must be the BIN chunk, with an integer byteLength")
        if not 0 <= buffer["byteLength"] <= len(bin_chunk):
            raise GlbError(f"buffers[{index}].byteLength is past the end of the BIN chunk")
    for index, image in enumerate(_list(document, "images")):
        if "uri" in image:
            raise GlbError(
                f"images[{index}] points to another file (uri): give a self-contained .glb"
            )
    views = _list(document, "bufferViews")
    for index, view in enumerate(views):
        offset, length = view.get("byteOffset", 0), view.get("byteLength")
        if view.get("buffer") != 0 or not buffers:
            raise GlbError(f"bufferViews[{index}] names no buffer of this file")
        if not (
            _natural(offset) and _natural(length) and offset + length <= buffers[0]["byteLength"]
        ):
            raise GlbError(f"bufferViews[{index}] lies outside the BIN chunk")
    for index, accessor in enumerate(_list(document, "accessors")):
        _check_accessor(index, accessor, views)


def _check_accessor(index: int, accessor: dict[str, Any], views: list[dict[str, Any]]) -> None:
    if "bufferView" not in accessor:
        return  # all zeros: nothing to read
    view_index = accessor["bufferView"]
    if not (_natural(view_index) and view_index < len(views)):
        raise GlbError(f"accessors[{index}] names a buffer view that does not exist")
    component_type = accessor.get("componentType")
    width = _COMPONENT_BYTES.get(component_type, 0) if type(component_type) is int else 0
    components = _TYPE_COMPONENTS.get(str(accessor.get("type")), 0)
    count, offset = accessor.get("count"), accessor.get("byteOffset", 0)
    if not (width and components and _natural(count) and count > 0 and _natural(offset)):
        raise GlbError(f"accessors[{index}] has a wrong type, component type or count")
    view = views[view_index]
    element = width * components
    stride = view.get("byteStride") or element
    if not _natural(stride):
        raise GlbError(f"bufferViews[{view_index}] has a wrong byteStride")
    if offset + stride * (count - 1) + element > view["byteLength"]:
        raise GlbError(f"accessors[{index}] reads past the end of its buffer view")


def _list(document: dict, key: str) -> list[dict[str, Any]]:
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise GlbError(f"{key} must be a list of objects")
    return value


def _natural(value: Any) -> TypeGuard[int]:
    return type(value) is int and value >= 0


def glb_strip(info: GlbInfo) -> bytes:
    """The served copy: the JSON chunk without generator, copyright, extras and names; the
    BIN chunk unchanged. Raises ``GlbError`` for a JSON chunk nested too deeply to rewrite."""
    try:
        document = _without_identifying_keys(info.document)
    except RecursionError:
        raise GlbError("the JSON chunk is nested too deeply") from None
    assert isinstance(document, dict)
    for key in _DROPPED_FROM_ASSET:
        document["asset"].pop(key, None)
    return glb_pack(json.dumps(document, separators=(",", ":")).encode(), info.bin_chunk)


def _without_identifying_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _without_identifying_keys(item)
            for key, item in value.items()
            if key not in _DROPPED_EVERYWHERE
        }
    if isinstance(value, list):
        return [_without_identifying_keys(item) for item in value]
    return value


def glb_pack(json_chunk: bytes, bin_chunk: bytes) -> bytes:
    """A binary glTF of these chunks, each padded to 4 bytes as the format requires."""
    json_chunk += b" " * (-len(json_chunk) % 4)
    chunks = struct.pack("<II", len(json_chunk), _JSON_CHUNK) + json_chunk
    if bin_chunk:
        bin_chunk += b"\x00" * (-len(bin_chunk) % 4)
        chunks += struct.pack("<II", len(bin_chunk), _BIN_CHUNK) + bin_chunk
    return struct.pack("<4sII", _MAGIC, _VERSION, _HEADER_BYTES + len(chunks)) + chunks
