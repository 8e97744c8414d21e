"""How fast video and audio are ingested at import, and in how much memory (issue 17, "Speed"):
each file probed, decoded in full, stripped of its metadata by a remux whose packets are
compared, its poster or waveform made (annotation/media/av_media.py).

Writes once, into a temporary folder, ``--pairs`` pairs (1,000 by default) holding two
five-second 480p videos (H.264 and AAC in MP4, 25 frames a second) and two five-second audio
clips each (WAV and MP3 in turn), then imports them ``--runs`` times (3), each time into a
new throw-away project on the database named by DATABASE_URL, from a child process whose
peak RSS is its own. Prints, per run and as the median: seconds, media files per second,
CPU seconds per file (the import's process and its media workers: on a machine others load,
CPU time says what a file costs where wall time says how busy the machine was), and the
peak RSS of the importing process and of its largest worker.

Files are distinct (each has its own sha256), but to keep generation short only
``--distinct`` videos and MP3 clips are encoded; the others are remuxes of those with their
own title tag, so their served copies, stripped of the tag, are the same few files (each is
still made and compared, then dropped as already staged). Targets: >= 20 media files per
second on a 2-core machine, peak RSS < 500 MB.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/media_import.py               # 1,000 pairs, 4,000 files
    ... benchmarks/media_import.py --pairs 50 --runs 3            # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agreement_speed import setup_django
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


def generate(folder: Path, pairs: int, distinct: int) -> Path:
    """The pairs file and its media under ``folder``; returns the pairs file."""
    media = folder / "media"
    media.mkdir(parents=True)
    bases = folder / "bases"
    bases.mkdir()
    started = time.perf_counter()
    for seed in range(distinct):
        write_video(bases / f"v{seed}.mp4", seed)
        write_mp3(bases / f"a{seed}.mp3", seed)
    lines = []
    for index in range(pairs):
        sides = []
        for side in range(2):
            number = 2 * index + side
            video = f"v{number}.mp4"
            remux_tagged(bases / f"v{number % distinct}.mp4", media / video, f"video {number}")
            if number % 2:
                audio = f"a{number}.mp3"
                remux_tagged(bases / f"a{number % distinct}.mp3", media / audio, f"clip {number}")
            else:
                audio = f"a{number}.wav"
                write_wav(media / audio, number)
            sides.append([["video", video], ["audio", audio]])
        lines.append(
            {
                "id": f"omni-{index}",
                "task": "t2v",
                "prompt_content": [["text", f"Film scene {index}, with its sound"]],
                "response_a": {"model_name": "m1", "response_content": sides[0]},
                "response_b": {"model_name": "m2", "response_content": sides[1]},
            }
        )
    path = folder / "pairs.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    files = sum(1 for _ in media.iterdir())
    size = sum(f.stat().st_size for f in media.iterdir())
    print(
        f"generated {pairs:,} pairs, {files:,} media files ({size / 2**20:,.0f} MB) in "
        f"{time.perf_counter() - started:.1f} s"
    )
    return path


def peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(pairs_file: str) -> None:
    """One run: imports the pairs into a new project and prints its figures as JSON."""
    setup_django()
    from annotation.imports.importer import pairs_import

    folder = Path(pairs_file).parent
    project = new_project()
    cpu = time.process_time()
    started = time.perf_counter()
    try:
        summary = pairs_import(project=project, source=pairs_file, media_root=folder / "media")
        seconds = time.perf_counter() - started
    finally:
        drop_project(project)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "pairs": summary.created_pairs,
                "files": 4 * summary.created_pairs,  # videos and clips, not their posters
                "seconds": seconds,
                "cpu": time.process_time() - cpu + children.ru_utime + children.ru_stime,
                "rss": peak_rss_mb(),
                "worker_rss": children.ru_maxrss / 1024,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000, help="pairs (4 media files each)")
    parser.add_argument("--runs", type=int, default=3, help="imports, each in a new process")
    parser.add_argument("--distinct", type=int, default=8, help="videos and MP3s encoded")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    scratch = Path(tempfile.mkdtemp(prefix="arbiter-media-import-"))
    os.environ["ARBITER_MEDIA_ROOT"] = str(scratch / "store")
    try:
        setup_django()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        pairs_file = generate(scratch / "input", args.pairs, min(args.distinct, 2 * args.pairs))
        results = []
        for run in range(args.runs):
            shutil.rmtree(scratch / "store", ignore_errors=True)
            output = subprocess.run(
                [sys.executable, __file__, "--child", str(pairs_file)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            result = json.loads(output.strip().splitlines()[-1])
            results.append(result)
            print(
                f"run {run + 1}: {result['files']:,} files in {result['seconds']:.1f} s = "
                f"{result['files'] / result['seconds']:.1f} files/s; CPU "
                f"{1000 * result['cpu'] / result['files']:.0f} ms a file; peak RSS "
                f"{result['rss']:.0f} MB (largest worker {result['worker_rss']:.0f} MB)"
            )
        seconds = statistics.median(r["seconds"] for r in results)
        files = results[0]["files"]
        print(
            f"median of {len(results)}: {files:,} media files in {seconds:.1f} s = "
            f"{files / seconds:.1f} files/s (target >= 20); CPU "
            f"{1000 * statistics.median(r['cpu'] for r in results) / files:.0f} ms a file; "
            f"peak RSS {max(max(r['rss'], r['worker_rss']) for r in results):.0f} MB "
            "(target < 500 MB)"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
