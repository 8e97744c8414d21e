"""Hostile binary glTF models (docs/import-format.md, "3D models"): JSON of the wrong types
is refused with an error naming its JSON path, never a traceback; each bomb (a node graph that
is not a set of trees, huge accessor counts with or without a buffer view, huge textures, huge
lists, deep trees, deep JSON) is refused within a short time and without allocating what it
claims; and a fuzz test over ``glb_inspect``, ``glb_rebuild`` and the renderer, which may only
ever return or raise ``GlbError``."""

from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from PIL import Image

from annotation.imports.errors import ImportFailed
from annotation.media.glb import MAX_JSON_BYTES, MAX_NODE_DEPTH, GlbError, glb_inspect
from annotation.media.glb_json import MAX_ITEMS
from annotation.media.glb_rebuild import glb_rebuild
from annotation.media.glb_render import glb_render_views
from tests.annotation.imports.conftest import assert_nothing_imported
from tests.annotation.media.conftest import (
    glb_bytes,
    glb_pack,
    glb_split,
    mesh_glb,
    textured_glb,
)
from tests.annotation.media.test_import_av import import_media, media_pair

# A bomb is refused well within this much of this process's CPU time (the tester's DAG ran for
# ever); the largest models the limits let through (100,000 nodes) take about half a second
# on one idle core. CPU time, not the wall clock: the check runs in this process, and a
# machine busy with other work stretched the wall clock past this with the same CPU spent.
SECONDS = 5.0


def _with(data: bytes, **changes) -> bytes:
    document, binary = glb_split(data)
    document.update(changes)
    return glb_pack(json.dumps(document).encode(), binary)


def _edited(data: bytes, edit) -> bytes:
    document, binary = glb_split(data)
    edit(document)
    return glb_pack(json.dumps(document).encode(), binary)


def _set(path: tuple, value):
    def edit(document: dict) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


# Hostile JSON ---------------------------------------------------------------------------

HOSTILE_JSON = {
    "negative accessor count": (
        _set(("accessors", 0, "count"), -5),
        "accessors[0].count: must be an integer of at least 1, got -5",
    ),
    "accessor type a list": (
        _set(("accessors", 0, "type"), ["VEC3"]),
        "accessors[0].type: must be one of SCALAR, VEC2, VEC3, VEC4, MAT2, MAT3, MAT4, "
        "got a list of 1 item",
    ),
    "componentType a string": (
        _set(("accessors", 0, "componentType"), "5126"),
        "accessors[0].componentType: must be one of 5120, 5121, 5122, 5123, 5125, 5126, got '5126'",
    ),
    "children an int": (
        _set(("nodes", 0, "children"), 7),
        "nodes[0].children: must be a list of node indices, got 7",
    ),
    "children a nested list": (
        _set(("nodes", 0, "children"), [[0]]),
        "nodes[0].children[0]: must be the index of one of the 1 nodes, got a list of 1 item",
    ),
    "extensionsUsed an int": (
        _set(("extensionsUsed",), 3),
        "extensionsUsed: must be a list of extension names, got 3",
    ),
    "scene.nodes an int": (
        _set(("scenes", 0, "nodes"), 0),
        "scenes[0].nodes: must be a list of node indices, got 0",
    ),
    "meshes an object": (
        _set(("meshes",), {"0": {"primitives": []}}),
        "meshes: must be a list of mesh objects, got an object",
    ),
    "nodes an object": (
        _set(("nodes",), {"0": {"mesh": 0}}),
        "nodes: must be a list of node objects, got an object",
    ),
    "pbrMetallicRoughness a string": (
        _set(("materials",), [{"pbrMetallicRoughness": "shiny"}]),
        "materials[0].pbrMetallicRoughness: must be an object, got 'shiny'",
    ),
    "scene a string": (
        _set(("scene",), "0"),
        "scene: must be the index of one of the 1 scenes, got '0'",
    ),
    "asset a string": (_set(("asset",), "2.0"), "asset: must be an object, got '2.0'"),
    "a node a list": (
        _set(("nodes", 0), [0]),
        "nodes[0]: must be an object, got a list of 1 item",
    ),
    "a mesh index past the meshes": (
        _set(("nodes", 0, "mesh"), 4),
        "nodes[0].mesh: must be the index of one of the 1 meshes, got 4",
    ),
    "a boolean count": (
        _set(("accessors", 0, "count"), True),
        "accessors[0].count: must be an integer of at least 1, got true",
    ),
    "a translation of strings": (
        _set(("nodes", 0, "translation"), ["1", 0, 0]),
        "nodes[0].translation[0]: must be a number, got '1'",
    ),
    "a rotation too short": (
        _set(("nodes", 0, "rotation"), [0, 0, 1]),
        "nodes[0].rotation: must be a list of 4 numbers, got a list of 3 items",
    ),
    "a huge number": (
        _set(("nodes", 0, "scale"), [10**400, 1, 1]),
        "nodes[0].scale[0]: must be a finite number",
    ),
    "attributes a list": (
        _set(("meshes", 0, "primitives", 0, "attributes"), [0]),
        "meshes[0].primitives[0].attributes: must be an object, got a list of 1 item",
    ),
    "POSITION a SCALAR accessor": (
        _set(("meshes", 0, "primitives", 0, "attributes", "POSITION"), 1),
        "accessors[1].type: must be VEC3 for POSITION, got 'SCALAR'",
    ),
    "a byteStride not a multiple of 4": (
        _set(("bufferViews", 0, "byteStride"), 6),
        "bufferViews[0].byteStride: must be a multiple of 4, got 6",
    ),
    "a sampler filter made up": (
        _set(("samplers",), [{"magFilter": 1}]),
        "samplers[0].magFilter: must be one of 9728, 9729, got 1",
    ),
    "a buffer view past the BIN chunk": (
        _set(("bufferViews", 0, "byteOffset"), 10**12),
        "bufferViews[0]: lies outside the BIN chunk",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_JSON))
def test_hostile_json_is_refused_naming_its_path(case):
    edit, message = HOSTILE_JSON[case]
    with pytest.raises(GlbError) as refused:
        glb_inspect(_edited(mesh_glb(), edit))
    assert str(refused.value).startswith(message)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "case", ["accessor type a list", "meshes an object", "pbrMetallicRoughness a string"]
)
def test_hostile_json_is_a_line_error_at_import(project, tmp_path, case):
    edit, message = HOSTILE_JSON[case]
    (tmp_path / "good.glb").write_bytes(glb_bytes())
    (tmp_path / "bad.glb").write_bytes(_edited(mesh_glb(), edit))
    pairs = [media_pair("ok", "model3d", "good.glb", "good.glb"),
             media_pair("bad", "model3d", "good.glb", "bad.glb")]  # fmt: skip
    with pytest.raises(ImportFailed) as refused:
        import_media(project, tmp_path, pairs)
    [issue] = refused.value.issues
    assert (issue.line, issue.field) == (2, "response_b.response_content[0]")
    assert issue.message.startswith(f"model3d 'bad.glb' refused: {message}")
    assert_nothing_imported(project)


# Bombs ----------------------------------------------------------------------------------


def _nodes_model(nodes: list[dict], roots: list[int]) -> bytes:
    """The cube, its mesh on every node that names mesh 0, these nodes in its scene."""
    return _with(mesh_glb(), nodes=nodes, scenes=[{"nodes": roots}])


def _dag(levels: int) -> bytes:
    """The tester's model: each node lists the next one twice (2**levels paths), the last
    one without a mesh, so that no triangle limit ever stops a walk of every path."""
    nodes = [{"children": [i + 1, i + 1]} for i in range(levels)] + [{}]
    return _nodes_model(nodes, [0])


def _diamonds(levels: int) -> bytes:
    """Each node's two children share one grandchild: no list names a node twice."""
    nodes: list[dict] = []
    for level in range(levels):
        top = 3 * level
        nodes += [{"children": [top + 1, top + 2]}, {"children": [top + 3]},
                  {"children": [top + 3]}]  # fmt: skip
    nodes.append({"mesh": 0})
    return _nodes_model(nodes, [0])


def _huge_texture(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` pixels, with a few bytes of data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    return png + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")


# Each bomb is made when its test runs (some are megabytes).
BOMBS = {
    "a DAG 60 levels deep, each node listing the next twice": (
        lambda: _dag(60), "nodes[0].children: lists node 1 twice; nodes must form trees"),
    "a DAG of diamonds 40 levels deep": (
        lambda: _diamonds(40), "nodes[3]: a child of both nodes[1] and nodes[2]"),
    "a cycle below the scene's root": (
        lambda: _nodes_model(
            [{"children": [1]}, {"children": [2]}, {"children": [1], "mesh": 0}], [0]),
        "nodes[1]: a child of both nodes[0] and nodes[2]"),
    "a cycle with no root": (
        lambda: _nodes_model([{"children": [1], "mesh": 0}, {"children": [0]}], [0]),
        "nodes[0]: its ancestors form a cycle"),
    "a cycle beside the scene": (
        lambda: _nodes_model([{"mesh": 0}, {"children": [2]}, {"children": [1]}], [0]),
        "nodes[1]: its ancestors form a cycle"),
    "a node its own child": (
        lambda: _nodes_model([{"children": [0], "mesh": 0}], [0]), "node 0 is its own parent"),
    "a scene root that is another node's child": (
        lambda: _nodes_model([{"children": [1]}, {"mesh": 0}], [0, 1]),
        "scenes[0].nodes: node 1 is a child of nodes[0]"),
    "a tree deeper than the limit": (
        lambda: _nodes_model([{"children": [i + 1]} for i in range(500)] + [{"mesh": 0}], [0]),
        f"nested deeper than {MAX_NODE_DEPTH} levels"),
    "a chain of nodes as long as the list limit": (
        lambda: _nodes_model([{"children": [i + 1]} for i in range(MAX_ITEMS - 1)] + [{"mesh": 0}],
                     [0]),
        f"nested deeper than {MAX_NODE_DEPTH} levels"),
    "more nodes than the list limit": (
        lambda: _nodes_model([{}] * (MAX_ITEMS + 1), [0]), f"more than the limit of {MAX_ITEMS:,}"),
    "more meshes than the list limit": (
        lambda: _with(mesh_glb(), meshes=[{"primitives": [{"attributes": {"POSITION": 0}}]}]
              * (MAX_ITEMS + 1)), f"more than the limit of {MAX_ITEMS:,}"),
    "a mesh drawn by 90,000 nodes": (
        lambda: _nodes_model([{"mesh": 0}] * 90_000, list(range(90_000))),
        "more than the limit of 1,000,000 triangles"),
    "12,000,000 vertices without a buffer view": (
        lambda: _edited(mesh_glb(indices=None), _set(("accessors", 0),
                {"componentType": 5126, "count": 12_000_000, "type": "VEC3"})),
        "more than the limit of 1,000,000 triangles"),
    "12,000,000 indices without a buffer view": (
        lambda: _edited(mesh_glb(), _set(("accessors", 1),
                {"componentType": 5125, "count": 12_000_000, "type": "SCALAR"})),
        "more than the limit of 1,000,000 triangles"),
    "a few indices over 12,000,000 vertices without a buffer view": (
        lambda: _edited(mesh_glb(), _set(("accessors", 0),
                {"componentType": 5126, "count": 12_000_000, "type": "VEC3"})),
        "accessors[0].count: 12,000,000 elements, more than the limit of 3,000,000"),
    "10**12 elements without a buffer view, drawn as points": (
        lambda: _edited(mesh_glb(mode=0), _set(("accessors", 0),
                {"componentType": 5126, "count": 10**12, "type": "MAT4"})),
        "accessors: together they describe 64,000,000,000,0"),
    "a huge count in a buffer view": (
        lambda: _edited(mesh_glb(), _set(("accessors", 0, "count"), 2**40)),
        "accessors[0]: reads past the end of bufferViews[0]"),
    "a thousand accessors over one buffer view": (
        lambda: _edited(mesh_glb(np.zeros((90_000, 3), np.float32), None),
                lambda document: document["accessors"].extend(
                    [document["accessors"][0]] * 1_000)),
        "accessors: together they describe"),
    "a texture claiming 100,000 x 100,000 pixels": (
        lambda: textured_glb(image=_huge_texture(100_000, 100_000)), "images[0]: "),
    "a texture claiming 7,000 x 7,000 pixels": (
        lambda: textured_glb(image=_huge_texture(7_000, 7_000)),
        "images[0]: a 7000x7000 texture is 49,000,000 pixels, more than the limit of 40,000,000"),
    "JSON nested 100,000 deep": (
        lambda: glb_pack(b'{"asset":' + b"[" * 100_000 + b"]" * 100_000 + b"}", b""),
        "the JSON chunk is nested too deeply"),
    "a JSON chunk over its limit": (
        lambda: glb_pack(b'{"asset":{"version":"2.0"},"x":"' + b"a" * MAX_JSON_BYTES + b'"}', b""),
        "more than the limit of 8,388,608"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BOMBS))
def test_a_bomb_is_refused_at_once(case):
    make, message = BOMBS[case]
    data = make()
    started = time.process_time()
    with pytest.raises(GlbError, match=message.replace("[", r"\[").replace("]", r"\]")):
        glb_rebuild(glb_inspect(data))
    assert time.process_time() - started < SECONDS


@pytest.mark.parametrize(
    "case",
    [
        "12,000,000 vertices without a buffer view",
        "a few indices over 12,000,000 vertices without a buffer view",
        "10**12 elements without a buffer view, drawn as points",
        "a texture claiming 7,000 x 7,000 pixels",
    ],
)
def test_a_bomb_is_refused_before_what_it_claims_is_allocated(case):
    data = BOMBS[case][0]()
    tracemalloc.start()
    try:
        with pytest.raises(GlbError):
            glb_rebuild(glb_inspect(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * 1024 * 1024


def test_textures_together_have_a_limit(settings):
    settings.ARBITER_MAX_IMAGE_PIXELS = 100
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, "PNG")
    document, binary = glb_split(textured_glb(image=out.getvalue()))
    # The same 64-pixel image seven times over, each drawn by a material of its own: the
    # seventh passes 4 x 100 pixels.
    document["images"] *= 7
    document["textures"] = [{"source": index} for index in range(7)]
    document["materials"] = [{"pbrMetallicRoughness": {"baseColorTexture": {"index": index}}}
                             for index in range(7)]  # fmt: skip
    document["meshes"][0]["primitives"] = [
        {**document["meshes"][0]["primitives"][0], "material": index} for index in range(7)
    ]
    with pytest.raises(GlbError, match=r"images\[6\]: the model's textures together are more"):
        glb_rebuild(glb_inspect(glb_pack(json.dumps(document).encode(), binary)))


# Fuzz -----------------------------------------------------------------------------------

_SEEDS = [glb_bytes(), mesh_glb(base_colour=[1, 0, 0, 1]), textured_glb((0, 200, 0))]
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
    | st.sampled_from([0, 1, 2, 3, 4, 5, 6, -1, 5126, 5123, "VEC3", "SCALAR", 10**9]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=8,
)  # fmt: skip


def _paths(value, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _served_or_refused(data: bytes) -> None:
    """What an import does with the file: only ever a result or a ``GlbError``."""
    try:
        info = glb_inspect(data)
        served = glb_rebuild(info)
        glb_render_views(info, size=16)
    except GlbError:
        return
    assert glb_rebuild(glb_inspect(served)) == served


_FUZZ = hypothesis_settings(
    max_examples=200, deadline=2000, database=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip


@_FUZZ
@given(seed=st.sampled_from(_SEEDS), data=st.data())
def test_fuzzed_json_is_served_or_refused(seed, data):
    document, binary = glb_split(seed)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(document)[1:]))
        target = document
        for key in path[:-1]:
            target = target[key]
        if data.draw(st.booleans()) and isinstance(target, dict):
            del target[path[-1]]
        else:
            target[path[-1]] = data.draw(_JSON_VALUES)
    _served_or_refused(glb_pack(json.dumps(document).encode(), binary))


@_FUZZ
@given(seed=st.sampled_from(_SEEDS), data=st.data())
def test_fuzzed_bytes_are_served_or_refused(seed, data):
    mutated = bytearray(seed)
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(mutated) - 1))
        action = data.draw(st.sampled_from(["set", "cut", "insert"]))
        if action == "set":
            mutated[position] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del mutated[position : position + data.draw(st.integers(1, 16))]
        else:
            mutated[position:position] = data.draw(st.binary(min_size=1, max_size=16))
    if data.draw(st.booleans()) and len(mutated) >= 12:
        mutated[8:12] = struct.pack("<I", len(mutated))  # keep the header's length right
    _served_or_refused(bytes(mutated))
