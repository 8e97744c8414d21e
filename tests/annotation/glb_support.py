"""Binary glTF models built for tests: a mesh from numpy arrays, with a material, vertex
colours and node transforms as asked."""

from __future__ import annotations

import io
import json

import numpy as np
from PIL import Image

from tests.annotation.av_support import glb_pack

# A unit cube centred on the origin: 8 corners, 12 triangles wound outwards.
CUBE_POSITIONS = np.array(
    [[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)], np.float32
)
CUBE_INDICES = np.array(
    [
        [0, 1, 3], [0, 3, 2],  # -x
        [4, 6, 7], [4, 7, 5],  # +x
        [0, 4, 5], [0, 5, 1],  # -y
        [2, 3, 7], [2, 7, 6],  # +y
        [0, 2, 6], [0, 6, 4],  # -z
        [1, 5, 7], [1, 7, 3],  # +z
    ],
    np.uint16,
)  # fmt: skip


def mesh_glb(
    positions: np.ndarray = CUBE_POSITIONS,
    indices: np.ndarray | None = CUBE_INDICES,
    *,
    base_colour: list[float] | None = None,
    colours: np.ndarray | None = None,
    node: dict | None = None,
    document_extra: dict | None = None,
    mode: int | None = None,
) -> bytes:
    """A one-mesh model: float32 ``positions`` (n, 3), uint16/uint32 ``indices``, a material
    with ``base_colour`` (RGBA, linear), float32 vertex ``colours`` (n, 3)."""
    positions = np.ascontiguousarray(positions, np.float32)
    blobs: list[bytes] = []
    views: list[dict] = []
    accessors: list[dict] = []

    def add(array: np.ndarray, component_type: int, kind: str, **extra) -> int:
        offset = sum(len(blob) for blob in blobs)
        data = np.ascontiguousarray(array).tobytes()
        data += b"\x00" * (-len(data) % 4)
        blobs.append(data)
        views.append({"buffer": 0, "byteOffset": offset, "byteLength": len(data)})
        accessors.append({"bufferView": len(views) - 1, "componentType": component_type,
                          "count": len(array), "type": kind, **extra})  # fmt: skip
        return len(accessors) - 1

    attributes = {
        "POSITION": add(
            positions, 5126, "VEC3", min=positions.min(0).tolist(), max=positions.max(0).tolist()
        )
    }
    primitive: dict = {"attributes": attributes}
    if colours is not None:
        attributes["COLOR_0"] = add(np.asarray(colours, np.float32), 5126, "VEC3")
    if indices is not None:
        flat = np.asarray(indices).reshape(-1)
        primitive["indices"] = add(flat, 5125 if flat.dtype == np.uint32 else 5123, "SCALAR")
    if mode is not None:
        primitive["mode"] = mode
    document: dict = {
        "asset": {"version": "2.0"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, **(node or {})}],
        "meshes": [{"primitives": [primitive]}],
    }
    if base_colour is not None:
        primitive["material"] = 0
        document["materials"] = [{"pbrMetallicRoughness": {"baseColorFactor": base_colour}}]
    binary = b"".join(blobs)
    document.update(buffers=[{"byteLength": len(binary)}], bufferViews=views,
                    accessors=accessors)  # fmt: skip
    document.update(document_extra or {})
    return glb_pack(json.dumps(document).encode(), binary)


def sphere_glb(segments: int, *, base_colour: list[float] | None = None) -> bytes:
    """A UV sphere of radius 1 with about ``2 * segments**2`` triangles."""
    theta = np.linspace(0, np.pi, segments + 1)
    phi = np.linspace(0, 2 * np.pi, segments + 1)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    positions = np.stack([np.sin(t) * np.cos(p), np.cos(t), np.sin(t) * np.sin(p)], -1)
    grid = np.arange((segments + 1) ** 2).reshape(segments + 1, segments + 1)
    a, b = grid[:-1, :-1].ravel(), grid[:-1, 1:].ravel()
    c, d = grid[1:, :-1].ravel(), grid[1:, 1:].ravel()
    indices = np.concatenate([np.stack([a, c, b], 1), np.stack([b, c, d], 1)]).astype(np.uint32)
    return mesh_glb(positions.reshape(-1, 3), indices, base_colour=base_colour)


def textured_glb(colour: tuple[int, int, int]) -> bytes:
    """A unit square whose only colour is an embedded 8 x 8 PNG texture of ``colour``."""
    positions = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32).tobytes()
    uvs = np.array([[0, 1], [1, 1], [0, 0], [1, 0]], np.float32).tobytes()
    indices = np.array([0, 1, 2, 2, 1, 3], np.uint16).tobytes() + b"\x00\x00"
    out = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(out, "PNG")
    png = out.getvalue() + b"\x00" * (-len(out.getvalue()) % 4)
    blobs = [positions, uvs, indices, png]
    offsets = np.cumsum([0] + [len(blob) for blob in blobs[:-1]]).tolist()
    document = {
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0, "TEXCOORD_0": 1},
                                    "indices": 2, "material": 0}]}],
        "materials": [{"pbrMetallicRoughness": {"baseColorTexture": {"index": 0},
                                                "metallicFactor": 0}}],
        "textures": [{"source": 0}],
        "images": [{"bufferView": 3, "mimeType": "image/png"}],
        "buffers": [{"byteLength": sum(len(blob) for blob in blobs)}],
        "bufferViews": [{"buffer": 0, "byteOffset": offset, "byteLength": len(blob)}
                        for offset, blob in zip(offsets, blobs, strict=True)],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3",
             "min": [0, 0, 0], "max": [1, 1, 0]},
            {"bufferView": 1, "componentType": 5126, "count": 4, "type": "VEC2"},
            {"bufferView": 2, "componentType": 5123, "count": 6, "type": "SCALAR"},
        ],
    }  # fmt: skip
    return glb_pack(json.dumps(document).encode(), b"".join(blobs))
