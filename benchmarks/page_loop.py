"""The comparison page's own loop in Chromium (issue 19): one annotator votes by key, the page
posts the vote with htmx and swaps in the next pair from the answer; the time is taken in the
page from the key press to the next pair painted. Prints p50/p95/max ms, the votes done, and
the CPU each vote cost the server (gunicorn, PostgreSQL) and the browser.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/page_loop.py                 # 200 votes
    ... benchmarks/page_loop.py --votes 50                       # a quick look

The script migrates the database, creates a throw-away project (``bench-page-<time>``) with
queued text pairs and one annotator with a password (``annotator_load.create_fixture``),
collects the static files into a temporary folder (the production settings read their
manifest) and starts gunicorn as production runs it (``annotator_load.start_server``; two
sync workers unless ``--workers``, plenty for one annotator). Then
Debian's Chromium (``/usr/bin/chromium``, driven by Playwright) logs in through the form, opens
``/p/<slug>/annotate/`` and votes ``--votes`` times, cycling through the scale's keys.

Each sample runs from the ``keydown`` event's time stamp to the second animation frame after
htmx swapped in the new ``#workbench`` and its images were decoded (the first frame that
shows it all has been painted by then); a sample counts only if the pair on screen changed.
The page ignores answer keys for 300 ms after a pair appears (they were meant for the last
one), so the script waits for that, plus ``--think-ms``, before each key: the loop's pace is
not the figure, the latency is. While a pair is on screen the page fetches the next pair's
images, videos and audio ahead (``data-prefetch``); text pairs have none, and ``--images``
gives every prompt and response an image, so that the figure includes the prefetching (the
script counts the images shown whose download had not begun before the key).

The project, its annotator and its images are removed afterwards unless ``--keep``; the
static folder goes and the server and the browser are stopped in any case. Run it on a quiet
machine: the figure is mostly the vote's round trip, which other work on the CPUs lengthens
(the load average is printed with it).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

# The sibling benchmark's fixture, server and figures, however this file is started.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotator_load import (
    ROOT,
    analyze_as_autovacuum_would,
    create_fixture,
    database_backends_cpu,
    delete_project,
    percentile,
    process_tree_cpu,
    setup_django,
    start_server,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# Installed in the page once it has loaded: each answer key's keydown starts a sample (capture
# phase on window, so before workbench.js sees it), htmx's swap of #workbench ends it two
# animation frames after the new pair's images are decoded; the sample keeps the vote form's
# action before and after, to tell a new pair from the same one shown again with an error.
PROBE = """() => {
    window.__samples = [];
    performance.setResourceTimingBufferSize(100000);  // every image's download, not 250
    let pressed = null;
    let answered = null;
    const action = () => {
        const form = document.querySelector("[data-vote-form]");
        return form ? form.getAttribute("action") : null;
    };
    window.addEventListener("keydown", (event) => {
        if (!/^[1-9]$/.test(event.key)) return;
        pressed = event.timeStamp || performance.now();
        answered = action();
    }, true);
    document.addEventListener("htmx:beforeRequest", () => {
        if (pressed !== null) window.__sentAt = performance.now();
    });
    document.addEventListener("htmx:afterSwap", (event) => {
        if (!(event.target instanceof HTMLElement) || event.target.id !== "workbench") return;
        if (pressed === null) return;
        const started = pressed;
        const sent = window.__sentAt;
        const swapped = performance.now();
        const from = answered;
        pressed = null;
        // The new pair's images decoded (from the prefetch's cache when it worked), then two
        // frames: the first that shows them all has been painted by the second's callback.
        const images = Array.from(document.querySelectorAll("[data-pair-card] img"));
        const decoded = Promise.all(images.map((image) => image.decode().catch(() => null)));
        decoded.then(() => requestAnimationFrame(() => requestAnimationFrame(() => {
            // An image counts as prefetched if its download began before the key.
            const late = images.filter((image) => !performance.getEntriesByName(image.src)
                .some((entry) => entry.startTime < started)).length;
            window.__samples.push({
                started, sent, swapped, painted: performance.now(), from, to: action(),
                images: images.length, late,
                error: (document.querySelector("#workbench .wb-error") || {}).textContent || "",
            });
        })));
    });
}"""


def collect_static(folder: Path) -> None:
    """``collectstatic`` as production runs it (hashed names and the manifest that every
    page's ``{% static %}`` reads), into ``folder``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(
        ARBITER_ENV="production",
        DJANGO_SECRET_KEY="page-benchmark-only-" + "x" * 40,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DJANGO_STATIC_ROOT=str(folder),
    )
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def give_images(slug: str) -> list[str]:
    """Puts a generated PNG before the text of every prompt and response of the project, as an
    import of text-to-image pairs would, each with its served copy made (as the import makes
    it); returns their hashes. The files go under MEDIA_ROOT, where the server reads them."""
    from django.conf import settings
    from PIL import Image

    from annotation.core.content import image_part
    from annotation.media.services import media_strip_metadata
    from annotation.models import Media, Project, ProjectMedia, Prompt, Response

    project_id = Project.objects.get(slug=slug).pk
    made: list[str] = []

    def stored_image() -> dict:
        """One more PNG, of its own colour, stored as an import stores an original."""
        image = Image.new("RGB", (512, 384), (len(made) % 256, len(made) // 256 % 256, 90))
        # One pixel from the slug's own digits: no two runs share a file.
        red, green, blue = slug.encode()[-3:]
        image.putpixel((0, 0), (red, green, blue))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        data = buffer.getvalue()
        media, _ = Media.objects.get_or_create(
            sha256=hashlib.sha256(data).hexdigest(),
            defaults={"format": "PNG", "width": 512, "height": 384, "size_bytes": len(data)},
        )
        path = Path(settings.MEDIA_ROOT) / media.relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        media_strip_metadata(media=media)
        ProjectMedia.objects.get_or_create(project_id=project_id, media=media)
        made.append(media.sha256)
        return image_part(media.sha256)

    # The ids stay: they name the content at import, and nothing here reads them again.
    prompts = list(Prompt.objects.filter(project_id=project_id))
    for prompt in prompts:
        prompt.content = [stored_image(), *prompt.content]
    Prompt.objects.bulk_update(prompts, ["content"], batch_size=2000)
    responses = list(Response.objects.filter(project_id=project_id))
    for response in responses:
        response.content = [stored_image(), *response.content]
    Response.objects.bulk_update(responses, ["content"], batch_size=2000)
    return made


def delete_images(hashes: list[str]) -> None:
    """Removes the media ``give_images`` made, once no project links them (their files go with
    the temporary MEDIA_ROOT)."""
    from annotation.models import Media, ProjectMedia

    linked = ProjectMedia.objects.filter(media_id__in=hashes).values("media_id")
    Media.objects.filter(sha256__in=hashes).exclude(sha256__in=linked).delete()


@contextlib.contextmanager
def annotator_page(
    playwright, *, base_url: str, slug: str, username: str, password: str, ready: str
):
    """Chromium signed in as ``username`` on the project's comparison page, loaded (``ready``:
    the selector it waits for), and the list its page errors and refused requests are
    written to; the browser is closed on leaving."""
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    try:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(15_000)
        page = context.new_page()
        failed: list[str] = []
        page.on("pageerror", lambda error: failed.append(str(error)))
        page.on(
            "response",
            lambda response: (
                failed.append(f"{response.request.method} {response.status} {response.url}")
                if response.status >= 400 and not response.url.endswith("/favicon.ico")
                else None
            ),
        )
        annotate = f"/p/{slug}/annotate/"
        page.goto(f"{base_url}/login/?next={annotate}")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base_url}{annotate}")
        page.wait_for_selector(ready)
        page.wait_for_load_state("load")  # workbench.js and htmx are in
        yield page, failed
    finally:
        browser.close()


def boot(args: argparse.Namespace) -> tuple[int, subprocess.Popen]:
    """gunicorn started, answering: ``start_server`` gives up after 30 s, which a worker's first
    request (it imports the views) can take on a machine that others load; a second start
    finds the files in the page cache."""
    for attempt in range(3):
        port = args.port or free_port()
        try:
            return port, start_server(
                port=port, workers=args.workers, worker_class=args.worker_class
            )
        except SystemExit as exc:
            print(f"{exc} (attempt {attempt + 1} of 3; load average {os.getloadavg()[0]:.1f})")
    raise SystemExit("gunicorn did not start; is the machine that busy?")


def free_port() -> int:
    """A loopback port nothing listens on now (others on this machine run servers too)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class BackendCpu:
    """CPU seconds the PostgreSQL backends serving this database (all but ours) spent since
    ``start()``. The server's connections live 60 s (``DATABASE_CONN_MAX_AGE``) and a backend's
    CPU is gone with it, so ``poll()`` reads them after every vote: a backend that ends loses
    at most one vote's work, one that begins counts from zero."""

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def start(self) -> None:
        self.first = self._read()
        self.last = dict(self.first)

    def poll(self) -> None:
        for pid, cpu in self._read().items():
            self.first.setdefault(pid, 0.0)
            self.last[pid] = cpu

    def seconds(self) -> float:
        return sum(cpu - self.first[pid] for pid, cpu in self.last.items())

    @staticmethod
    def _read() -> dict[int, float]:
        return database_backends_cpu()


def run_loop(
    *, base_url: str, slug: str, username: str, password: str, votes: int, think_ms: int, server
) -> dict:
    """Logs in, opens the comparison page and votes; returns the page's samples and the CPU
    seconds the loop cost the server, its database backends and the browser."""
    from playwright.sync_api import sync_playwright

    def cpu_now() -> tuple[float, float]:
        gunicorn = process_tree_cpu(server.pid) if server else 0.0
        # Our children are gunicorn, Playwright's driver and the browser it started.
        everything = process_tree_cpu(os.getpid()) - time.process_time()
        return gunicorn, everything - gunicorn

    database = BackendCpu()

    with sync_playwright() as playwright:
        signed_in = annotator_page(
            playwright,
            base_url=base_url,
            slug=slug,
            username=username,
            password=password,
            ready="[data-vote-form]",
        )
        with signed_in as (page, failed):
            if not page.evaluate("Boolean(window.htmx)"):
                raise SystemExit(f"htmx did not load on the comparison page: {failed}")
            keys = page.eval_on_selector_all(
                "[data-pair-card] [data-key]", "buttons => buttons.map(b => b.dataset.key)"
            )
            page.evaluate(PROBE)
            page.evaluate("window.__sameDocument = true")  # gone if anything reloads the page
            started_cpu = cpu_now()
            database.start()
            for n in range(votes):
                page.wait_for_selector("[data-pair-card]:not(.wb-settling)")
                if think_ms:
                    page.wait_for_timeout(think_ms)
                page.keyboard.press(keys[n % len(keys)])
                page.wait_for_function("n => window.__samples.length > n", arg=n, polling="raf")
                database.poll()
                if not page.query_selector("[data-vote-form]"):
                    break  # nothing left for this annotator
            ended_cpu = cpu_now()
            samples = page.evaluate("window.__samples")
            same_document = page.evaluate("window.__sameDocument === true")
    return {
        "samples": samples,
        "same_document": same_document,
        "failed": failed,
        "gunicorn_cpu": ended_cpu[0] - started_cpu[0],
        "database_cpu": database.seconds(),
        "browser_cpu": ended_cpu[1] - started_cpu[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=200, help="votes to cast (and time)")
    parser.add_argument("--pairs", type=int, default=0, help="queued pairs (default: votes + 10)")
    parser.add_argument(
        "--images", action="store_true", help="an image on every prompt and response"
    )
    parser.add_argument("--think-ms", type=int, default=0, help="wait after the key guard")
    # One annotator has at most the vote and the next pair's downloads in flight; two sync
    # workers serve that as four would, and boot in time on a busy machine.
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--worker-class", default="sync", help="gunicorn worker class")
    parser.add_argument("--port", type=int, default=0, help="gunicorn's port (default: a free one)")
    parser.add_argument("--keep", action="store_true", help="keep the project afterwards")
    args = parser.parse_args()

    if not CHROMIUM.exists():
        raise SystemExit(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls made meanwhile
    # (the database backends' CPU) are plain sync code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    # The images (--images) in a folder of the run's own, which the server inherits.
    media_root = Path(tempfile.mkdtemp(prefix="arbiter-page-media-"))
    os.environ["ARBITER_MEDIA_ROOT"] = str(media_root)
    setup_django()
    from django.core.management import call_command
    from django.db import connections

    from annotation.models import Project, Role
    from annotation.projects.services import member_add

    call_command("migrate", verbosity=0)
    slug = f"bench-page-{int(time.time())}"
    pairs = args.pairs or args.votes + 10
    username, password = f"{slug}-ann0", secrets.token_urlsafe(16)  # create_fixture's name
    static_root = Path(tempfile.mkdtemp(prefix="arbiter-page-static-"))
    images: list[str] = []
    server = None
    try:
        built = time.perf_counter()
        create_fixture(slug=slug, pairs=pairs, overlap=1, annotators=1)
        member_add(
            project=Project.objects.get(slug=slug),
            username=username,
            role=Role.ANNOTATOR,
            password=password,
        )
        if args.images:
            images = give_images(slug)
        print(
            f"fixture: {pairs} text pairs{f' with {len(images)} images' if images else ''}, "
            f"1 annotator ({time.perf_counter() - built:.1f} s)"
        )
        with connections["default"].cursor() as cursor:
            analyze_as_autovacuum_would(cursor)
        collect_static(static_root)
        os.environ["DJANGO_STATIC_ROOT"] = str(static_root)
        port, server = boot(args)
        load = os.getloadavg()
        result = run_loop(
            base_url=f"http://127.0.0.1:{port}",
            slug=slug,
            username=username,
            password=password,
            votes=args.votes,
            think_ms=args.think_ms,
            server=server,
        )
        load_after = os.getloadavg()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(static_root, ignore_errors=True)
        if args.keep:
            print(f"kept: project {slug}, annotator {username}, media under {media_root}")
        else:
            delete_project(slug)
            delete_images(images)
            shutil.rmtree(media_root, ignore_errors=True)
        connections.close_all()

    samples = result["samples"]
    # The last vote may empty the queue: "all caught up" is shown instead of a pair.
    new_pair = [s for s in samples if s["to"] != s["from"]]
    total = [s["painted"] - s["started"] for s in new_pair]
    to_swap = [s["swapped"] - s["started"] for s in new_pair]
    to_send = [s["sent"] - s["started"] for s in new_pair if s.get("sent") is not None]
    paint = [s["painted"] - s["swapped"] for s in new_pair]
    errors = sorted({s["error"] for s in samples if s["error"]})
    shown_images = sum(s["images"] for s in new_pair)
    late_images = sum(s["late"] for s in new_pair)
    done = len(new_pair)
    print(
        f"server: gunicorn, {args.workers} {args.worker_class} workers; Chromium, "
        f"{'image' if images else 'text'} pairs; load average {load[0]:.2f} before, "
        f"{load_after[0]:.2f} after ({psutil.cpu_count()} cores)"
    )
    print(f"votes done:          {done:8d} of {args.votes} (new pair shown each time)")
    print(
        f"key to painted ms:   {percentile(total, 0.5):8.1f} p50 / {percentile(total, 0.95):.1f} "
        f"p95 / {max(total, default=float('nan')):.1f} max"
    )
    print(
        f"  key to post sent:  {percentile(to_send, 0.5):8.1f} p50 / "
        f"{percentile(to_send, 0.95):.1f} p95"
    )
    print(
        f"  key to swapped:    {percentile(to_swap, 0.5):8.1f} p50 / "
        f"{percentile(to_swap, 0.95):.1f} p95 (the vote's round trip and htmx)"
    )
    print(
        f"  swap to painted:   {percentile(paint, 0.5):8.1f} p50 / "
        f"{percentile(paint, 0.95):.1f} p95"
    )
    if done:
        per_vote = [
            result[key] / done * 1000 for key in ("gunicorn_cpu", "database_cpu", "browser_cpu")
        ]
        print(
            f"CPU per vote ms:     {per_vote[0] + per_vote[1]:8.1f} server (gunicorn "
            f"{per_vote[0]:.1f}, PostgreSQL {per_vote[1]:.1f}); browser {per_vote[2]:.1f} "
            "(Chromium and Playwright's driver)"
        )
    if shown_images:
        print(
            f"images shown:        {shown_images:8d} ({late_images} not prefetched before the key)"
        )
    print(f"page reloaded:       {'no' if result['same_document'] else 'YES'}")
    print(f"errors shown:        {len(errors):8d} {errors[:3] or ''}")
    print(f"failed requests:     {len(result['failed']):8d} {result['failed'][:3] or ''}")
    if done < args.votes or errors or result["failed"] or not result["same_document"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
