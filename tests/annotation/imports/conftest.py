"""Helpers for the import tests: small real images, pair dicts, files, and the check that a
refused import left nothing behind."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from annotation.models import Media, Pair, PriorAnnotation, ProjectMedia, Prompt, Response
from tests.celery_worker import ROOT, database_url_for_tests


def image_bytes(colour=(200, 30, 30), size=(24, 16), fmt="PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, fmt)
    return buffer.getvalue()


def png_bomb(width: int = 50_000, height: int = 50_000) -> bytes:
    """A tiny, valid PNG header declaring a huge image: what a decompression bomb looks like
    before it is decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * 1024)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    )


def text_pair(pair_id: str, prompt: str = "Which is better?", **extra) -> dict:
    pair = {
        "id": pair_id,
        "task": "text",
        "prompt_content": [["text", f"{prompt} ({pair_id})"]],
        "response_a": {"model_name": "m-one", "response_content": [["text", f"A for {pair_id}"]]},
        "response_b": {"model_name": "m-two", "response_content": [["text", f"B for {pair_id}"]]},
    }
    pair.update(extra)
    return pair


def image_pair(pair_id: str, path_a: str, path_b: str, **extra) -> dict:
    pair = text_pair(pair_id, task="t2i", **extra)
    pair["response_a"]["response_content"] = [["image", path_a]]
    pair["response_b"]["response_content"] = [["image", path_b]]
    return pair


def write_jsonl(path: Path, pairs: list) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for pair in pairs:
            out.write((pair if isinstance(pair, str) else json.dumps(pair)) + "\n")
    return path


def jsonl_bytes(pairs: list) -> bytes:
    """Pairs as JSON Lines; a string is written as it is (to make bad lines)."""
    return "".join((p if isinstance(p, str) else json.dumps(p)) + "\n" for p in pairs).encode()


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/octet-stream")


def import_pairs_process(slug: str, path: Path) -> subprocess.Popen:
    """``manage.py import_pairs SLUG PATH`` in a child process on the test database (which it
    sees only when the test commits: ``transaction=True``), stdout and stderr as text pipes."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "ARBITER_MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "ARBITER_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, "manage.py", "import_pairs", slug, str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def leftover_uploads() -> list[Path]:
    """Whatever an import left in its private folders: uploads, staged and unpacked media."""
    root = Path(settings.MEDIA_ROOT)
    folders = (root / ".uploads", root / ".staging", root / ".unpacked")
    return sorted(p for folder in folders if folder.exists() for p in folder.iterdir())


def wait_for_uploads_removed(timeout: float = 10.0) -> None:
    """For a job run by a real worker: its uploads are removed just after its status is
    committed, so a test that has just read the status waits for them to go."""
    deadline = time.monotonic() + timeout
    while left := leftover_uploads():
        assert time.monotonic() < deadline, f"uploads left after {timeout} s: {left}"
        time.sleep(0.1)


def stored_files() -> list[Path]:
    """Files under MEDIA_ROOT, staging and upload folders included."""
    root = Path(settings.MEDIA_ROOT)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def assert_nothing_imported(project, files_before: list[Path] | None = None) -> None:
    assert not Pair.objects.filter(project=project).exists()
    assert not Prompt.objects.filter(project=project).exists()
    assert not Response.objects.filter(project=project).exists()
    assert not ProjectMedia.objects.filter(project=project).exists()
    assert not PriorAnnotation.objects.filter(pair__project=project).exists()
    assert not Media.objects.exists()
    media_files = [p for p in stored_files() if ".uploads" not in p.parts]
    assert media_files == (files_before or []), "a refused import left media files behind"
