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
does for a large upload, then once more with its memory sampled. Prints the cost of a bounded
child for a small image (milliseconds a file, against the same check in the calling process)
and, per run and as the median with its spread: media files per second, from the timed runs,
which watch nothing but the job's end (as nothing watches the limit's transcode); and, from
the memory run, the peak memory of the worker and all its processes (its pool processes,
their media servers and children), sampled every 50 ms from /proc: the sum of their PSS (a
page that forked processes share counts once) and the largest RSS. The sampler takes a few
per cent of the two cores from the import it watches, so that run's speed is printed but
kept out of the ratio.

With ``--storage s3`` (or both, the default) the same imports write to a bucket
(``ARBITER_STORAGE=s3``; benchmarks/bucket.py: moto's server unless ``ARBITER_S3_ENDPOINT_URL``
names another) beside local disk; the store is emptied after each run, so every run writes
every file.

For video and audio (issue 36), the same run measures the limit just before each import:
PyAV transcoding the very same files in ``os.cpu_count()`` processes, one FFmpeg thread each
(``transcode``: H.264 with libx264 ``veryfast``, CRF 18, a keyframe a second; AAC at 48 kHz,
192 kb/s, in MP4), in files per second; Arbiter's figure over it is the ratio. Each role's
peak RSS (the worker, its pool processes, the media server, the media children) is sampled
every 50 ms in the memory run. ``--long-seconds 120`` also imports a pair of two-minute
videos, to show that memory does not grow with the duration. The figures end as one JSON document.

Files are distinct (each has its own sha256), but to keep generation short only
``--distinct`` videos and MP3 clips are encoded; the others are remuxes of those with their
own title tag. Targets (issue 36): video and audio at >= 0.7 times the limit, peak RSS
of every process < 500 MB whatever the duration.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/14 \\
        .venv/bin/python benchmarks/media_import.py               # 40 files a modality
    ... benchmarks/media_import.py --files 20 --images 100 --runs 1   # a quick look
    ... benchmarks/media_import.py --modality video --modality audio --storage local \\
        --limits on --long-seconds 120                                  # issue 36's row
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
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


def _tone(frequency: float, channels: int = 2, seconds: int = SECONDS):
    import numpy as np

    t = np.arange(RATE * seconds) / RATE
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


def write_video(path: Path, seed: int, seconds: int = SECONDS) -> None:
    """Five seconds (or ``seconds``) of a scrolling block pattern with a moving box, and a
    tone."""
    import av
    import numpy as np

    rng = np.random.default_rng(seed)
    tiles = rng.integers(0, 255, (HEIGHT // 16, WIDTH // 16 + 1, 3), dtype=np.uint8)
    base = tiles.repeat(16, 0).repeat(16, 1)[:HEIGHT, :WIDTH]
    with av.open(str(path), "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=FPS, options={"preset": "veryfast"})
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        audio = container.add_stream("aac", rate=RATE, layout="stereo")
        for index in range(FPS * seconds):
            pixels = np.roll(base, index * 4, axis=1)
            left = (index * 6) % (WIDTH - 80)
            pixels[100:180, left : left + 80] = (255, 40, 0)
            for packet in video.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in video.encode():
            container.mux(packet)
        _audio_mux(container, audio, _tone(220 + seed * 7, seconds=seconds))


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
# The limit's transcode (issue 36): H.264 with libx264 "veryfast" at CRF 18, a keyframe a
# second, and AAC at 48 kHz, 192 kb/s; one FFmpeg thread a process, one process a core.
LIMIT_X264 = {"preset": "veryfast", "crf": "18"}
LIMIT_AUDIO_RATE, LIMIT_AUDIO_BIT_RATE = 48000, 192_000


def transcode(source: str, dest: str) -> None:
    """PyAV transcoding ``source`` as the limit does: every frame decoded and encoded again,
    the video to H.264 (its size and frame rate), the audio to stereo AAC, in MP4."""
    import av

    with av.open(source) as original, av.open(dest, "w", format="mp4") as copy:
        video = original.streams.video[0] if original.streams.video else None
        audio = original.streams.audio[0] if original.streams.audio else None
        streams = [s for s in (video, audio) if s is not None]
        for stream in streams:
            stream.codec_context.thread_count = 1
        video_out = audio_out = resampler = None
        if video is not None:
            rate = video.average_rate or video.guessed_rate
            keyint = max(1, round(rate))
            video_out = copy.add_stream("libx264", rate=rate, options={
                **LIMIT_X264, "x264-params": f"keyint={keyint}:min-keyint={keyint}:scenecut=0",
            })  # fmt: skip
            video_out.width, video_out.height = video.width, video.height
            video_out.pix_fmt = "yuv420p"
            video_out.codec_context.thread_count = 1
        if audio is not None:
            audio_out = copy.add_stream("aac", rate=LIMIT_AUDIO_RATE, layout="stereo")
            audio_out.bit_rate = LIMIT_AUDIO_BIT_RATE
            resampler = av.AudioResampler(format="fltp", layout="stereo", rate=LIMIT_AUDIO_RATE)
        for packet in original.demux(streams):
            for frame in packet.decode():
                if packet.stream is video:
                    frame.pts, frame.pict_type = None, av.video.frame.PictureType.NONE
                    copy.mux(video_out.encode(frame))
                else:
                    for piece in resampler.resample(frame):
                        piece.pts = None
                        copy.mux(audio_out.encode(piece))
        if video_out is not None:
            copy.mux(video_out.encode(None))
        if audio_out is not None:
            for piece in resampler.resample(None):
                piece.pts = None
                copy.mux(audio_out.encode(piece))
            copy.mux(audio_out.encode(None))


def _transcode_one(job: tuple[str, str]) -> int:
    """In a pool process: one file transcoded; its peak RSS so far, in bytes."""
    import resource

    transcode(*job)
    os.unlink(job[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure_limit(folder: Path, cores: int) -> dict:
    """The limit: PyAV transcoding every file of ``folder``'s media, ``cores`` processes."""
    import multiprocessing

    out = Path(tempfile.mkdtemp(prefix="arbiter-limit-"))
    files = sorted((folder / "media").iterdir())
    jobs = [(str(path), str(out / f"{index}.mp4")) for index, path in enumerate(files)]
    try:
        # Spawned, not forked: this process has threads (the broker's, the database's), and a
        # child forked while one of them holds a lock can wait for it forever.
        with multiprocessing.get_context("spawn").Pool(cores) as pool:
            pool.map(_transcode_one, jobs[:cores])  # imports PyAV, warms the processes
            started = time.perf_counter()
            peaks = pool.map(_transcode_one, jobs, chunksize=1)
            seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"files": len(files), "seconds": seconds, "peak_rss_mb": max(peaks) / 2**20}


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


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, parents before their children, read from each
    thread's ``/proc/<pid>/task/<tid>/children`` (a pool process starts its media server
    from a thread of its own)."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                path = f"/proc/{pid}/task/{tid}/children"
                with contextlib.suppress(OSError), open(path, "rb") as handle:
                    stack.extend(int(child) for child in handle.read().split())
    return found


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode(errors="replace")


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rsplit(b")", 1)[1].split()[1])


def _pss_kb(pid: int) -> int:
    """The process's PSS in kB, from ``smaps_rollup`` (one line, not a walk of every mapping)."""
    with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
        for line in handle:
            if line.startswith(b"Pss:"):
                return int(line.split()[1])
    return 0


class Worker:
    """``celery -A config worker -c 2``, its processes' RSS sampled while an import runs."""

    def __init__(self, *, limits: bool):
        env = {**os.environ, "ARBITER_MEDIA_LIMITS": "true" if limits else "false"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-c", "2", "-Q",
             "imports", "--without-gossip", "--without-mingle", "-l", "WARNING"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        self._roles: dict[int, str] = {}
        from config.celery import app

        deadline = time.monotonic() + 120
        while not app.control.ping(timeout=1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Celery worker did not start")

    def sample(self, peaks: dict[str, float], *, pss: bool) -> float:
        """Raises each role's entry of ``peaks`` (worker, pool process, media server, media
        child) to the largest RSS among its processes now, in MB; with ``pss``, returns the
        sum of their PSS (a page that forked processes share counts once), else 0.

        Read straight from /proc (each process's ``children``, ``statm`` and
        ``smaps_rollup``), a process's role once: the sampler shares the cores with the
        import it measures (the limit pays no such cost), and psutil's walk of every process
        on the machine cost 2.75 ms a sample, now 0.17 ms (the PSS, read every 0.5 s, still
        costs about 13 ms: the kernel walks each mapping)."""
        total = 0
        for pid in _descendants(self.process.pid):
            role = self._roles.get(pid) or self._role(pid)
            if role is None:
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{pid}/statm", "rb") as handle:
                    rss = int(handle.read().split()[1]) * _PAGE / 2**20
                peaks[role] = max(peaks.get(role, 0.0), rss)
                if pss:
                    total += _pss_kb(pid) * 1024
        return total / 2**20

    def _role(self, pid: int) -> str | None:
        """``pid``'s role, from its command line and its parent's (None once it has gone)."""
        try:
            command = _cmdline(pid)
            parent = _ppid(pid)
        except (OSError, ValueError, IndexError):
            return None
        media = "annotation.media.bounded_child"
        if pid == self.process.pid:
            role = "worker"
        elif media in command:
            role = "media child" if self._roles.get(parent) == "media server" else "media server"
        else:
            role = "pool process"
        self._roles[pid] = role
        return role

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run_import(worker: Worker, folder: Path, *, sample: bool) -> dict:
    """One import job of ``folder``'s pairs, run by ``worker``; its figures. With ``sample``,
    the memory of the worker's processes is sampled while it runs; without, nothing but the
    job's end is watched (one indexed read every 50 ms), as nothing watches the limit's
    transcode: the sampler costs a few per cent of the two cores it shares with the import."""
    from django.db import connection

    from annotation.core import storage
    from annotation.imports.services import UPLOADS, _enqueue, upload_key
    from annotation.models import ImportJob, Media

    project = new_project()
    keys = {}
    upload = uuid.uuid4().hex
    for name, prefix in (("pairs.jsonl", "pairs"), ("media.tar", "media")):
        keys[name] = upload_key(upload, prefix, name)
        storage.put_file(UPLOADS, keys[name], folder / name)
    job = ImportJob.objects.create(
        project=project, filename="pairs.jsonl",
        upload_path=keys["pairs.jsonl"], media_archive_path=keys["media.tar"],
        bytes_total=(folder / "pairs.jsonl").stat().st_size,
    )  # fmt: skip
    peak_sum = 0.0
    peaks: dict[str, float] = {}
    ended = f"SELECT finished_at IS NOT NULL FROM {ImportJob._meta.db_table} WHERE id = %s"
    started = time.perf_counter()
    try:
        _enqueue(job.pk)
        with connection.cursor() as cursor:
            for tick in itertools.count():
                if sample:
                    # RSS every 50 ms (cheap: statm); PSS, which reads every mapping, every
                    # 0.5 s.
                    peak_sum = max(peak_sum, worker.sample(peaks, pss=tick % 10 == 0))
                cursor.execute(ended, [job.pk])
                if cursor.fetchone()[0]:
                    break
                if worker.process.poll() is not None:
                    raise RuntimeError("the Celery worker died during the import")
                time.sleep(0.05)
        seconds = time.perf_counter() - started
        job.refresh_from_db()
        if job.status != ImportJob.Status.SUCCEEDED:
            raise RuntimeError(f"import {job.pk} {job.status}: {job.errors}"[:2000])
        files = sum(1 for f in (folder / "media").iterdir())
    finally:
        drop_project(project)
        Media.objects.all().delete()
        empty_store()
    return {
        "files": files, "seconds": seconds, "sampled": sample, "rss_sum": peak_sum,
        "rss_one": max(peaks.values(), default=0.0), "peak_rss_mb": peaks,
    }  # fmt: skip


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
    parser.add_argument(
        "--long-seconds", type=int, default=0,
        help="also import a pair of videos this long (seconds), for the peak memory",
    )  # fmt: skip
    args = parser.parse_args()
    modalities = args.modality or list(MODALITIES)
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
        if args.long_seconds:
            folders["long video"] = generate_long(scratch / "long", args.long_seconds)
        if "image" in modalities:
            overhead(scratch)
        results: dict[tuple[str, str, bool], list[dict]] = {}
        for where in args.storage or ("local", "s3"):
            environment: dict[str, str] = {}
            if where == "s3":
                server, environment = bucket_environment()
            use_storage(environment)
            for limits in {"on": (True,), "off": (False,), "both": (True, False)}[args.limits]:
                _run_worker(args, modalities, folders, where, limits, results)
        print(
            "\nmodality  storage limits  files/s median (min-max)   peak PSS all / largest RSS (MB)"
        )
        for (modality, where, limits), runs in results.items():
            rates = [r["files"] / r["seconds"] for r in _timed(runs)]
            print(
                f"{modality:9} {where:7} {'on ' if limits else 'off'}     "
                f"{statistics.median(rates):6.2f} ({min(rates):.2f}-{max(rates):.2f})"
                f"{'':13}{max(r['rss_sum'] for r in _sampled(runs)):.0f} / "
                f"{max(r['rss_one'] for r in _sampled(runs)):.0f}"
            )
        print(json.dumps(report(args, results), indent=1))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def generate_long(folder: Path, seconds: int) -> Path:
    """A pairs file of one pair: two ``seconds``-long videos (the same pictures, own tags)."""
    media = folder / "media"
    media.mkdir(parents=True)
    write_video(folder / "long.mp4", 99, seconds=seconds)
    for name in ("l0.mp4", "l1.mp4"):
        remux_tagged(folder / "long.mp4", media / name, name)
    (folder / "long.mp4").unlink()
    line = {
        "id": "long-0", "task": "t2v", "prompt_content": [["text", "A long clip"]],
        "response_a": {"model_name": "m1", "response_content": [["video", "l0.mp4"]]},
        "response_b": {"model_name": "m2", "response_content": [["video", "l1.mp4"]]},
    }  # fmt: skip
    (folder / "pairs.jsonl").write_text(json.dumps(line) + "\n")
    with tarfile.open(folder / "media.tar", "w") as archive:
        for name in ("l0.mp4", "l1.mp4"):
            archive.add(media / name, arcname=name)
    return folder


def _timed(runs: list[dict]) -> list[dict]:
    """The runs timed with nothing sampled (the long videos' run is sampled only)."""
    return [run for run in runs if not run["sampled"]] or runs


def _sampled(runs: list[dict]) -> list[dict]:
    return [run for run in runs if run["sampled"]]


def _summary(rates: list[float]) -> dict:
    return {"median": round(statistics.median(rates), 3), "min": round(min(rates), 3),
            "max": round(max(rates), 3), "runs": [round(r, 3) for r in rates]}  # fmt: skip


def report(args, results: dict) -> dict:
    """The figures as JSON: the settings, the cores, the limit and Arbiter's figure measured
    in this run, and their ratio (of the medians, and run by run)."""
    from django.conf import settings

    from annotation.media.av_media import X264_OPTIONS

    cores = os.cpu_count() or 1
    figures: dict[str, dict] = {}
    for (modality, where, limits), all_runs in results.items():
        runs, sampled = _timed(all_runs), _sampled(all_runs)
        rates = [r["files"] / r["seconds"] for r in runs]
        roles: dict[str, float] = {}
        for run in sampled:
            for role, mb in run["peak_rss_mb"].items():
                roles[role] = round(max(roles.get(role, 0.0), mb), 1)
        entry = {
            "files": runs[0]["files"],
            "arbiter_files_per_s": _summary(rates),
            "peak_rss_mb_by_process": roles,
            "peak_pss_mb_all": round(max(r["rss_sum"] for r in sampled), 1),
            "sampled_run_files_per_s": [round(r["files"] / r["seconds"], 3) for r in sampled],
        }
        if all("limit" in run for run in runs):
            limit = [r["limit"]["files"] / r["limit"]["seconds"] for r in runs]
            entry["limit_files_per_s"] = _summary(limit)
            entry["limit_peak_rss_mb"] = round(max(r["limit"]["peak_rss_mb"] for r in runs), 1)
            entry["ratio"] = round(statistics.median(rates) / statistics.median(limit), 3)
            entry["ratio_runs"] = [round(a / b, 3) for a, b in zip(rates, limit, strict=True)]
        figures[f"{modality}, {where}, limits {'on' if limits else 'off'}"] = entry
    return {
        "settings": {
            "files": args.files,
            "images": args.images,
            "runs": args.runs,
            "distinct": args.distinct,
            "long_seconds": args.long_seconds,
            "worker": "celery -A config worker -c 2 -Q imports",
            "media_workers": settings.ARBITER_MEDIA_WORKERS,
            "media_threads": settings.ARBITER_MEDIA_THREADS,
            "served_x264": X264_OPTIONS,
            "limit": {
                "x264": LIMIT_X264,
                "keyframe_seconds": 1,
                "audio": "aac",
                "audio_rate": LIMIT_AUDIO_RATE,
                "audio_bit_rate": LIMIT_AUDIO_BIT_RATE,
                "processes": cores,
                "threads_a_process": 1,
            },
        },
        "cores": cores,
        "load_average": os.getloadavg(),
        "figures": figures,
    }


def _run_worker(
    args, modalities: list[str], folders: dict[str, Path], where: str, limits: bool, results: dict
) -> None:
    """Every modality's ``--runs`` timed imports and one more with its memory sampled, in one
    worker started for ``where`` and ``limits`` (and the long videos' import once, sampled,
    after them)."""
    worker = Worker(limits=limits)
    try:
        for modality in [*modalities, *(["long video"] if "long video" in folders else [])]:
            timed = 0 if modality == "long video" else args.runs
            for run in range(timed + 1):
                sample = run == timed
                limit = None
                if modality in ("video", "audio") and not sample:
                    # The limit just before each import, so that both see the same machine.
                    limit = measure_limit(folders[modality], os.cpu_count() or 1)
                result = run_import(worker, folders[modality], sample=sample)
                if limit is not None:
                    result["limit"] = limit
                results.setdefault((modality, where, limits), []).append(result)
                figures = (
                    f"peak RSS {result['rss_sum']:.0f} MB in all (PSS), "
                    f"{result['rss_one']:.0f} MB the largest process (sampled, not timed for the "
                    "ratio)"
                    if sample
                    else f"limit {limit['files'] / limit['seconds']:.2f} files/s"
                    if limit
                    else "nothing sampled"
                )
                print(
                    f"{where:5} limits {'on ' if limits else 'off'} {modality:8} "
                    f"{'memory run' if sample else f'run {run + 1}'}: "
                    f"{result['files']:,} files in {result['seconds']:.1f} s = "
                    f"{result['files'] / result['seconds']:.1f} files/s; {figures}",
                    flush=True,
                )
    finally:
        worker.stop()


if __name__ == "__main__":
    main()
