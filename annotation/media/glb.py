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
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from django.conf import settings

_MAGIC = b"glTF"
_VERSION = 2
_HEADER_BYTES = 12
_CHUNK_HEADER_BYTES = 8
_JSON_CHUNK = 0x4E4F534A
_BIN_CHUNK = 0x004E4942
# The JSON chunk is parsed whole into Python objects (about 20 times its size at worst), so
# it has a limit of its own; a model's JSON is rarely above a megabyte.
MAX_JSON_BYTES = 8 * 1024 * 1024
# Items in any one list of the document (nodes, meshes, a node's children, ...).
MAX_ITEMS = 100_000
# Levels of nodes below a scene's root (a viewer walks them recursively).
MAX_NODE_DEPTH = 64
SELF_CONTAINED = "give a self-contained .glb"
COMPONENT_BYTES = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}
# (columns, rows) of each accessor type; a matrix's columns start on 4-byte boundaries.
_TYPE_SHAPES = {"SCALAR": (1, 1), "VEC2": (1, 2), "VEC3": (1, 3), "VEC4": (1, 4),
                "MAT2": (2, 2), "MAT3": (3, 3), "MAT4": (4, 4)}  # fmt: skip
TRIANGLES, TRIANGLE_STRIP, TRIANGLE_FAN = 4, 5, 6
_INDEX_COMPONENTS = (5121, 5123, 5125)
# The vertex attributes kept, with the accessor types glTF allows for each.
_ATTRIBUTES = (
    (re.compile(r"POSITION|NORMAL"), ("VEC3",)),
    (re.compile(r"TANGENT"), ("VEC4",)),
    (re.compile(r"TEXCOORD_(0|[1-9][0-9]?)"), ("VEC2",)),
    (re.compile(r"COLOR_(0|[1-9][0-9]?)"), ("VEC3", "VEC4")),
)
COMPRESSION = {
    "KHR_draco_mesh_compression": "Draco",
    "EXT_meshopt_compression": "meshopt",
    "KHR_meshopt_compression": "meshopt",
}
IMAGE_TYPES = ("image/png", "image/jpeg")
_ALPHA_MODES = ("OPAQUE", "MASK", "BLEND")
_MAG_FILTERS = (9728, 9729)
_MIN_FILTERS = (9728, 9729, 9984, 9985, 9986, 9987)
_WRAPS = (33071, 33648, 10497)


class GlbError(Exception):
    """The model was refused; the message says why."""


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
    document, scene_nodes = _Reader(_parsed(json_chunk), bin_chunk).read()
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


def _shown(value: Any) -> str:
    """A hostile value as an error message names it: short, whatever it holds."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {len(value):,} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, str):
        return repr(value[:40] + ("..." if len(value) > 40 else ""))
    return json.dumps(value)


def _fail(path: str, expected: str, value: Any) -> NoReturn:
    raise GlbError(f"{path}: must be {expected}, got {_shown(value)}")


def _object(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        _fail(path, "an object", value)
    return value


def _integer(value: Any, path: str, *, low: int = 0, high: int | None = None) -> int:
    if type(value) is not int or value < low or (high is not None and value > high):
        expected = f"an integer of at least {low}"
        if high is not None:
            expected = f"an integer from {low} to {high}"
        _fail(path, expected, value)
    return value


def _number(value: Any, path: str) -> float:
    if type(value) not in (int, float):
        _fail(path, "a number", value)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        _fail(path, "a finite number", value)
    return number


def _numbers(value: Any, path: str, length: int) -> list[float]:
    if not isinstance(value, list) or len(value) != length:
        _fail(path, f"a list of {length} numbers", value)
    return [_number(item, f"{path}[{index}]") for index, item in enumerate(value)]


def _choice(value: Any, path: str, allowed: tuple) -> Any:
    if type(value) not in (int, str) or value not in allowed:
        _fail(path, "one of " + ", ".join(map(str, allowed)), value)
    return value


def _list(value: Any, path: str, what: str) -> list:
    if not isinstance(value, list):
        _fail(path, f"a list of {what}", value)
    if len(value) > MAX_ITEMS:
        raise GlbError(f"{path}: {len(value):,} items, more than the limit of {MAX_ITEMS:,}")
    return value


def _index(value: Any, path: str, items: list, what: str) -> int:
    if type(value) is not int or not 0 <= value < len(items):
        _fail(path, f"the index of one of the {len(items)} {what}", value)
    return value


def _node_indices(value: Any, path: str, nodes: list) -> list[int]:
    values = _list(value, path, "node indices")
    if not values:
        return values
    seen: set[int] = set()
    for position, item in enumerate(values):
        _index(item, f"{path}[{position}]", nodes, "nodes")
        if item in seen:
            raise GlbError(f"{path}: lists node {item} twice; nodes must form trees")
        seen.add(item)
    return values


def element_bytes(accessor: dict) -> int:
    """The bytes of one element of a checked accessor (a matrix's columns padded to 4)."""
    columns, rows = _TYPE_SHAPES[accessor["type"]]
    width = COMPONENT_BYTES[accessor["componentType"]]
    if columns == 1:
        return rows * width
    return columns * (-(-rows * width // 4) * 4)


def type_components(accessor: dict) -> int:
    columns, rows = _TYPE_SHAPES[accessor["type"]]
    return columns * rows


def primitive_triangles(mode: int, vertices: int) -> int:
    """Triangles a primitive of ``mode`` draws from ``vertices`` indices (or vertices)."""
    if mode == TRIANGLES:
        return vertices // 3
    if mode in (TRIANGLE_STRIP, TRIANGLE_FAN):
        return max(0, vertices - 2)
    return 0


class _Reader:
    """Reads a parsed JSON chunk into the checked document, list by list, each after the
    lists its items point into."""

    def __init__(self, source: dict, bin_chunk: bytes) -> None:
        self.source = source
        self.bin_chunk = bin_chunk

    def read(self) -> tuple[dict, tuple[tuple[int, int], ...]]:
        """The checked document and its default scene's nodes (``GlbInfo.scene_nodes``)."""
        self._extensions()
        asset = _object(self.source.get("asset"), "asset")
        version = asset.get("version")
        if not (isinstance(version, str) and version.startswith("2.")):
            _fail("asset.version", "'2.0'", version)
        buffers = self._items("buffers", "buffer objects", self._buffer)
        views = self._items("bufferViews", "buffer view objects", self._view, buffers)
        accessors = self._items("accessors", "accessor objects", self._accessor, views)
        self._accessor_budget(accessors)
        images = self._items("images", "image objects", self._image, views)
        samplers = self._items("samplers", "sampler objects", self._sampler)
        textures = self._items("textures", "texture objects", self._texture, samplers, images)
        materials = self._items("materials", "material objects", self._material, textures)
        meshes = self._items("meshes", "mesh objects", self._mesh, accessors, materials)
        nodes = self._items("nodes", "node objects", self._node, meshes)
        scenes = self._items("scenes", "scene objects", self._scene, nodes)
        document: dict[str, Any] = {
            "asset": {"version": "2.0"},
            "scenes": scenes,
            "nodes": nodes,
            "meshes": meshes,
            "materials": materials,
            "textures": textures,
            "samplers": samplers,
            "images": images,
            "accessors": accessors,
            "bufferViews": views,
            "buffers": buffers,
        }
        parents = _tree_parents(nodes)
        for number, scene in enumerate(scenes):
            for root in scene["nodes"]:
                if parents[root] != -1:
                    raise GlbError(
                        f"scenes[{number}].nodes: node {root} is a child of nodes"
                        f"[{parents[root]}]; a scene lists root nodes only"
                    )
        if "scene" in self.source:
            document["scene"] = _index(self.source["scene"], "scene", scenes, "scenes")
        if scenes:
            roots = scenes[document.get("scene", 0)]["nodes"]
        else:
            roots = [index for index, parent in enumerate(parents) if parent == -1]
        scene_nodes = _preorder(nodes, roots)
        self._scene_limits(document, scene_nodes)
        return document, scene_nodes

    def _extensions(self) -> None:
        for key in ("extensionsUsed", "extensionsRequired"):
            names = _list(self.source.get(key, []), key, "extension names")
            for position, name in enumerate(names):
                if not isinstance(name, str):
                    _fail(f"{key}[{position}]", "an extension name", name)
                _refuse_compression(name, key)
        required = self.source.get("extensionsRequired", [])
        if required:
            shown = ", ".join(_shown(name)[1:-1] for name in required[:5])
            raise GlbError(
                f"extensionsRequired: it requires {shown}; the served copy keeps no extension "
                "(export the model without them)"
            )

    def _items(self, key: str, what: str, read: Callable[..., dict], *lists: list) -> list:
        items = _list(self.source.get(key, []), key, what)
        return [
            read(_object(item, f"{key}[{index}]"), f"{key}[{index}]", *lists)
            for index, item in enumerate(items)
        ]

    def _buffer(self, buffer: dict, path: str) -> dict:
        if "uri" in buffer:
            raise GlbError(f"{path}.uri: points to another file; {SELF_CONTAINED}")
        if path != "buffers[0]":
            raise GlbError(f"{path}: a .glb holds one buffer, its BIN chunk; {SELF_CONTAINED}")
        size = _integer(buffer.get("byteLength"), f"{path}.byteLength", low=1)
        if size > len(self.bin_chunk):
            raise GlbError(
                f"{path}.byteLength: {size:,} bytes, past the end of the BIN chunk "
                f"({len(self.bin_chunk):,} bytes)"
            )
        return {"byteLength": size}

    def _view(self, view: dict, path: str, buffers: list) -> dict:
        buffer = _index(view.get("buffer"), f"{path}.buffer", buffers, "buffers")
        offset = _integer(view.get("byteOffset", 0), f"{path}.byteOffset")
        length = _integer(view.get("byteLength"), f"{path}.byteLength", low=1)
        if offset + length > buffers[buffer]["byteLength"]:
            raise GlbError(
                f"{path}: lies outside the BIN chunk (bytes {offset:,} to {offset + length:,} "
                f"of {buffers[buffer]['byteLength']:,})"
            )
        checked = {"buffer": buffer, "byteOffset": offset, "byteLength": length}
        if "byteStride" in view:
            stride = _integer(view["byteStride"], f"{path}.byteStride", low=4, high=252)
            if stride % 4:
                _fail(f"{path}.byteStride", "a multiple of 4", stride)
            checked["byteStride"] = stride
        if "target" in view:
            checked["target"] = _choice(view["target"], f"{path}.target", (34962, 34963))
        return checked

    def _accessor(self, accessor: dict, path: str, views: list) -> dict:
        if "sparse" in accessor:
            raise GlbError(f"{path}.sparse: sparse accessors are not supported; export the "
                           "model without them")  # fmt: skip
        checked: dict[str, Any] = {
            "componentType": _choice(
                accessor.get("componentType"), f"{path}.componentType", tuple(COMPONENT_BYTES)
            ),
            "count": _integer(accessor.get("count"), f"{path}.count", low=1),
            "type": _choice(accessor.get("type"), f"{path}.type", tuple(_TYPE_SHAPES)),
        }
        if "normalized" in accessor:
            if not isinstance(accessor["normalized"], bool):
                _fail(f"{path}.normalized", "true or false", accessor["normalized"])
            checked["normalized"] = accessor["normalized"]
        for key in ("min", "max"):
            if key in accessor:
                checked[key] = _numbers(accessor[key], f"{path}.{key}", type_components(checked))
        element = element_bytes(checked)
        if "bufferView" not in accessor:
            return checked
        view_index = _index(accessor["bufferView"], f"{path}.bufferView", views, "bufferViews")
        view = views[view_index]
        offset = _integer(accessor.get("byteOffset", 0), f"{path}.byteOffset")
        width = COMPONENT_BYTES[checked["componentType"]]
        stride = view.get("byteStride", element)
        if offset % width or (view["byteOffset"] + offset) % width or stride % width:
            raise GlbError(
                f"{path}: not aligned to its {width}-byte components in bufferViews[{view_index}]"
            )
        if stride < element:
            raise GlbError(f"{path}: its {element}-byte elements are wider than the "
                           f"byteStride ({stride}) of bufferViews[{view_index}]")  # fmt: skip
        needed = offset + stride * (checked["count"] - 1) + element
        if needed > view["byteLength"]:
            raise GlbError(
                f"{path}: reads past the end of bufferViews[{view_index}] (needs {needed:,} "
                f"bytes, it has {view['byteLength']:,})"
            )
        return {"bufferView": view_index, "byteOffset": offset, **checked}

    def _accessor_budget(self, accessors: list) -> None:
        """What a reader of the model allocates, all zeros included, within the file's limit."""
        limit = settings.ARBITER_MAX_MODEL3D_BYTES
        total = sum(accessor["count"] * element_bytes(accessor) for accessor in accessors)
        if total > limit:
            raise GlbError(
                f"accessors: together they describe {total:,} bytes, more than the limit of "
                f"{limit:,}"
            )

    def _image(self, image: dict, path: str, views: list) -> dict:
        if "uri" in image:
            raise GlbError(f"{path}.uri: points to another file; {SELF_CONTAINED}")
        view = _index(image.get("bufferView"), f"{path}.bufferView", views, "bufferViews")
        if "byteStride" in views[view]:
            raise GlbError(f"{path}.bufferView: an image's buffer view has no byteStride")
        mime = _choice(image.get("mimeType"), f"{path}.mimeType", IMAGE_TYPES)
        return {"bufferView": view, "mimeType": mime}

    def _sampler(self, sampler: dict, path: str) -> dict:
        checked = {}
        for key, allowed in (("magFilter", _MAG_FILTERS), ("minFilter", _MIN_FILTERS),
                             ("wrapS", _WRAPS), ("wrapT", _WRAPS)):  # fmt: skip
            if key in sampler:
                checked[key] = _choice(sampler[key], f"{path}.{key}", allowed)
        return checked

    def _texture(self, texture: dict, path: str, samplers: list, images: list) -> dict:
        if "source" not in texture:
            raise GlbError(f"{path}.source: missing (a texture only an extension can read); "
                           "export its image as PNG or JPEG")  # fmt: skip
        checked = {"source": _index(texture["source"], f"{path}.source", images, "images")}
        if "sampler" in texture:
            checked["sampler"] = _index(texture["sampler"], f"{path}.sampler", samplers,
                                        "samplers")  # fmt: skip
        return checked

    def _texture_info(self, value: Any, path: str, textures: list, extra: str = "") -> dict:
        info = _object(value, path)
        checked: dict[str, Any] = {
            "index": _index(info.get("index"), f"{path}.index", textures, "textures")
        }
        if "texCoord" in info:
            checked["texCoord"] = _integer(info["texCoord"], f"{path}.texCoord", high=99)
        if extra and extra in info:
            checked[extra] = _number(info[extra], f"{path}.{extra}")
        return checked

    def _material(self, material: dict, path: str, textures: list) -> dict:
        checked: dict[str, Any] = {}
        if "pbrMetallicRoughness" in material:
            where = f"{path}.pbrMetallicRoughness"
            pbr = _object(material["pbrMetallicRoughness"], where)
            kept: dict[str, Any] = {}
            if "baseColorFactor" in pbr:
                kept["baseColorFactor"] = _numbers(
                    pbr["baseColorFactor"], f"{where}.baseColorFactor", 4
                )
            for key in ("metallicFactor", "roughnessFactor"):
                if key in pbr:
                    kept[key] = _number(pbr[key], f"{where}.{key}")
            for key in ("baseColorTexture", "metallicRoughnessTexture"):
                if key in pbr:
                    kept[key] = self._texture_info(pbr[key], f"{where}.{key}", textures)
            checked["pbrMetallicRoughness"] = kept
        for key, extra in (("normalTexture", "scale"), ("occlusionTexture", "strength"),
                           ("emissiveTexture", "")):  # fmt: skip
            if key in material:
                checked[key] = self._texture_info(material[key], f"{path}.{key}", textures, extra)
        if "emissiveFactor" in material:
            checked["emissiveFactor"] = _numbers(
                material["emissiveFactor"], f"{path}.emissiveFactor", 3
            )
        if "alphaMode" in material:
            checked["alphaMode"] = _choice(material["alphaMode"], f"{path}.alphaMode",
                                           _ALPHA_MODES)  # fmt: skip
        if "alphaCutoff" in material:
            checked["alphaCutoff"] = _number(material["alphaCutoff"], f"{path}.alphaCutoff")
        if "doubleSided" in material:
            if not isinstance(material["doubleSided"], bool):
                _fail(f"{path}.doubleSided", "true or false", material["doubleSided"])
            checked["doubleSided"] = material["doubleSided"]
        return checked

    def _mesh(self, mesh: dict, path: str, accessors: list, materials: list) -> dict:
        primitives = _list(mesh.get("primitives"), f"{path}.primitives", "primitive objects")
        if not primitives:
            _fail(f"{path}.primitives", "a list of at least one primitive", primitives)
        return {
            "primitives": [
                self._primitive(_object(item, where), where, accessors, materials)
                for where, item in (
                    (f"{path}.primitives[{index}]", item) for index, item in enumerate(primitives)
                )
            ]
        }

    def _primitive(self, primitive: dict, path: str, accessors: list, materials: list) -> dict:
        extensions = _object(primitive.get("extensions", {}), f"{path}.extensions")
        for name in extensions:
            _refuse_compression(name, f"{path}.extensions")
        source = _object(primitive.get("attributes"), f"{path}.attributes")
        attributes = {}
        for name in sorted(source):
            kinds = next((kinds for pattern, kinds in _ATTRIBUTES if pattern.fullmatch(name)), ())
            if not kinds:
                continue  # skins' joints and weights, an application's own attributes
            where = f"{path}.attributes.{name}"
            index = _index(source[name], where, accessors, "accessors")
            if accessors[index]["type"] not in kinds:
                _fail(f"accessors[{index}].type", f"{' or '.join(kinds)} for {name}",
                      accessors[index]["type"])  # fmt: skip
            attributes[name] = index
        checked: dict[str, Any] = {"attributes": attributes}
        if "indices" in primitive:
            index = _index(primitive["indices"], f"{path}.indices", accessors, "accessors")
            accessor = accessors[index]
            if accessor["type"] != "SCALAR" or accessor["componentType"] not in _INDEX_COMPONENTS:
                raise GlbError(f"accessors[{index}]: indices must be SCALAR unsigned integers")
            checked["indices"] = index
        if "material" in primitive:
            checked["material"] = _index(primitive["material"], f"{path}.material", materials,
                                         "materials")  # fmt: skip
        if "mode" in primitive:
            checked["mode"] = _integer(primitive["mode"], f"{path}.mode", high=6)
        return checked

    def _node(self, node: dict, path: str, meshes: list) -> dict:
        checked: dict[str, Any] = {
            "children": _node_indices(node.get("children", []), f"{path}.children",
                                      self.source["nodes"]),
        }  # fmt: skip
        if "mesh" in node:
            checked["mesh"] = _index(node["mesh"], f"{path}.mesh", meshes, "meshes")
        if "matrix" in node:
            checked["matrix"] = _numbers(node["matrix"], f"{path}.matrix", 16)
            return checked
        for key, length in (("translation", 3), ("rotation", 4), ("scale", 3)):
            if key in node:
                checked[key] = _numbers(node[key], f"{path}.{key}", length)
        return checked

    def _scene(self, scene: dict, path: str, nodes: list) -> dict:
        return {"nodes": _node_indices(scene.get("nodes", []), f"{path}.nodes", nodes)}

    def _scene_limits(self, document: dict, scene_nodes: tuple[tuple[int, int], ...]) -> None:
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
                    per_mesh[mesh] += primitive_triangles(
                        primitive.get("mode", TRIANGLES), vertices
                    )
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


def _refuse_compression(name: str, path: str) -> None:
    if name in COMPRESSION:
        raise GlbError(
            f"{path}: its geometry is compressed with {COMPRESSION[name]} ({name}); export it "
            "without compression"
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
