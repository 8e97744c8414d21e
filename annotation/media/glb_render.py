"""Rendered views of a binary glTF model, made once at import (docs/import-format.md, "3D
models"): a software rasteriser in numpy, so judges that read images see a 3D response and a
page without WebGL still shows it.

The scene's meshes are drawn with their node transforms, flat-shaded (Lambert, lit from above
the camera's left) in their base colour factor times their vertex colours (textures are not
sampled), with a z-buffer, under an orthographic camera from each of ``VIEWS``. The model's
bounding box is centred and its half-diagonal fills ``FILL`` of half the image, the same scale
in every view. It reads a model ``glb.glb_inspect`` has checked (types, bounds, strict node
trees, the triangle limit counted before anything is read); one it still cannot draw (no
triangles, vertices that are not finite or all at one point, an index past its vertices) raises
``GlbError`` naming the reason.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from PIL import Image

from annotation.media.glb import GlbError, GlbInfo
from annotation.media.glb_json import TRIANGLE_FAN, TRIANGLE_STRIP, TRIANGLES, type_components

# (name, azimuth, elevation) in degrees; azimuth 0 looks at the model's front (from +z),
# 90 from its right (+x); elevation 90 looks down from +y, glTF's up.
VIEWS: tuple[tuple[str, float, float], ...] = (
    ("front", 0, 0),
    ("right", 90, 0),
    ("back", 180, 0),
    ("left", 270, 0),
    ("top", 0, 90),
    ("three-quarter", 45, 30),
)
VIEW_SIZE = 512
FILL = 0.9
BACKGROUND = (236, 236, 236)
AMBIENT = 0.25
# The light shines from the camera, moved this far to its left (-right) and up, so that faces
# at different angles differ in shade.
LIGHT_OFFSET = (-0.3, 0.5)
_DTYPES = {5120: "<i1", 5121: "<u1", 5122: "<i2", 5123: "<u2", 5125: "<u4", 5126: "<f4"}
_NORMALIZERS = {5120: 127.0, 5121: 255.0, 5122: 32767.0, 5123: 65535.0, 5125: 4294967295.0}
# Pixels tested at once when rasterising (triangles x their bounding boxes).
_CHUNK_SAMPLES = 2_000_000


@dataclass(frozen=True)
class Triangles:
    """A model's triangles in world space: ``positions`` (n, 3, 3) and their linear RGB
    ``colours`` (n, 3), one per triangle."""

    positions: np.ndarray
    colours: np.ndarray


def glb_render_views(info: GlbInfo, *, size: int = VIEW_SIZE) -> list[bytes]:
    """One PNG per entry of ``VIEWS``, ``size`` pixels square; raises ``GlbError``."""
    triangles = glb_triangles(info)
    low = triangles.positions.reshape(-1, 3).min(axis=0)
    high = triangles.positions.reshape(-1, 3).max(axis=0)
    centre = (low + high) / 2
    radius = float(np.linalg.norm(high - low)) / 2
    if not radius > 0:
        raise GlbError("cannot be rendered: all its vertices are at one point")
    scale = size / 2 * FILL / radius
    return [
        _png(render_view(triangles, centre, scale, azimuth, elevation, size=size))
        for _, azimuth, elevation in VIEWS
    ]


def glb_triangles(info: GlbInfo) -> Triangles:
    """Every triangle the default scene draws, transformed to world space; raises
    ``GlbError`` when there is none or the geometry cannot be read. ``glb_inspect`` has
    checked the counts against ``ARBITER_MAX_MODEL3D_TRIANGLES``, so what is read is bounded;
    the count is checked again here as it is drawn."""
    reader = _Reader(info)
    positions: list[np.ndarray] = []
    colours: list[np.ndarray] = []
    limit = settings.ARBITER_MAX_MODEL3D_TRIANGLES
    count = 0
    # Each mesh is read once, however many nodes show it.
    meshes: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for mesh_index, matrix in reader.mesh_instances():
        if mesh_index not in meshes:
            meshes[mesh_index] = [
                reader.primitive_triangles(primitive, f"meshes[{mesh_index}].primitives[{number}]")
                for number, primitive in enumerate(reader.primitives(mesh_index))
            ]
        for corners, colour in meshes[mesh_index]:
            count += len(corners)
            if count > limit:
                raise GlbError(
                    f"cannot be rendered: more than the limit of {limit:,} triangles"
                )  # fmt: skip
            if len(corners):
                world = corners @ matrix[:3, :3].T + matrix[:3, 3]
                positions.append(world)
                colours.append(colour)
    if not positions:
        raise GlbError("cannot be rendered: its scene has no triangles")
    stacked = np.concatenate(positions)
    if not np.isfinite(stacked).all():
        raise GlbError("cannot be rendered: a vertex position is not a finite number")
    return Triangles(stacked, np.concatenate(colours))


class _Reader:
    """Reads a model ``glb_inspect`` has checked: every index, type and bound in its document
    is known to be right."""

    def __init__(self, info: GlbInfo) -> None:
        self.info = info
        self.document = info.document
        self.bin = info.bin_chunk

    def mesh_instances(self) -> Iterator[tuple[int, np.ndarray]]:
        """(mesh index, 4x4 world matrix) for every node of the default scene with a mesh:
        one step per node, each after its parent (the nodes form trees)."""
        nodes = self.document["nodes"]
        world: dict[int, np.ndarray] = {}
        for index, parent in self.info.scene_nodes:
            if index in world or (parent != -1 and parent not in world):
                raise GlbError(f"cannot be rendered: nodes[{index}] is not in a tree")
            node = nodes[index]
            world[index] = _node_matrix(node)
            if parent != -1:
                world[index] = world[parent] @ world[index]
            if "mesh" in node:
                yield node["mesh"], world[index]

    def primitives(self, mesh_index: int) -> list[dict]:
        return self.document["meshes"][mesh_index]["primitives"]

    def primitive_triangles(self, primitive: dict, where: str) -> tuple[np.ndarray, np.ndarray]:
        """The primitive's triangles (n, 3, 3) in its mesh's space and their colours (n, 3);
        points and lines give none."""
        mode = primitive.get("mode", TRIANGLES)
        attributes = primitive["attributes"]
        if mode not in (TRIANGLES, TRIANGLE_STRIP, TRIANGLE_FAN):
            return np.zeros((0, 3, 3)), np.zeros((0, 3))
        if "POSITION" not in attributes:
            raise GlbError(f"cannot be rendered: {where} has no POSITION attribute")
        positions = self.accessor(attributes["POSITION"])
        if "indices" in primitive:
            indices = self.accessor(primitive["indices"])[:, 0].astype(np.int64)
            if len(indices) and (indices.min() < 0 or indices.max() >= len(positions)):
                raise GlbError(f"cannot be rendered: {where} has an index past its vertices")
        else:
            indices = np.arange(len(positions))
        corners = _triangle_corners(indices, mode)
        colour = np.ones((len(positions), 3))
        if "COLOR_0" in attributes:
            vertex_colours = self.accessor(attributes["COLOR_0"])
            if len(vertex_colours) != len(positions):
                raise GlbError(f"cannot be rendered: {where} COLOR_0 does not match POSITION")
            colour = vertex_colours[:, :3]
        face_colour = colour[corners].mean(axis=1) * self.base_colour(primitive)
        return positions[corners], np.clip(face_colour, 0.0, 1.0)

    def base_colour(self, primitive: dict) -> np.ndarray:
        if "material" not in primitive:
            return np.array([0.8, 0.8, 0.8])
        pbr = self.document["materials"][primitive["material"]].get("pbrMetallicRoughness", {})
        return np.array(pbr.get("baseColorFactor", [1.0, 1.0, 1.0, 1.0])[:3], dtype=np.float64)

    def accessor(self, index: int) -> np.ndarray:
        """An accessor's elements as float64 (count, components); ``glb_inspect`` has checked
        that they lie inside their buffer view, are aligned, and that their count is within
        the limits."""
        accessor = self.document["accessors"][index]
        components = type_components(accessor)
        dtype = _DTYPES[accessor["componentType"]]
        count = accessor["count"]
        if "bufferView" not in accessor:
            return np.zeros((count, components))
        view = self.document["bufferViews"][accessor["bufferView"]]
        width = np.dtype(dtype).itemsize
        values = np.ndarray(
            (count, components), dtype=dtype, buffer=self.bin,
            offset=view["byteOffset"] + accessor["byteOffset"],
            strides=(view.get("byteStride") or width * components, width),
        ).astype(np.float64)  # fmt: skip
        if accessor.get("normalized") and accessor["componentType"] in _NORMALIZERS:
            values = np.maximum(values / _NORMALIZERS[accessor["componentType"]], -1.0)
        return values


def _triangle_corners(indices: np.ndarray, mode: int) -> np.ndarray:
    """(n, 3) vertex indices of the triangles of a list, a strip or a fan."""
    if mode == TRIANGLES:
        usable = len(indices) - len(indices) % 3
        return indices[:usable].reshape(-1, 3)
    if len(indices) < 3:
        return np.zeros((0, 3), dtype=np.int64)
    steps = np.arange(len(indices) - 2)
    if mode == TRIANGLE_FAN:
        return np.stack(
            [np.full_like(steps, indices[0]), indices[steps + 1], indices[steps + 2]], 1
        )
    # A strip's every other triangle is wound the other way round.
    odd = steps % 2 == 1
    first = np.where(odd, indices[steps + 1], indices[steps])
    second = np.where(odd, indices[steps], indices[steps + 1])
    return np.stack([first, second, indices[steps + 2]], 1)


def _node_matrix(node: dict) -> np.ndarray:
    if "matrix" in node:
        return np.array(node["matrix"], dtype=np.float64).reshape(4, 4).T  # column by column
    translation = node.get("translation", [0.0, 0.0, 0.0])
    x, y, z, w = node.get("rotation", [0.0, 0.0, 0.0, 1.0])
    scale = np.array(node.get("scale", [1.0, 1.0, 1.0]))
    rotation = np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip
    matrix = np.eye(4)
    matrix[:3, :3] = rotation * scale
    matrix[:3, 3] = translation
    return matrix


def camera_axes(azimuth: float, elevation: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(right, up, towards the camera) unit vectors of a view."""
    az, el = np.radians(azimuth), np.radians(elevation)
    towards = np.array([np.sin(az) * np.cos(el), np.sin(el), np.cos(az) * np.cos(el)])
    # Looking straight down, "up" on screen is the model's back (-z turned by the azimuth).
    world_up = np.array([0.0, 1.0, 0.0]) if abs(el) < np.radians(89) else -_flat(az)
    right = np.cross(world_up, towards)
    right /= np.linalg.norm(right)
    return right, np.cross(towards, right), towards


def _flat(az: float) -> np.ndarray:
    return np.array([np.sin(az), 0.0, np.cos(az)])


def render_view(
    triangles: Triangles,
    centre: np.ndarray,
    scale: float,
    azimuth: float,
    elevation: float,
    *,
    size: int,
) -> np.ndarray:
    """The model seen from (``azimuth``, ``elevation``): an sRGB (size, size, 3) uint8 array;
    ``scale`` pixels per model unit, ``centre`` in the middle of the image."""
    right, up, towards = camera_axes(azimuth, elevation)
    relative = triangles.positions - centre
    screen_x = size / 2 + (relative @ right) * scale
    screen_y = size / 2 - (relative @ up) * scale
    depth = -(relative @ towards)  # smaller is nearer the camera
    normals = np.cross(
        triangles.positions[:, 1] - triangles.positions[:, 0],
        triangles.positions[:, 2] - triangles.positions[:, 0],
    )
    lengths = np.linalg.norm(normals, axis=1)
    visible = lengths > 0
    # Drawn from both sides: each normal is turned towards the camera before it is lit.
    unit = normals / np.where(visible, lengths, 1.0)[:, None]
    unit *= np.where(unit @ towards < 0, -1.0, 1.0)[:, None]
    light = towards + LIGHT_OFFSET[0] * right + LIGHT_OFFSET[1] * up
    shade = AMBIENT + (1 - AMBIENT) * np.maximum(0.0, unit @ (light / np.linalg.norm(light)))
    face_colour = triangles.colours * shade[:, None]
    face = _rasterise(screen_x, screen_y, depth, visible, size)
    image = np.empty((size, size, 3), dtype=np.uint8)
    image[:] = BACKGROUND
    drawn = face >= 0
    image[drawn] = _to_srgb8(face_colour[face[drawn]])
    return image


def _rasterise(
    xs: np.ndarray, ys: np.ndarray, depth: np.ndarray, visible: np.ndarray, size: int
) -> np.ndarray:
    """The index of the nearest triangle covering each pixel's centre, -1 for none. Triangles
    are tested in chunks of similar bounding boxes, each against every pixel of its box."""
    x0 = np.clip(np.floor(xs.min(axis=1) - 0.5), 0, size).astype(np.int64)
    x1 = np.clip(np.ceil(xs.max(axis=1) - 0.5), -1, size - 1).astype(np.int64)
    y0 = np.clip(np.floor(ys.min(axis=1) - 0.5), 0, size).astype(np.int64)
    y1 = np.clip(np.ceil(ys.max(axis=1) - 0.5), -1, size - 1).astype(np.int64)
    widths, heights = x1 - x0 + 1, y1 - y0 + 1
    keep = np.flatnonzero(visible & (widths > 0) & (heights > 0))
    order = keep[np.argsort(widths[keep] * heights[keep], kind="stable")]
    zbuffer = np.full(size * size, np.inf)
    faces = np.full(size * size, -1, dtype=np.int64)
    start = 0
    while start < len(order):
        # The chunk's boxes are at most as large as its last (largest) triangle's.
        box = widths[order[start]] * heights[order[start]]
        end = min(len(order), start + max(1, _CHUNK_SAMPLES // max(1, box)))
        while end - start > 1 and (
            widths[order[start:end]].max() * heights[order[start:end]].max() * (end - start)
            > 2 * _CHUNK_SAMPLES
        ):
            end = start + (end - start) // 2
        chunk = order[start:end]
        _draw_chunk(chunk, xs, ys, depth, x0, y0, widths, heights, size, zbuffer, faces)
        start = end
    return faces.reshape(size, size)


def _draw_chunk(chunk, xs, ys, depth, x0, y0, widths, heights, size, zbuffer, faces) -> None:
    box_w, box_h = int(widths[chunk].max()), int(heights[chunk].max())
    offsets = np.arange(box_w * box_h)
    px = x0[chunk, None] + offsets % box_w  # (triangles, samples)
    py = y0[chunk, None] + offsets // box_w
    cx, cy = px + 0.5, py + 0.5
    ax, bx, ccx = (xs[chunk, k, None] for k in range(3))
    ay, by, ccy = (ys[chunk, k, None] for k in range(3))
    area = (bx - ax) * (ccy - ay) - (by - ay) * (ccx - ax)
    w0 = (bx - cx) * (ccy - cy) - (by - cy) * (ccx - cx)
    w1 = (ccx - cx) * (ay - cy) - (ccy - cy) * (ax - cx)
    w2 = area - w0 - w1
    with np.errstate(divide="ignore", invalid="ignore"):
        l0, l1, l2 = w0 / area, w1 / area, w2 / area
        z = l0 * depth[chunk, 0, None] + l1 * depth[chunk, 1, None] + l2 * depth[chunk, 2, None]
    inside = (
        (area != 0) & (l0 >= 0) & (l1 >= 0) & (l2 >= 0)
        & (px <= x0[chunk, None] + widths[chunk, None] - 1)
        & (py <= y0[chunk, None] + heights[chunk, None] - 1) & (px < size) & (py < size)
    )  # fmt: skip
    if not inside.any():
        return
    rows, _ = np.nonzero(inside)
    pixel = (py * size + px)[inside]
    near = z[inside]
    triangle = chunk[rows]
    sort = np.lexsort((near, pixel))
    pixel, near, triangle = pixel[sort], near[sort], triangle[sort]
    first = np.ones(len(pixel), dtype=bool)
    first[1:] = pixel[1:] != pixel[:-1]
    pixel, near, triangle = pixel[first], near[first], triangle[first]
    closer = near < zbuffer[pixel]
    zbuffer[pixel[closer]] = near[closer]
    faces[pixel[closer]] = triangle[closer]


def _to_srgb8(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    srgb = np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)
    return np.round(srgb * 255).astype(np.uint8)


def _png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="PNG", optimize=False)
    return out.getvalue()
