"""The JSON chunk of a binary glTF read into a new document of allowlisted, type-checked
fields (docs/import-format.md, "What the served copy of a 3D model keeps"): a value of the
wrong type or range is a ``GlbError`` naming its JSON path (``accessors[3].count: must be an
integer of at least 1, got -5``), never a ``TypeError`` or ``KeyError`` in the code that reads
it later, and keys not on the allowlist (``extras``, ``extensions``, names, anything unknown)
are not copied. The container around it, the node graph and the scene's limits are checked
by ``annotation.media.glb``, which is what callers use."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

from django.conf import settings

# Items in any one list of the document (nodes, meshes, a node's children, ...).
MAX_ITEMS = 100_000
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


def item_index(value: Any, path: str, items: list, what: str) -> int:
    if type(value) is not int or not 0 <= value < len(items):
        _fail(path, f"the index of one of the {len(items)} {what}", value)
    return value


def _node_indices(value: Any, path: str, nodes: list) -> list[int]:
    values = _list(value, path, "node indices")
    if not values:
        return values
    seen: set[int] = set()
    for position, item in enumerate(values):
        item_index(item, f"{path}[{position}]", nodes, "nodes")
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


class GlbReader:
    """Reads a parsed JSON chunk into the checked document, list by list, each after the
    lists its items point into."""

    def __init__(self, source: dict, bin_chunk: bytes) -> None:
        self.source = source
        self.bin_chunk = bin_chunk

    def read(self) -> dict:
        """The checked document, its node graph not yet checked (``annotation.media.glb``)."""
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
        return document

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
        buffer = item_index(view.get("buffer"), f"{path}.buffer", buffers, "buffers")
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
        view_index = item_index(accessor["bufferView"], f"{path}.bufferView", views, "bufferViews")
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
        view = item_index(image.get("bufferView"), f"{path}.bufferView", views, "bufferViews")
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
        checked = {"source": item_index(texture["source"], f"{path}.source", images, "images")}
        if "sampler" in texture:
            checked["sampler"] = item_index(texture["sampler"], f"{path}.sampler", samplers,
                                        "samplers")  # fmt: skip
        return checked

    def _texture_info(self, value: Any, path: str, textures: list, extra: str = "") -> dict:
        info = _object(value, path)
        checked: dict[str, Any] = {
            "index": item_index(info.get("index"), f"{path}.index", textures, "textures")
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
            index = item_index(source[name], where, accessors, "accessors")
            if accessors[index]["type"] not in kinds:
                _fail(f"accessors[{index}].type", f"{' or '.join(kinds)} for {name}",
                      accessors[index]["type"])  # fmt: skip
            attributes[name] = index
        checked: dict[str, Any] = {"attributes": attributes}
        if "indices" in primitive:
            index = item_index(primitive["indices"], f"{path}.indices", accessors, "accessors")
            accessor = accessors[index]
            if accessor["type"] != "SCALAR" or accessor["componentType"] not in _INDEX_COMPONENTS:
                raise GlbError(f"accessors[{index}]: indices must be SCALAR unsigned integers")
            checked["indices"] = index
        if "material" in primitive:
            checked["material"] = item_index(primitive["material"], f"{path}.material", materials,
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
            checked["mesh"] = item_index(node["mesh"], f"{path}.mesh", meshes, "meshes")
        if "matrix" in node:
            checked["matrix"] = _numbers(node["matrix"], f"{path}.matrix", 16)
            return checked
        for key, length in (("translation", 3), ("rotation", 4), ("scale", 3)):
            if key in node:
                checked[key] = _numbers(node[key], f"{path}.{key}", length)
        return checked

    def _scene(self, scene: dict, path: str, nodes: list) -> dict:
        return {"nodes": _node_indices(scene.get("nodes", []), f"{path}.nodes", nodes)}


def _refuse_compression(name: str, path: str) -> None:
    if name in COMPRESSION:
        raise GlbError(
            f"{path}: its geometry is compressed with {COMPRESSION[name]} ({name}); export it "
            "without compression"
        )
