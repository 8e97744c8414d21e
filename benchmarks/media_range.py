"""A large media file served to its end by Range requests (docs/operations.md, "Media through
the web server"): writes a file of ``--mb`` MB (200 by default) of random bytes as a throw-away
project's media, then, as a logged-in annotator through Django's request handling (the test
client: middleware, the membership check, the view), fetches it in ``--chunk-kib`` KiB ranges
(1 MiB by default) as a browser playing a video does, checks that the bytes joined are the
file's, and prints the time taken and how much the process's resident memory grew (its peak,
Linux's VmHWM reset before the first request). Streaming keeps it flat: no range, and never
the file, is held whole. ``--storage`` serves it from local disk, from a bucket (each range one
ranged ``GetObject``; benchmarks/bucket.py), or both (the default), ``--runs`` times each (3),
with the median and spread of the bytes per second.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/media_range.py                  # 200 MB in 1 MiB ranges
    ... benchmarks/media_range.py --mb 20 --chunk-kib 256          # a quick look
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import time
from pathlib import Path

from agreement_speed import setup_django
from bucket import bucket_environment, use_storage
from release_speed import delete, scratch_roots

SLUG = "media-range-bench"
MIB = 1024 * 1024


def current_rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> int:
    """Starts the peak afresh (Linux: ``clear_refs``), returning the resident memory now."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass
    return current_rss()


def peak_rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return current_rss()


def write_media(size: int, seed: int):
    """The project's one media file, ``size`` bytes written a MiB at a time."""
    from django.conf import settings

    from annotation.core import storage
    from annotation.models import Media, ProjectMedia
    from annotation.projects.services import member_add, project_create

    project = project_create(slug=SLUG, name="Media range benchmark", scale="ternary")
    user = member_add(project=project, username=f"{SLUG}-annotator", role="annotator").membership
    rng = random.Random(seed)
    digest = hashlib.sha256()
    scratch = Path(settings.MEDIA_ROOT) / "incoming"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    with open(scratch, "wb") as out:
        left = size
        while left > 0:
            chunk = rng.randbytes(min(MIB, left))
            digest.update(chunk)
            out.write(chunk)
            left -= len(chunk)
    sha = digest.hexdigest()
    media = Media.objects.create(
        sha256=sha,
        format="PNG",
        width=1,
        height=1,
        size_bytes=size,
        served_sha256=sha,
        # Recorded as rebuilt, so the view serves these bytes as they are rather than rebuild.
        strip_result=Media.StripResult.REBUILT,
    )
    storage.put_file("media", media.served_relative_path, scratch, move=True)
    ProjectMedia.objects.create(project=project, media=media)
    return project, media, user.user


def serve(project, media, user, *, size: int, chunk: int) -> dict:
    from django.test import Client

    from annotation.core.media_keys import media_path

    client = Client()
    client.force_login(user)
    url = media_path(slug=project.slug, sha256=media.sha256)
    b"".join(client.get(url, HTTP_RANGE="bytes=0-0").streaming_content)  # warm up
    served = hashlib.sha256()
    requests = 0
    before = reset_peak_rss()
    started = time.perf_counter()
    for start in range(0, size, chunk):
        end = min(start + chunk, size) - 1
        response = client.get(url, HTTP_RANGE=f"bytes={start}-{end}")
        if response.status_code != 206:
            raise SystemExit(f"bytes={start}-{end}: answered {response.status_code}, not 206")
        for part in response.streaming_content:
            served.update(part)
        requests += 1
    seconds = time.perf_counter() - started
    if served.hexdigest() != media.served_sha256:
        raise SystemExit("The bytes served are not the file's")
    return {
        "file_mb": round(size / 1e6, 1),
        "requests": requests,
        "seconds": round(seconds, 2),
        "mb_per_s": round(size / 1e6 / seconds, 1),
        "ms_per_request": round(seconds * 1000 / requests, 2),
        "rss_before_mib": round(before / MIB, 1),
        "rss_growth_mib": round((max(peak_rss(), current_rss()) - before) / MIB, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="file size in MB (10**6 bytes)")
    parser.add_argument("--chunk-kib", type=int, default=1024, help="bytes per Range request")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3, help="times the file is served")
    parser.add_argument("--storage", choices=("local", "s3"), action="append")
    args = parser.parse_args()
    scratch = scratch_roots("media-range-bench-")
    setup_django()
    server = None
    try:
        size = args.mb * 1_000_000
        for where in args.storage or ("local", "s3"):
            environment: dict[str, str] = {}
            if where == "s3":
                server, environment = bucket_environment()
            use_storage(environment)
            _cleanup()
            project, media, user = write_media(size, args.seed)
            rates = []
            for _ in range(args.runs):
                result = serve(project, media, user, size=size, chunk=args.chunk_kib * 1024)
                print(json.dumps({"storage": where, **result}), flush=True)
                rates.append(result["mb_per_s"])
            print(
                f"{where}: {statistics.median(rates):.1f} MB/s median "
                f"({min(rates):.1f}-{max(rates):.1f}) over {args.runs} runs",
                flush=True,
            )
            _cleanup()
    finally:
        _cleanup()
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _cleanup() -> None:
    from django.contrib.auth import get_user_model

    delete(SLUG)
    get_user_model().objects.filter(username=f"{SLUG}-annotator").delete()


if __name__ == "__main__":
    main()
