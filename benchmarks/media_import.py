"""How fast media is ingested at import, and in how much memory, inside a real Celery worker
(issue 17, "Speed"; issue 31, "Bounded by construction"): each file is checked in a bounded
child of the worker's pool process (annotation/media/bounded.py), probed, decoded in full and
given its served copy; a 3D model's views are rendered.

Writes once, into a temporary folder, ``--files`` files per modality: small images (PNG and
JPEG, ``--images`` of them), five-second 480p videos (H.264 and AAC in MP4, 25 frames a
second), five-second audio clips (WAV and MP3 in turn) and binary glTF models, with a pairs
file for each modality (two files a pair). Then, for the limits on and off
(``ARBITER_MEDIA_LIMITS``), starts ``celery -A config worker -c 2`` on the broker named by
``CELERY_BROKER_URL`` (Redis) and the database named by DATABASE_URL, and imports each
modality ``--runs`` times (3) as an import job into a new throw-away project, as the web form
does for a large upload. Prints the cost of a bounded child for a small image (milliseconds a file,
against the same check in the calling process) and, per run and as the median with its
spread: media files per second, and the peak memory of the worker and all its processes (its
pool processes, their media servers and children), sampled every 50 ms with psutil: the sum
of their PSS (a page that forked processes share counts once) and the largest RSS.

With ``--storage s3`` (or both, the default) the same imports write to a bucket
(``ARBITER_STORAGE=s3``; benchmarks/bucket.py: moto's server unless ``ARBITER_S3_ENDPOINT_URL``
names another) beside local disk; the store is emptied after each run, so every run writes
every file.

Files are distinct (each has its own sha256), but to keep generation short only
``--distinct`` videos and MP3 clips are encoded; the others are remuxes of those with their
own title tag. Targets: >= 20 video and audio files per second on a 2-core machine, peak RSS
of the worker's processes < 500 MB each.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/14 \\
        .venv/bin/python benchmarks/media_import.py               # 40 files a modality
    ... benchmarks/media_import.py --files 20 --images 100 --runs 1   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from agreement_speed import ROOT, setup_django
from bucket import bucket_environment, empty_store, use_storage
from import_speed import drop_project, new_project

FPS, SECONDS, WIDTH, HEIGHT, RATE = 25, 5, 854, 480, 44100


def _tone(frequency: float, channels: int = 2):
    import numpy as np

    t = np.arange(RATE * SECONDS) / RATE
    wave = (0.3 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)
    return np.ascontiguousarray(np.stack([wave] * channels))


def _audio_mux(container, stream, samples) -> None:
    import av
    import numpy as np

    fmt = stream.codec_context.format.name
    step = stream.codec_context.frame_size or 1024
    for start in range(0, samples.shape[1], step):
        piece = samples[:, start : start + step]
        if fmt == "s16":
            frame = av.AudioFrame.from_ndarray(
                (piece.T.reshape(1, -1) * 32767).astype("int16"), format="s16", layout="stereo"
            )
        else:
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(piece), format=fmt, layout="stereo"
            )
        frame.sample_rate, frame.pts = RATE, start
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def write_video(path: Path, seed: int) -> None:
    """Five seconds of a scrolling block pattern with a moving box, and a tone."""
    import av
    import numpy as np

    rng = np.random.default_rng(seed)
    tiles = rng.integers(0, 255, (HEIGHT // 16, WIDTH // 16 + 1, 3), dtype=np.uint8)
    base = tiles.repeat(16, 0).repeat(16, 1)[:HEIGHT, :WIDTH]
    with av.open(str(path), "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=FPS, options={"preset": "veryfast"})
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        audio = container.add_stream("aac", rate=RATE, layout="stereo")
        for index in range(FPS * SECONDS):
            pixels = np.roll(base, index * 4, axis=1)
            left = (index * 6) % (WIDTH - 80)
            pixels[100:180, left : left + 80] = (255, 40, 0)
            for packet in video.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in video.encode():
            container.mux(packet)
        _audio_mux(container, audio, _tone(220 + seed * 7))


def write_mp3(path: Path, seed: int) -> None:
    import av

    with av.open(str(path), "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=RATE, layout="stereo")
        stream.codec_context.format = "fltp"
        _audio_mux(container, stream, _tone(300 + seed * 11))


def write_wav(path: Path, index: int) -> None:
    import av

    with av.open(str(path), "w", format="wav") as container:
        container.metadata["title"] = f"clip {index}"
        stream = container.add_stream("pcm_s16le", rate=RATE, layout="stereo")
        _audio_mux(container, stream, _tone(200 + index % 600))


def remux_tagged(source: Path, dest: Path, tag: str) -> None:
    """A copy of ``source`` with the same packets and its own title: distinct bytes."""
    import av

    muxer = {".mp4": "mp4", ".mp3": "mp3"}[source.suffix]
    with av.open(str(source)) as original, av.open(str(dest), "w", format=muxer) as copy:
        copy.metadata["title"] = tag
        outputs = {s.index: copy.add_stream_from_template(s) for s in original.streams}
        for packet in original.demux():
            if packet.dts is None:
                continue
            packet.stream = outputs[packet.stream.index]
            copy.mux(packet)


MODALITIES = ("image", "video", "audio", "model3d")


def write_image(path: Path, seed: int) -> None:
    """A 256x256 picture of coloured noise: small, and distinct for each seed."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    Image.fromarray(pixels).save(path, "JPEG" if path.suffix == ".jpg" else "PNG")


def write_model(path: Path, seed: int) -> None:
    from annotation.media.demo import COLOURS, SHAPES, glb_model

    shapes, colours = sorted(SHAPES), sorted(COLOURS)
    path.write_bytes(glb_model(shapes[seed % len(shapes)], colours[seed % len(colours)]))


def generate(folder: Path, files: int, images: int, distinct: int) -> dict[str, Path]:
    """A folder of media and a pairs file for each modality; returns the folders."""
    started = time.perf_counter()
    bases = folder / "bases"
    bases.mkdir(parents=True)
    for seed in range(distinct):
        write_video(bases / f"v{seed}.mp4", seed)
        write_mp3(bases / f"a{seed}.mp3", seed)
    folders = {}
    for modality in MODALITIES:
        media = folder / modality / "media"
        media.mkdir(parents=True)
        names = []
        for number in range(images if modality == "image" else files):
            if modality == "image":
                name = f"i{number}.{'jpg' if number % 2 else 'png'}"
                write_image(media / name, number)
            elif modality == "video":
                name = f"v{number}.mp4"
                remux_tagged(bases / f"v{number % distinct}.mp4", media / name, f"video {number}")
            elif modality == "audio" and number % 2:
                name = f"a{number}.mp3"
                remux_tagged(bases / f"a{number % distinct}.mp3", media / name, f"clip {number}")
            elif modality == "audio":
                name = f"a{number}.wav"
                write_wav(media / name, number)
            else:
                name = f"m{number}.glb"
                write_model(media / name, number)
            names.append(name)
        lines = [
            {
                "id": f"{modality}-{index}",
                "task": f"t2{modality}",
                "prompt_content": [["text", f"Prompt {index}"]],
                "response_a": {"model_name": "m1", "response_content": [[modality, a]]},
                "response_b": {"model_name": "m2", "response_content": [[modality, b]]},
            }
            for index, (a, b) in enumerate(zip(names[::2], names[1::2], strict=False))
        ]
        (folder / modality / "pairs.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines)
        )
        with tarfile.open(folder / modality / "media.tar", "w") as archive:
            for name in names:
                archive.add(media / name, arcname=name)
        folders[modality] = folder / modality
    print(f"generated the media in {time.perf_counter() - started:.1f} s")
    return folders


class Worker:
    """``celery -A config worker -c 2``, its processes' RSS sampled while an import runs."""

    def __init__(self, *, limits: bool):
        env = {**os.environ, "ARBITER_MEDIA_LIMITS": "true" if limits else "false"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-c", "2", "-Q",
             "imports", "--without-gossip", "--without-mingle", "-l", "WARNING"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        from config.celery import app

        deadline = time.monotonic() + 120
        while not app.control.ping(timeout=1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Celery worker did not start")

    def rss(self) -> tuple[float, float]:
        """The memory of the worker and its processes, in MB: in all (the sum of their PSS,
        which counts a page that forked processes share once) and the largest RSS."""
        import psutil

        pss, rss = [], []
        try:
            root = psutil.Process(self.process.pid)
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    memory = process.memory_full_info()
                    pss.append(memory.pss)
                    rss.append(memory.rss)
        except psutil.Error:
            pass
        return sum(pss) / 2**20, max(rss, default=0) / 2**20

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run_import(worker: Worker, folder: Path) -> dict:
    """One import job of ``folder``'s pairs, run by ``worker``; its figures."""
    from django.conf import settings

    from annotation.imports.services import _enqueue
    from annotation.models import ImportJob, Media

    project = new_project()
    uploads = Path(settings.MEDIA_ROOT) / ".uploads" / uuid.uuid4().hex
    uploads.mkdir(parents=True)
    for name in ("pairs.jsonl", "media.tar"):
        shutil.copyfile(folder / name, uploads / name)
    root = Path(settings.MEDIA_ROOT)
    job = ImportJob.objects.create(
        project=project, filename="pairs.jsonl",
        upload_path=str((uploads / "pairs.jsonl").relative_to(root)),
        media_archive_path=str((uploads / "media.tar").relative_to(root)),
        bytes_total=(folder / "pairs.jsonl").stat().st_size,
    )  # fmt: skip
    peak_sum = peak_one = 0.0
    started = time.perf_counter()
    try:
        _enqueue(job.pk)
        while True:
            total, largest = worker.rss()
            peak_sum, peak_one = max(peak_sum, total), max(peak_one, largest)
            job.refresh_from_db()
            if job.finished:
                break
            if worker.process.poll() is not None:
                raise RuntimeError("the Celery worker died during the import")
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        if job.status != ImportJob.Status.SUCCEEDED:
            raise RuntimeError(f"import {job.pk} {job.status}: {job.error or ''}"[:2000])
        files = sum(1 for f in (folder / "media").iterdir())
    finally:
        drop_project(project)
        Media.objects.all().delete()
        empty_store()
    return {"files": files, "seconds": seconds, "rss_sum": peak_sum, "rss_one": peak_one}


def overhead(folder: Path, calls: int = 200) -> None:
    """Milliseconds a small image's check costs in the calling process and in a bounded
    child (the child's start, its limits, the call and result passed through files)."""
    from annotation.imports.media import image_check
    from annotation.media.bounded import bounded_call

    path = folder / "overhead.png"
    write_image(path, 0)
    bounded_call(image_check, path, kind="image")  # the media server's start: once a process
    figures = {}
    for where, check in (
        ("in process", lambda: image_check(path)),
        ("bounded child", lambda: bounded_call(image_check, path, kind="image")),
    ):
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            check()
            times.append(1000 * (time.perf_counter() - started))
        figures[where] = statistics.median(times)
        print(
            f"a 256x256 PNG checked {where}: median {figures[where]:.1f} ms "
            f"(p10 {statistics.quantiles(times, n=10)[0]:.1f}, "
            f"p90 {statistics.quantiles(times, n=10)[-1]:.1f})"
        )
    print(
        f"overhead of the bounded child: {figures['bounded child'] - figures['in process']:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=40, help="video, audio and 3D files")
    parser.add_argument("--images", type=int, default=400, help="image files")
    parser.add_argument("--runs", type=int, default=3, help="imports per modality and setting")
    parser.add_argument("--distinct", type=int, default=8, help="videos and MP3s encoded")
    parser.add_argument("--modality", choices=MODALITIES, action="append")
    parser.add_argument("--storage", choices=("local", "s3"), action="append")
    parser.add_argument("--limits", choices=("on", "off", "both"), default="both")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="arbiter-media-import-"))
    os.environ["ARBITER_MEDIA_ROOT"] = str(scratch / "store")
    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/14")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
    server = None
    try:
        setup_django()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        folders = generate(scratch / "input", args.files, args.images, args.distinct)
        overhead(scratch)
        results: dict[tuple[str, str, bool], list[dict]] = {}
        for where in args.storage or ("local", "s3"):
            environment: dict[str, str] = {}
            if where == "s3":
                server, environment = bucket_environment()
            use_storage(environment)
            for limits in {"on": (True,), "off": (False,), "both": (True, False)}[args.limits]:
                _run_worker(args, folders, where, limits, results)
        print(
            "\nmodality  storage limits  files/s median (min-max)   peak PSS all / largest RSS (MB)"
        )
        for (modality, where, limits), runs in results.items():
            rates = [r["files"] / r["seconds"] for r in runs]
            print(
                f"{modality:9} {where:7} {'on ' if limits else 'off'}     "
                f"{statistics.median(rates):6.2f} ({min(rates):.2f}-{max(rates):.2f})"
                f"{'':13}{max(r['rss_sum'] for r in runs):.0f} / "
                f"{max(r['rss_one'] for r in runs):.0f}"
            )
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _run_worker(args, folders: dict[str, Path], where: str, limits: bool, results: dict) -> None:
    """Every modality's ``--runs`` imports in one worker started for ``where`` and ``limits``."""
    worker = Worker(limits=limits)
    try:
        for modality in args.modality or MODALITIES:
            for run in range(args.runs):
                result = run_import(worker, folders[modality])
                results.setdefault((modality, where, limits), []).append(result)
                print(
                    f"{where:5} limits {'on ' if limits else 'off'} {modality:8} run {run + 1}: "
                    f"{result['files']:,} files in {result['seconds']:.1f} s = "
                    f"{result['files'] / result['seconds']:.1f} files/s; peak RSS "
                    f"{result['rss_sum']:.0f} MB in all (PSS), {result['rss_one']:.0f} MB "
                    "the largest process",
                    flush=True,
                )
    finally:
        worker.stop()


if __name__ == "__main__":
    main()
