"""Binary glTF 2.0 (``.glb``) models as an import reads them: the container checked with
bounds on every length, and its JSON chunk read into a new document holding only allowlisted,
type-checked fields (docs/import-format.md, "What the served copy of a 3D model keeps").

Nothing the file says is taken on trust. A value of the wrong type or range is a ``GlbError``
naming its JSON path (``accessors[3].count: must be an integer of at least 1, got -5``), never
a ``TypeError`` or ``KeyError`` in the code that reads it later. Keys not on the allowlist
(``extras``, ``extensions``, names, anything unknown) are not copied. The node graph must be a
set of disjoint strict trees, as glTF 2.0 requires, at most ``MAX_NODE_DEPTH`` deep; a model
whose buffers or images are other files (a ``uri``), or which requires an extension, is
refused. Every count and size is checked before anything is allocated for it: each accessor
lies inside its buffer view, all accessors together describe at most
``ARBITER_MAX_MODEL3D_BYTES``, and the default scene draws at most
``ARBITER_MAX_MODEL3D_TRIANGLES`` triangles, counted from the accessors' counts (an accessor
without a buffer view, all zeros, counts like any other). The renderer (``glb_render``) and the
served copy (``glb_rebuild``) read the document as this module leaves it.

This module checks the container, the node graph and the scene's limits; the JSON chunk's
fields are read and type-checked by ``annotation.media.glb_json``.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import NoReturn

from django.conf import settings

from annotation.media.glb_json import (
    TRIANGLES,
    GlbError,
    GlbReader,
    item_index,
    primitive_triangles,
)

_MAGIC = b"glTF"
_VERSION = 2
_HEADER_BYTES = 12
_CHUNK_HEADER_BYTES = 8
_JSON_CHUNK = 0x4E4F534A
_BIN_CHUNK = 0x004E4942
# The JSON chunk is parsed whole into Python objects (about 20 times its size at worst), so
# it has a limit of its own; a model's JSON is rarely above a megabyte.
MAX_JSON_BYTES = 8 * 1024 * 1024
# Levels of nodes below a scene's root (a viewer walks them recursively).
MAX_NODE_DEPTH = 64


@dataclass(frozen=True)
class GlbInfo:
    """A checked model: ``document`` holds only the allowlisted fields, each of its type, with
    the file's own indices; ``scene_nodes`` lists the default scene's nodes root first, each
    with its parent (-1 for a root); ``bin_chunk`` is the BIN chunk as it came."""

    sha256: str
    size_bytes: int
    document: dict
    bin_chunk: bytes
    scene_nodes: tuple[tuple[int, int], ...]


def glb_inspect(data: bytes) -> GlbInfo:
    """Parses a binary glTF and checks every length, type, index and count in it against the
    limits; raises ``GlbError`` naming what is wrong."""
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
    json_chunk, bin_chunk = _chunks(data)
    source = _parsed(json_chunk)
    document = GlbReader(source, bin_chunk).read()
    scene_nodes = _scene_nodes(source, document)
    _scene_limits(document, scene_nodes)
    return GlbInfo(
        sha256=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
        document=document,
        bin_chunk=bin_chunk,
        scene_nodes=scene_nodes,
    )


def _chunks(data: bytes) -> tuple[bytes, bytes]:
    """The JSON chunk and the BIN chunk (empty when there is none). What follows them (chunks
    of other kinds, which glTF tells readers to skip) is neither read nor served."""
    found: list[tuple[int, int, int]] = []
    pos = _HEADER_BYTES
    while pos < len(data) and len(found) < 2:
        if pos + _CHUNK_HEADER_BYTES > len(data):
            raise GlbError(f"truncated chunk header at byte {pos}")
        size, kind = struct.unpack_from("<II", data, pos)
        start = pos + _CHUNK_HEADER_BYTES
        if size % 4 or start + size > len(data):
            raise GlbError(f"the chunk at byte {pos} claims {size:,} bytes, past the file's end")
        found.append((kind, start, size))
        pos = start + size
    if not found or found[0][0] != _JSON_CHUNK:
        raise GlbError("the first chunk is not the JSON chunk")
    _, start, size = found[0]
    if size > MAX_JSON_BYTES:
        raise GlbError(
            f"the JSON chunk is {size:,} bytes, more than the limit of {MAX_JSON_BYTES:,}"
        )
    bin_chunk = b""
    if len(found) > 1 and found[1][0] == _BIN_CHUNK:
        bin_chunk = data[found[1][1] : found[1][1] + found[1][2]]
    return data[start : start + size], bin_chunk


def _parsed(json_chunk: bytes) -> dict:
    def refuse_constant(name: str) -> NoReturn:
        raise GlbError(f"the JSON chunk holds {name}, not a finite number")

    try:
        document = json.loads(json_chunk.decode("utf-8"), parse_constant=refuse_constant)
    except RecursionError:
        raise GlbError("the JSON chunk is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, too long an integer
        raise GlbError(f"the JSON chunk is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise GlbError("the JSON chunk is not an object")
    return document


def _scene_nodes(source: dict, document: dict) -> tuple[tuple[int, int], ...]:
    """The default scene's nodes, root first, each with its parent (``GlbInfo.scene_nodes``),
    once the nodes are known to form trees whose roots the scenes list; records the default
    scene's index in ``document``."""
    nodes, scenes = document["nodes"], document["scenes"]
    parents = _tree_parents(nodes)
    for number, scene in enumerate(scenes):
        for root in scene["nodes"]:
            if parents[root] != -1:
                raise GlbError(
                    f"scenes[{number}].nodes: node {root} is a child of nodes"
                    f"[{parents[root]}]; a scene lists root nodes only"
                )
    if "scene" in source:
        document["scene"] = item_index(source["scene"], "scene", scenes, "scenes")
    if scenes:
        roots = scenes[document.get("scene", 0)]["nodes"]
    else:
        roots = [index for index, parent in enumerate(parents) if parent == -1]
    return _preorder(nodes, roots)


def _scene_limits(document: dict, scene_nodes: tuple[tuple[int, int], ...]) -> None:
    """The default scene's triangles, every instance counted, and the vertices they read,
    within ``ARBITER_MAX_MODEL3D_TRIANGLES``: from the counts, before anything is read."""
    limit = settings.ARBITER_MAX_MODEL3D_TRIANGLES
    accessors, meshes, nodes = document["accessors"], document["meshes"], document["nodes"]
    per_mesh: dict[int, int] = {}
    total = 0
    for node, _ in scene_nodes:
        mesh = nodes[node].get("mesh")
        if mesh is None:
            continue
        if mesh not in per_mesh:
            per_mesh[mesh] = 0
            for primitive in meshes[mesh]["primitives"]:
                source = primitive.get("indices", primitive["attributes"].get("POSITION"))
                vertices = 0 if source is None else accessors[source]["count"]
                per_mesh[mesh] += primitive_triangles(primitive.get("mode", TRIANGLES), vertices)
        total += per_mesh[mesh]
        if total > limit:
            raise GlbError(
                f"more than the limit of {limit:,} triangles in its scene "
                "(ARBITER_MAX_MODEL3D_TRIANGLES, every instance counted)"
            )
    for mesh in per_mesh:
        for primitive in meshes[mesh]["primitives"]:
            if primitive_triangles(primitive.get("mode", TRIANGLES), 3) == 0:
                continue  # points and lines: not read, within the accessors' byte budget
            for index in (*primitive["attributes"].values(), primitive.get("indices")):
                if index is not None and accessors[index]["count"] > 3 * limit:
                    raise GlbError(
                        f"accessors[{index}].count: {accessors[index]['count']:,} elements, "
                        f"more than the limit of {3 * limit:,} (three for each of "
                        "ARBITER_MAX_MODEL3D_TRIANGLES)"
                    )


def _tree_parents(nodes: list) -> list[int]:
    """Each node's parent (-1 for a root), once the nodes are known to form disjoint strict
    trees no deeper than ``MAX_NODE_DEPTH``: no node with two parents, no cycle."""
    parents = [-1] * len(nodes)
    for index, node in enumerate(nodes):
        for child in node["children"]:
            if child == index:
                raise GlbError(f"nodes[{index}].children: node {index} is its own parent; "
                               "nodes must form trees")  # fmt: skip
            if parents[child] != -1:
                raise GlbError(
                    f"nodes[{child}]: a child of both nodes[{parents[child]}] and nodes[{index}]; "
                    "nodes must form trees, each node with one parent at most"
                )
            parents[child] = index
    reached = bytearray(len(nodes))
    level = [index for index, parent in enumerate(parents) if parent == -1]
    depth = 0
    while level:
        if depth > MAX_NODE_DEPTH:
            raise GlbError(f"nodes[{level[0]}]: nested deeper than {MAX_NODE_DEPTH} levels")
        for node in level:
            reached[node] = 1
        level = [child for node in level for child in nodes[node]["children"]]
        depth += 1
    if 0 in reached:
        raise GlbError(
            f"nodes[{reached.index(0)}]: its ancestors form a cycle; nodes must form trees"
        )
    return parents


def _preorder(nodes: list, roots: list[int]) -> tuple[tuple[int, int], ...]:
    """(node, parent) for every node under ``roots``, each after its parent, in the order a
    depth-first walk meets them; the nodes form trees (``_tree_parents``)."""
    order = []
    stack = [(root, -1) for root in reversed(roots)]
    while stack:
        node, parent = stack.pop()
        order.append((node, parent))
        stack.extend((child, node) for child in reversed(nodes[node]["children"]))
    return tuple(order)


def glb_pack(json_chunk: bytes, bin_chunk: bytes) -> bytes:
    """A binary glTF of these chunks, each padded to 4 bytes as the format requires."""
    json_chunk += b" " * (-len(json_chunk) % 4)
    chunks = struct.pack("<II", len(json_chunk), _JSON_CHUNK) + json_chunk
    if bin_chunk:
        bin_chunk += b"\x00" * (-len(bin_chunk) % 4)
        chunks += struct.pack("<II", len(bin_chunk), _BIN_CHUNK) + bin_chunk
    return struct.pack("<4sII", _MAGIC, _VERSION, _HEADER_BYTES + len(chunks)) + chunks
