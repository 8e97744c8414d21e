"""Factories of the media tests. Tiny video, audio and GLB files made at test time with PyAV
and numpy (nothing downloaded), with a model name planted in every metadata field the served
copy must lose; binary glTF models built from numpy arrays, with a material, vertex colours
and node transforms as asked; and ``assert_no_planted``, which looks for a planted name in
served bytes in every form it can take there."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import struct
from pathlib import Path

import av
import numpy as np
from PIL import Image

PLANTED = "SecretGen-9000"
_TAGS = ("title", "comment", "encoder", "artist", "album", "description", "copyright")


def planted_forms(name: str) -> dict[str, bytes]:
    """``name`` as it can sit in a file: ASCII (any case), UTF-16 in both byte orders, and
    base64 (standard and URL-safe alphabets) at each of the three alignments a 3-byte group
    allows, cut to the characters that depend on ``name`` alone."""
    raw = name.encode()
    forms = {
        "ascii": raw.lower(),
        "utf-16-le": name.encode("utf-16-le"),
        "utf-16-be": name.encode("utf-16-be"),
    }
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw)
        start, end = -(-8 * offset // 6), 8 * (offset + len(raw)) // 6
        forms[f"base64+{offset}"] = encoded[start:end]
        forms[f"base64url+{offset}"] = base64.urlsafe_b64encode(bytes(offset) + raw)[start:end]
    return forms


def assert_no_planted(data: bytes, name: str = PLANTED) -> None:
    """Fails naming the form and the place when ``data`` holds ``name`` in any of its
    ``planted_forms``."""
    for form, needle in planted_forms(name).items():
        haystack = data.lower() if form == "ascii" else data
        where = haystack.find(needle)
        assert where < 0, f"{name!r} ({form}) found at byte {where} of {len(data)}"


def video_write(
    path: Path,
    *,
    fmt: str = "mp4",
    codec: str = "libx264",
    frames: int = 4,
    audio: bool = True,
    rate: int = 10,
) -> Path:
    """A few 64x48 frames (``rate`` a second) of a moving bar (and a tone as long), tagged
    with PLANTED."""
    with av.open(str(path), "w", format=fmt) as container:
        for tag in _TAGS:
            container.metadata[tag] = PLANTED
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.metadata["handler_name"] = PLANTED
        stream.metadata["title"] = PLANTED
        sound = None
        if audio:
            sound = container.add_stream("aac" if fmt == "mp4" else "libopus", rate=48000)
            sound.metadata["title"] = PLANTED
        for index in range(frames):
            pixels = np.zeros((48, 64, 3), np.uint8)
            column = index % 8 * 8
            pixels[:, column : column + 8] = (255, 64, 0)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if sound is not None:
            _tone_mux(container, sound, seconds=frames / rate)
    return path


def _tone(rate: int, seconds: float, frequency: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def _tone_mux(container, stream, *, seconds: float) -> None:
    rate = stream.codec_context.sample_rate
    samples = _tone(rate, seconds)
    fmt = stream.codec_context.format.name
    chunk = stream.codec_context.frame_size or 1024
    pts = 0
    for start in range(0, len(samples), chunk):
        piece = samples[start : start + chunk]
        if fmt.startswith("s16"):
            data = (piece * 32767).astype(np.int16).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(data, format=fmt, layout="mono")
        else:
            frame = av.AudioFrame.from_ndarray(piece.reshape(1, -1), format="fltp", layout="mono")
        frame.sample_rate, frame.pts = rate, pts
        pts += len(piece)
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


_AUDIO_CODECS = {"wav": "pcm_s16le", "mp3": "libmp3lame", "flac": "flac", "ogg": "libopus"}


def audio_write(path: Path, *, fmt: str = "wav", seconds: float = 0.2) -> Path:
    """A 0.2 s 440 Hz tone, tagged with PLANTED (ID3 for MP3, INFO for WAV)."""
    codec = _AUDIO_CODECS[fmt]
    with av.open(str(path), "w", format=fmt) as container:
        for tag in _TAGS:
            container.metadata[tag] = PLANTED
        rate = 48000 if codec == "libopus" else 16000
        stream = container.add_stream(codec, rate=rate)
        if codec == "libmp3lame":
            stream.codec_context.sample_rate = 16000
        stream.layout = "mono"
        _tone_mux(container, stream, seconds=seconds)
    return path


def decoded_digests(path: Path) -> dict[str, list[str]]:
    """Every decoded video frame's and audio frame's hash, per stream type."""
    out: dict[str, list[str]] = {"video": [], "audio": []}
    with av.open(str(path)) as container:
        streams = [*container.streams.video[:1], *container.streams.audio[:1]]
        for frame in container.decode(*streams):
            kind = "video" if isinstance(frame, av.VideoFrame) else "audio"
            out[kind].append(hashlib.sha256(frame.to_ndarray().tobytes()).hexdigest())
    return out


def glb_bytes(*, generator: str = PLANTED, json_extra: dict | None = None) -> bytes:
    """A one-triangle binary glTF whose asset.generator, extras and names carry PLANTED."""
    positions = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32).tobytes()
    document = {
        "asset": {"version": "2.0", "generator": generator, "copyright": PLANTED,
                  "extras": {"model": PLANTED}},
        "scene": 0,
        "scenes": [{"nodes": [0], "name": PLANTED}],
        "nodes": [{"mesh": 0, "name": PLANTED, "extras": {"by": PLANTED}}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}], "name": PLANTED}],
        "buffers": [{"byteLength": len(positions)}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": len(positions)}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                       "min": [0, 0, 0], "max": [1, 1, 0]}],
        "extras": {"generated_by": PLANTED},
    }  # fmt: skip
    document.update(json_extra or {})
    return glb_pack(json.dumps(document).encode(), positions)


def glb_split(data: bytes) -> tuple[dict, bytes]:
    """The JSON document and the BIN chunk of a well-formed binary glTF."""
    json_length = struct.unpack_from("<I", data, 12)[0]
    document = json.loads(data[20 : 20 + json_length])
    rest = data[20 + json_length :]
    return document, rest[8 : 8 + struct.unpack_from("<I", rest, 0)[0]] if rest else b""


def glb_pack(json_chunk: bytes, bin_chunk: bytes) -> bytes:
    json_chunk += b" " * (-len(json_chunk) % 4)
    bin_chunk += b"\x00" * (-len(bin_chunk) % 4)
    body = struct.pack("<I4s", len(json_chunk), b"JSON") + json_chunk
    body += struct.pack("<I4s", len(bin_chunk), b"BIN\x00") + bin_chunk
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


# Binary glTF models built for tests.
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


def textured_glb(
    colour: tuple[int, int, int] = (200, 30, 30),
    *,
    image: bytes | None = None,
    mime: str = "image/png",
) -> bytes:
    """A unit square whose only colour is an embedded 8 x 8 PNG texture of ``colour`` (or
    the ``image`` given, of type ``mime``)."""
    positions = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32).tobytes()
    uvs = np.array([[0, 1], [1, 1], [0, 0], [1, 0]], np.float32).tobytes()
    indices = np.array([0, 1, 2, 2, 1, 3], np.uint16).tobytes() + b"\x00\x00"
    if image is None:
        out = io.BytesIO()
        Image.new("RGB", (8, 8), colour).save(out, "PNG")
        image = out.getvalue()
    png = image + b"\x00" * (-len(image) % 4)
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
        "images": [{"bufferView": 3, "mimeType": mime}],
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
