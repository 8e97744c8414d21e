"""The next video pair playing at once (issue 36): in Chromium, one annotator answers video
pairs by key on the comparison page; the time is taken in the page from the answer key's
``keydown`` to the first ``playing`` event of both videos of the next pair, and to the first
``timeupdate`` at which both have moved and lie within a frame of each other (lock-step).
Prints JSON: the settings, the core count, the load average, the limit measured in the same
run and Arbiter's p50/p95/max.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/next_pair.py                 # 50 pairs

The clips are made with PyAV (H.264, ``--width`` x ``--height``, 25 fps, ``--seconds`` long,
a bar moving across a colour of the pair's own; kept in ``--clips`` between runs), imported
into a throw-away project (``bench-next-<time>``, overlap 1) through the import pipeline
(served copies re-encoded as for any import) and queued; its annotator logs in through the
form. gunicorn serves it as production does (``page_loop.boot``, static files collected).

Each answer waits for the key guard (300 ms) and ``--think-ms`` (the annotator looks at the
pair), then presses 1. Where the page does not start the next pair itself (the code before
issue 36), the script presses its Play button in the first animation frame that shows the
new pair, as the quickest annotator would. The limit: the same browser, a page of the same
origin holding two video elements of a pair's clips, already loaded (``canplaythrough``);
the key calls ``play()`` on both; the same two times are taken, over the same pairs.

Run it against each version of the code from that version's checkout (the script is the
same file): the figures are then the code's own. Run it under ``flock /tmp/bench.lock``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

# The sibling benchmarks' server and fixtures, however this file is started.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotator_load import ROOT, delete_project, percentile, setup_django
from page_loop import CHROMIUM, annotator_page, boot, collect_static

FPS = 25

# Both probes: ``window.__track(videos, started, extra)`` follows two video elements from a
# key's time stamp to their first ``playing`` and their first lock-step ``timeupdate`` (both
# moved, within a frame of each other), and pushes the sample to ``window.__samples``. A
# ``playing`` seen before the elements were tracked is in ``window.__firstPlaying`` (a
# listener on the document, capture phase, from the key on).
TRACK = """() => {
    window.__samples = [];
    window.__firstPlaying = new Map();
    if (window.__track) return;  // installed on this page already
    document.addEventListener("playing", (event) => {
        if (!window.__firstPlaying.has(event.target))
            window.__firstPlaying.set(event.target, performance.now());
    }, true);
    window.__track = (videos, started, extra) => {
        const sample = {started, playing: [null, null], lockstep: null, ...extra};
        const finish = () => {
            if (sample.pushed || sample.lockstep === null || sample.playing.includes(null)) return;
            sample.pushed = true;
            window.__samples.push(sample);
        };
        const onTime = () => {
            const [a, b] = videos;
            if (sample.lockstep === null && a.currentTime > 0 && b.currentTime > 0
                && !a.paused && !b.paused && Math.abs(a.currentTime - b.currentTime) <= 1 / FPS) {
                sample.lockstep = performance.now();
                finish();
            }
        };
        videos.forEach((video, index) => {
            const early = window.__firstPlaying.get(video);
            if (early !== undefined) sample.playing[index] = early;
            else video.addEventListener("playing", () => {
                if (sample.playing[index] === null) sample.playing[index] = performance.now();
                finish();
            }, {once: true});
            video.addEventListener("timeupdate", onTime);
        });
        finish();
    };
}""".replace("FPS", str(FPS))

# The comparison page: the answer key's time stamp (capture phase on window, before the
# page's own handlers), then each animation frame until a new pair is on screen, whose two
# videos are tracked. A pair the page did not start gets its Play button pressed then.
PAGE_PROBE = """() => {
    const action = () => {
        const form = document.querySelector("[data-pair-card] [data-vote-form]");
        return form ? form.getAttribute("action") : null;
    };
    window.addEventListener("keydown", (event) => {
        if (!/^[1-9]$/.test(event.key)) return;
        const started = event.timeStamp;
        const from = action();
        window.__firstPlaying = new Map();
        const look = () => {
            const to = action();
            const shown = "[data-pair-card] .wb-response video";
            const videos = Array.from(document.querySelectorAll(shown));
            if (to === null || to === from || videos.length < 2) {
                if (!document.querySelector(".wb-state")) requestAnimationFrame(look);
                return;
            }
            const button = document.querySelector("[data-deck-play]");
            const pressedPlay = Boolean(button) && button.textContent === "Play";
            if (pressedPlay) button.click();
            const urls = videos.slice(0, 2).map((video) => video.currentSrc || video.src);
            window.__track(videos.slice(0, 2), started, {from, to, pressedPlay, urls});
        };
        requestAnimationFrame(look);
    }, true);
}"""

# The limit: two video elements of a pair's clips, loaded to canplaythrough, on a page of the
# same origin; the key plays both.
LIMIT_SETUP = """async ([left, right]) => {
    for (const video of document.querySelectorAll("video")) video.pause();
    document.body.innerHTML = "";
    const videos = [left, right].map((url, index) => {
        const video = document.createElement("video");
        video.muted = index > 0;  // one side heard, as on the comparison page
        video.preload = "auto";
        video.playsInline = true;
        video.width = 320;
        video.src = url;
        document.body.append(video);
        return video;
    });
    await Promise.all(videos.map((video) => video.readyState >= 4 ? null
        : new Promise((ready) => {
            video.addEventListener("canplaythrough", ready, {once: true});
            setTimeout(ready, 10000);  // reported below with the state reached
        })));
    window.addEventListener("keydown", (event) => {
        window.__firstPlaying = new Map();
        for (const video of videos) video.play();
        window.__track(videos, event.timeStamp, {});
    }, {once: true, capture: true});
    return videos.map((video) => video.readyState);
}"""


def make_clips(folder: Path, *, pairs: int, seconds: float, width: int, height: int) -> None:
    """Two H.264 clips a pair, ``a<n>.mp4`` and ``b<n>.mp4``, made once (kept in ``folder``)."""
    import av
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    for n in range(pairs):
        for side_index, side in enumerate("ab"):
            path = folder / f"{side}{n}.mp4"
            if path.exists():
                continue
            partial = path.with_suffix(".part")
            with av.open(str(partial), "w", format="mp4") as container:
                stream = container.add_stream("libx264", rate=FPS)
                stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
                for i in range(int(seconds * FPS)):
                    image = np.zeros((height, width, 3), np.uint8)
                    image[:, :] = ((n * 37) % 256, (n * 11 + 90 * side_index) % 256, 60)
                    x = (i * 8) % width
                    image[:, x : x + 16] = 255
                    for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                        container.mux(packet)
                for packet in stream.encode():
                    container.mux(packet)
            partial.rename(path)


def create_project(*, slug: str, clips: Path, pairs: int, username: str, password: str) -> None:
    """The project with one video pair per clip pair, imported and queued, and its annotator."""
    from django.core.management import call_command

    from annotation.imports.importer import pairs_import
    from annotation.models import Project, Role
    from annotation.projects.services import member_add, project_create

    project = project_create(slug=slug, name=f"Next pair benchmark {slug}", overlap=1)
    rows = [
        {
            "id": f"v{n}",
            "task": "t2v",
            "prompt_content": [["text", f"Which clip shows the moving bar better? ({n})"]],
            "response_a": {"model_name": "m-one", "response_content": [["video", f"a{n}.mp4"]]},
            "response_b": {"model_name": "m-two", "response_content": [["video", f"b{n}.mp4"]]},
        }
        for n in range(pairs)
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as source:
        source.write("\n".join(json.dumps(row) for row in rows) + "\n")
    try:
        pairs_import(project=project, source=source.name, media_root=clips)
    finally:
        os.unlink(source.name)
    call_command("enqueue", slug, verbosity=0)
    member_add(
        project=Project.objects.get(slug=slug),
        username=username,
        role=Role.ANNOTATOR,
        password=password,
    )


def clip_hashes(clips: Path) -> list[str]:
    import hashlib

    return [hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(clips.glob("*.mp4"))]


def delete_media(hashes: list[str]) -> None:
    """The media rows of the clips (and their served copies, posters), once no project
    links them."""
    from annotation.models import Media, ProjectMedia

    rows = Media.objects.filter(sha256__in=hashes)
    derived = [sha for row in rows for sha in (row.served_sha256, row.poster_sha256) if sha]
    linked = ProjectMedia.objects.values("media_id")
    Media.objects.filter(sha256__in=[*hashes, *derived]).exclude(sha256__in=linked).delete()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def figures(samples: list[dict]) -> dict:
    playing = [max(s["playing"]) - s["started"] for s in samples]
    lockstep = [s["lockstep"] - s["started"] for s in samples]
    return {
        "samples": len(samples),
        "key_to_both_playing_ms": {
            "p50": round(percentile(playing, 0.5), 1),
            "p95": round(percentile(playing, 0.95), 1),
            "max": round(max(playing, default=float("nan")), 1),
        },
        "key_to_lockstep_timeupdate_ms": {
            "p50": round(percentile(lockstep, 0.5), 1),
            "p95": round(percentile(lockstep, 0.95), 1),
            "max": round(max(lockstep, default=float("nan")), 1),
        },
    }


def run(*, base_url: str, slug: str, username: str, password: str, args) -> dict:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        signed_in = annotator_page(
            playwright,
            base_url=base_url,
            slug=slug,
            username=username,
            password=password,
            ready="[data-deck]",
        )
        with signed_in as (page, failed):
            page.evaluate(TRACK)
            page.evaluate(PAGE_PROBE)
            page.evaluate("window.__sameDocument = true")
            missed = 0
            for n in range(args.pairs):
                page.wait_for_selector("[data-pair-card]:not(.wb-settling)")
                page.wait_for_timeout(args.think_ms)
                page.keyboard.press("1")
                progress(f"answer {n + 1}")
                try:
                    page.wait_for_function(
                        "n => window.__samples.length > n", arg=n - missed, timeout=10_000
                    )
                except PlaywrightTimeout:
                    missed += 1
                if not page.query_selector("[data-vote-form]"):
                    break
            arbiter = page.evaluate("window.__samples")
            same_document = page.evaluate("window.__sameDocument === true")
            # The limit, in the same browser, over the same clips.
            limit, limit_missed = [], 0
            # The clips the page showed, by the URLs it was given.
            page.goto(f"{base_url}/")
            for left, right in [sample["urls"] for sample in arbiter]:
                page.evaluate(TRACK)
                states = page.evaluate(LIMIT_SETUP, [left, right])
                progress(f"limit: clips loaded to readyState {states}")
                page.keyboard.press("1")
                try:
                    page.wait_for_function("() => window.__samples.length > 0", timeout=10_000)
                except PlaywrightTimeout:
                    limit_missed += 1
                limit += page.evaluate("window.__samples")
    return {
        "arbiter": arbiter,
        "limit": limit,
        "missed": missed,
        "limit_missed": limit_missed,
        "same_document": same_document,
        "failed": failed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=50, help="answers timed")
    parser.add_argument("--seconds", type=float, default=3.0, help="each clip's length")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--think-ms", type=int, default=1000, help="looking at a pair")
    parser.add_argument("--clips", default=str(Path(tempfile.gettempdir()) / "arbiter-next-clips"))
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--worker-class", default="sync")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    media_root = Path(tempfile.mkdtemp(prefix="arbiter-next-media-"))
    os.environ["ARBITER_MEDIA_ROOT"] = str(media_root)
    # The media URLs' opaque ids are made from the secret key: the server (which passes
    # this one on) and the import here must share it.
    os.environ.setdefault("DJANGO_SECRET_KEY", "next-pair-benchmark-only-" + "x" * 40)
    setup_django()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    clips = Path(args.clips) / f"{args.width}x{args.height}-{args.seconds}s"
    pairs = args.pairs + 2  # the first is shown without an answer; one more after the last
    make_clips(clips, pairs=pairs, seconds=args.seconds, width=args.width, height=args.height)
    # Media rows are kept by content hash across projects: rows of an earlier run whose
    # files went with its media folder would be served from nowhere.
    clips_made = clip_hashes(clips)
    delete_media(clips_made)
    slug = f"bench-next-{int(time.time())}"
    username, password = f"{slug}-ann0", secrets.token_urlsafe(16)
    static_root = Path(tempfile.mkdtemp(prefix="arbiter-next-static-"))
    server = None
    try:
        built = time.perf_counter()
        create_project(slug=slug, clips=clips, pairs=pairs, username=username, password=password)
        imported_s = time.perf_counter() - built
        collect_static(static_root)
        os.environ["DJANGO_STATIC_ROOT"] = str(static_root)
        port, server = boot(args)
        load = os.getloadavg()
        result = run(
            base_url=f"http://127.0.0.1:{port}",
            slug=slug,
            username=username,
            password=password,
            args=args,
        )
        load_after = os.getloadavg()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(static_root, ignore_errors=True)
        delete_project(slug)
        delete_media(clips_made)
        shutil.rmtree(media_root, ignore_errors=True)
        connections.close_all()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    arbiter = result["arbiter"]
    print(
        json.dumps(
            {
                "benchmark": "next_pair",
                "code": {"checkout": str(ROOT), "commit": commit},
                "settings": {
                    "pairs": args.pairs,
                    "clip": f"H.264 {args.width}x{args.height} {FPS} fps {args.seconds} s (PyAV)",
                    "think_ms": args.think_ms,
                    "server": f"gunicorn {args.workers} {args.worker_class} workers",
                    "browser": "Chromium " + str(CHROMIUM),
                    "import_s": round(imported_s, 1),
                },
                "cores": psutil.cpu_count(),
                "load_average": [round(load[0], 2), round(load_after[0], 2)],
                "limit": {
                    "what": "two clips loaded (canplaythrough), play() on the key",
                    **figures(result["limit"]),
                    "missed": result["limit_missed"],
                },
                "arbiter": {
                    **figures(arbiter),
                    "play_pressed_by_script": sum(1 for s in arbiter if s.get("pressedPlay")),
                    "missed": result["missed"],
                },
                "page_reloaded": not result["same_document"],
                "page_errors": result["failed"][:3],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
