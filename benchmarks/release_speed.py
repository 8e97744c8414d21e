"""Building a release (issue 10, "Speed"; docs/releases.md): loads synthetic decided pairs into
PostgreSQL with COPY, then, in a fresh process each time, builds a release of them (rows read
in chunks, Parquet, JSONL, the MMRB2 file, images, the card with its agreement interval, the
manifest, the archive's skeleton and index) and times the build alone with the process's
peak RSS (the builder's modules imported first and timed apart, as a worker that takes
release builds imports them when it starts); then publishes it, timed apart (every file
checked against the manifest, the archive's sha256 taken; the code before the archive was
made on download wrote and hashed it at build).

Two data sets:
- ``text``: 100,000 consensus text pairs, each on its own prompt, with 3 ternary votes each,
  split train=0.8,test=0.2;
- ``images``: 10,000 consensus pairs over 1,000 PNG images (each response one image and a
  line of text), 3 votes each.

- ``omni``: 600 consensus pairs of Omni-RewardBench's t2v, t2a and t23d tasks over 100
  videos (4 MB each), 100 audio clips (1 MB) and 50 binary glTF models (2 MB), 600 MB in all.
  Their bytes are random, as incompressible as real MP4, M4A and GLB files, stored (and
  sealed) as an import stores a served copy (the release links them, never decodes them). In
  the same run, between the builds, ``cp -r`` copies the same files (a folder of hard links
  to them, laid out as the release lays them out) into a new folder: the limit a build is
  compared with, in MB/s of media (issue 36: a build at >= 0.5x a copy's speed).

Targets: text <= 7 s with peak RSS < 500 MB (issue 19; it was 10 s); images <= 20 s; omni >=
0.5x ``cp -r``. The omni data set also prints its figures as one JSON line.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/release_speed.py                   # both, three runs each
    ... benchmarks/release_speed.py --only text --pairs 10000 --runs 1  # a quick look

The script migrates the database and creates throw-away projects (``bench-release-...``),
deleted afterwards with their releases, unless ``--keep``; releases and images are written
under a temporary folder. Without ``--keep``, each omni build's files are removed once it is
measured (see ``omni_copy``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from agreement_speed import PAIR_COLUMNS, VOTE_COLUMNS, measure_in_child, setup_django, spread
from agreement_speed import delete as delete_project

TARGETS = {"text": (7.0, 500.0), "images": (20.0, None), "omni": (None, None)}
DEFAULT_PAIRS = {"text": 100_000, "images": 10_000, "omni": 600}
IMAGES = 1_000
# The omni data set's media: kind -> (format, files, bytes each), and each kind's task.
OMNI_MEDIA = {
    "video": ("MP4", 100, 4_000_000),
    "audio": ("M4A", 100, 1_000_000),
    "model3d": ("GLB", 50, 2_000_000),
}
OMNI_TASKS = {"video": "t2v", "audio": "t2a", "model3d": "t23d"}
OMNI_GOAL = 0.5
ANNOTATORS = 12
TASKS = ("chat", "code", "math", "safety")
SPLITS = "train=0.8,test=0.2"


def _stored(path: Path, data: bytes, sha256: str) -> None:
    """``data`` written at ``path`` in the media store and sealed as an import seals it
    (docs/releases.md, "Sealed media files"): a build does not hash it again. The code
    before seals, run with this script to compare, has no seals to make."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    try:
        from annotation.core.seals import seal
    except ImportError:
        return
    seal(path, sha256)


def _images(project, count: int, seed: int) -> list[str]:
    """``count`` distinct PNGs stored as an import stores them (no metadata, so the served
    copy is the original); returns their sha256."""
    from django.conf import settings
    from PIL import Image

    from annotation.models import Media, ProjectMedia

    rng = random.Random(seed)
    media = []
    for _ in range(count):
        buffer = io.BytesIO()
        Image.frombytes("RGB", (48, 32), rng.randbytes(48 * 32 * 3)).save(buffer, "PNG")
        data = buffer.getvalue()
        sha256 = hashlib.sha256(data).hexdigest()
        _stored(Path(settings.MEDIA_ROOT) / Media.path_for(sha256, "PNG"), data, sha256)
        media.append(
            Media(
                sha256=sha256,
                format="PNG",
                width=48,
                height=32,
                size_bytes=len(data),
                # Pillow's PNG is what the rebuild writes: the file is its own served copy.
                served_sha256=sha256,
                strip_result=Media.StripResult.REBUILT,
            )
        )
    Media.objects.bulk_create(media, ignore_conflicts=True)
    ProjectMedia.objects.bulk_create(
        [ProjectMedia(project=project, media_id=m.sha256) for m in media], ignore_conflicts=True
    )
    return [m.sha256 for m in media]


def _omni_media(project, seed: int) -> dict[str, list[str]]:
    """Each kind's files of random bytes, stored as an import stores a served copy; returns
    their sha256 by kind."""
    from django.conf import settings

    from annotation.models import Media, ProjectMedia

    rng = random.Random(seed)
    made: dict[str, list[str]] = {}
    rows = []
    for kind, (fmt, count, size) in OMNI_MEDIA.items():
        made[kind] = []
        for _ in range(count):
            data = rng.randbytes(size)
            sha256 = hashlib.sha256(data).hexdigest()
            _stored(Path(settings.MEDIA_ROOT) / Media.path_for(sha256, fmt), data, sha256)
            pixels = 64 if kind == "video" else 0
            rows.append(
                Media(
                    sha256=sha256,
                    kind=kind,
                    format=fmt,
                    width=pixels,
                    height=pixels,
                    size_bytes=size,
                    served_sha256=sha256,
                    strip_result=Media.StripResult.REBUILT,
                )
            )
            made[kind].append(sha256)
    Media.objects.bulk_create(rows, ignore_conflicts=True)
    ProjectMedia.objects.bulk_create(
        [ProjectMedia(project=project, media_id=m.sha256) for m in rows], ignore_conflicts=True
    )
    return made


def load(*, kind: str, slug: str, pairs: int, seed: int) -> None:
    """The project, its annotators, prompts, responses, pairs and votes, by COPY."""
    from django.db import connection
    from django.utils import timezone

    from annotation.core.content import (
        canonical_json,
        image_part,
        media_part,
        prompt_id,
        response_id,
        text_part,
    )
    from annotation.models import Pair, PairStatus, Prompt, Response, Role, Vote
    from annotation.projects.services import member_add, project_create

    project = project_create(slug=slug, name=f"Release benchmark {slug}", scale="ternary")
    users = [
        member_add(project=project, username=f"{slug}-ann{n}", role=Role.ANNOTATOR).membership.user
        for n in range(ANNOTATORS)
    ]
    images = _images(project, IMAGES, seed) if kind == "images" else []
    omni = _omni_media(project, seed) if kind == "omni" else {}
    omni_kinds = list(omni)
    rng = random.Random(seed)
    now = timezone.now()
    # Words drawn at random from a vocabulary: text that compresses about as real text does
    # (a repeated sentence would make the archive's gzip look far cheaper than it is).
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9)))
                  for _ in range(5000)]  # fmt: skip

    def text(words: int) -> str:
        return " ".join(rng.choices(vocabulary, k=words))

    with connection.cursor() as cursor:
        copy_prompts = (
            f"COPY {Prompt._meta.db_table} (id, project_id, content, source, metadata) FROM STDIN"
        )
        copy_responses = (
            f"COPY {Response._meta.db_table} (id, project_id, content, model_name) FROM STDIN"
        )
        prompt_ids, response_ids = [], []
        with cursor.cursor.copy(copy_prompts) as copy:
            for n in range(pairs):
                content = [text_part(f"Question {n}: {text(25)}")]
                encoded = canonical_json(content)
                pid = prompt_id(project.pk, content, encoded=encoded)
                prompt_ids.append(pid)
                copy.write_row((pid, project.pk, encoded, "bench", "{}"))
        written: set[str] = set()
        with cursor.cursor.copy(copy_responses) as copy:
            for n in range(pairs):
                ids = []
                media_kind = omni_kinds[n % len(omni_kinds)] if omni else ""
                shown = rng.sample(omni[media_kind], 2) if omni else []
                for side, model in enumerate(("model-a", "model-b")):
                    content = [text_part(f"{model} answers question {n}. {text(40)}")]
                    if omni:  # eight models; a file may answer several prompts
                        content = [media_part(media_kind, shown[side])]
                        model = f"model-{rng.randrange(8)}"
                    if images:
                        content.insert(0, image_part(images[rng.randrange(len(images))]))
                    encoded = canonical_json(content)
                    rid = response_id(project.pk, model, content, encoded=encoded)
                    ids.append(rid)
                    if rid not in written:
                        written.add(rid)
                        copy.write_row((rid, project.pk, encoded, model))
                response_ids.append(ids)

        def task_of(n: int) -> str:
            if omni:
                return OMNI_TASKS[omni_kinds[n % len(omni_kinds)]]
            return TASKS[n % len(TASKS)]

        labels = []
        with cursor.cursor.copy(f"COPY {Pair._meta.db_table} ({PAIR_COLUMNS}) FROM STDIN") as copy:
            for n in range(pairs):
                label = "A" if rng.random() < 0.55 else "B"
                labels.append(label)
                copy.write_row(
                    (project.pk, f"bench-{n:07d}", prompt_ids[n], response_ids[n][0],
                     response_ids[n][1], "", task_of(n), "{}", PairStatus.CONSENSUS, 0,
                     3, 3, 0, False, False, "", "", "", "{}", label, "", 0, now, now, "")
                )  # fmt: skip
        cursor.execute(
            f"SELECT id FROM {Pair._meta.db_table} WHERE project_id = %s ORDER BY external_id",
            [project.pk],
        )
        pair_ids = [row[0] for row in cursor.fetchall()]
        value_of = {"A": 3, "B": 1}
        with cursor.cursor.copy(f"COPY {Vote._meta.db_table} ({VOTE_COLUMNS}) FROM STDIN") as copy:
            for pair_id, label in zip(pair_ids, labels, strict=True):
                for user in rng.sample(users, 3):
                    side = label if rng.random() < 0.8 else ("B" if label == "A" else "A")
                    copy.write_row(
                        (pair_id, user.pk, side, value_of[side], True, "", 4000, False, False, now)
                    )
        cursor.execute(
            f"ANALYZE {Pair._meta.db_table}, {Vote._meta.db_table}, {Prompt._meta.db_table}, "
            f"{Response._meta.db_table}"
        )


def delete(slug: str) -> None:
    """Removes the benchmark's project with its releases, pairs, votes and images."""
    from django.db import connection

    from annotation.models import Media, Project, ProjectMedia, Release

    project = Project.objects.filter(slug=slug).first()
    if project is None:
        return
    # Published releases never change through the models: the throw-away rows go by SQL.
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {Release._meta.db_table} WHERE project_id = %s", [project.pk])
    media = list(ProjectMedia.objects.filter(project=project).values_list("media_id", flat=True))
    delete_project(slug)
    Media.objects.filter(sha256__in=media).exclude(
        sha256__in=ProjectMedia.objects.values("media_id")
    ).delete()


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's VmHWM starts afresh at exec; getrusage's
    maxrss does not (a child started by a large parent would report the parent's size)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(slug: str, version: str) -> dict:
    """In a process of its own: create and build one release; the build alone is timed."""
    from annotation.models import Project
    from annotation.releases.services import release_build, release_create, release_publish

    project = Project.objects.get(slug=slug)
    release = release_create(
        project=project, version=version, selection={"splits": SPLITS}, user=None
    )
    before_mb = peak_rss_mb()
    # A worker's pool process that takes release builds imports the builder as it starts
    # (config/celery.py): timed apart, so that the build is timed as a worker runs it and
    # the two together as the first build of a fresh process.
    start = time.perf_counter()
    import annotation.releases.build  # noqa: F401

    import_s = time.perf_counter() - start
    start = time.perf_counter()
    release = release_build(release=release)
    build_s = time.perf_counter() - start
    peak_mb = peak_rss_mb()
    start = time.perf_counter()
    release = release_publish(release=release, user=None)
    publish_s = time.perf_counter() - start
    return {
        "build_s": build_s,
        "import_s": import_s,
        "publish_s": publish_s,
        "peak_rss_mb": peak_mb,
        "rss_before_mb": before_mb,
        "pairs": release.pair_count,
        "archive_bytes": release.archive_size,
        "manifest_sha256": release.manifest_sha256,
        "archive_sha256": release.archive_sha256,
    }


def omni_figures(results: list[dict], copies: list[dict], pairs: int) -> dict:
    """The omni data set's figures: the build and ``cp -r`` of the same media, in MB/s of
    media, each run's and their medians, and the ratio of the medians (goal >= 0.5)."""
    import statistics

    megabytes = copies[0]["media_bytes"] / 1e6
    build = [megabytes / r["build_s"] for r in results]
    first = [megabytes / (r["import_s"] + r["build_s"]) for r in results]
    copy = [megabytes / c["copy_s"] for c in copies]
    return {
        "benchmark": "release_speed omni",
        "settings": {
            "pairs": pairs,
            "media": {
                kind: {"format": f, "files": n, "bytes_each": b}
                for kind, (f, n, b) in OMNI_MEDIA.items()
            },
            "media_files_in_release": copies[0]["files"],
            "media_mb": round(megabytes, 1),
            "storage": "local disk, one file system",
        },
        "cores": os.cpu_count(),
        "limit": {
            "what": "cp -r of the same files",
            "mb_per_s": [round(v) for v in copy],
            "median_mb_per_s": round(statistics.median(copy)),
        },
        "arbiter": {
            "what": "release build (rows, files, manifest, the archive's skeleton and index)",
            "mb_per_s": [round(v) for v in build],
            "median_mb_per_s": round(statistics.median(build)),
            "build_s": [round(r["build_s"], 2) for r in results],
            "builder_import_s": [round(r["import_s"], 2) for r in results],
            "publish_s": [round(r["publish_s"], 2) for r in results],
        },
        "ratio": round(statistics.median(build) / statistics.median(copy), 2),
        # The build with the builder's import, as a fresh process's first build pays it.
        "ratio_first_build": round(statistics.median(first) / statistics.median(copy), 2),
        "goal": OMNI_GOAL,
    }


def omni_copy(slug: str, scratch: Path) -> dict:
    """``cp -r`` of the media an omni release holds: a folder of hard links to the stored
    files, laid out as the release lays them out, copied into a new folder (removed after).

    On a virtual machine whose memory the host gives it only when first touched, writing into
    page-cache pages never used before costs several times writing into pages freed earlier
    (seen here: 1.3 to 1.5 s against 0.15 s for the same 560 MB). So the copy and the build
    must draw on the same pages: each removes what it wrote (the copy its folder, the build
    its release's folder and archive, ``release_files_removed``), each starts after
    ``os.sync()``, and one untimed copy comes before the first run."""
    import subprocess

    from django.conf import settings

    from annotation.models import Media, Response
    from annotation.releases.formats import MEDIA_DIRS

    used = {
        part["media"]
        for content in Response.objects.filter(project__slug=slug).values_list("content", flat=True)
        for part in content
        if part["type"] in MEDIA_DIRS
    }
    source, target = scratch / "copy-source", scratch / "copy-target"
    shutil.rmtree(source, ignore_errors=True)
    size = 0
    for media in Media.objects.filter(sha256__in=used):
        folder = source / MEDIA_DIRS[media.kind]
        folder.mkdir(parents=True, exist_ok=True)
        stored = Path(settings.MEDIA_ROOT) / media.served_relative_path
        os.link(stored, folder / stored.name)
        size += stored.stat().st_size
    os.sync()  # nothing of an earlier step still being written back while the copy runs
    start = time.perf_counter()
    subprocess.run(["cp", "-r", str(source), str(target)], check=True)
    seconds = time.perf_counter() - start
    shutil.rmtree(target)
    shutil.rmtree(source)
    return {"copy_s": seconds, "media_bytes": size, "files": len(used)}


def release_files_removed(slug: str, version: str) -> None:
    """Removes a measured release's folder, its archive's skeleton and index (and the archive
    of a build that wrote it whole); its row stays, so the next copy writes into the pages
    they held (``omni_copy``)."""
    from annotation.models import Release

    release = Release.objects.get(project__slug=slug, version=version)
    shutil.rmtree(release.folder)
    for path in release.archive_path.parent.glob(f"{release.archive_name}*"):
        path.unlink()


def scratch_roots(prefix: str) -> Path:
    """A temporary folder for the media and releases of a benchmark's throw-away projects,
    set as their roots before Django starts."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["ARBITER_MEDIA_ROOT"] = str(scratch / "media")
    os.environ["ARBITER_RELEASE_ROOT"] = str(scratch / "releases")
    return scratch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(TARGETS), help="one data set")
    parser.add_argument("--pairs", type=int, help="pairs (default: 100,000 text, 10,000 images)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3, help="builds, each in a new process")
    parser.add_argument("--keep", action="store_true", help="keep the projects afterwards")
    parser.add_argument("--measure", nargs=2, metavar=("SLUG", "VERSION"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.measure:
        setup_django()
        print(json.dumps(measure(*args.measure)))
        return
    scratch = scratch_roots("release-bench-")
    setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    for kind in [args.only] if args.only else ["text", "images"]:
        pairs = args.pairs or DEFAULT_PAIRS[kind]
        slug = f"bench-release-{kind}-{int(time.time())}"
        start = time.perf_counter()
        load(kind=kind, slug=slug, pairs=pairs, seed=args.seed)
        print(f"{kind}: loaded {pairs:,} pairs ({time.perf_counter() - start:.1f} s)")
        try:
            results, copies = [], []
            if kind == "omni":
                omni_copy(slug, scratch)  # untimed: see omni_copy
            for run in range(args.runs):
                if kind == "omni":
                    copies.append(omni_copy(slug, scratch))
                    print(f"  run {run + 1}: cp -r {copies[-1]['copy_s']:.2f} s")
                os.sync()  # the build starts as the copy did: nothing waiting to be written
                result = measure_in_child(__file__, slug, f"1.0.{run}")
                results.append(result)
                if kind == "omni" and not args.keep:
                    release_files_removed(slug, f"1.0.{run}")
                print(
                    f"  run {run + 1}: build {result['build_s']:.2f} s (the builder's "
                    f"import before it {result['import_s']:.2f} s, publish "
                    f"{result['publish_s']:.2f} s), peak RSS "
                    f"{result['peak_rss_mb']:.0f} MB (before the build "
                    f"{result['rss_before_mb']:.0f} MB), {result['pairs']:,} pairs, archive "
                    f"{result['archive_bytes'] / 1e6:.1f} MB {result['archive_sha256'][:12]}, "
                    f"manifest {result['manifest_sha256'][:12]}"
                )
            seconds, megabytes = TARGETS[kind]
            print(f"  build (s):     {spread([r['build_s'] for r in results])}"
                  + (f"  (target <= {seconds:g})" if seconds else ""))  # fmt: skip
            print(f"  peak RSS (MB): {spread([r['peak_rss_mb'] for r in results])}"
                  + (f"  (target < {megabytes:g})" if megabytes else ""))  # fmt: skip
            print(f"  publish (s):   {spread([r['publish_s'] for r in results])}")
            same = len({(r["manifest_sha256"], r["archive_sha256"]) for r in results}) == 1
            print(f"  same bytes under every version: {'yes' if same else 'NO'}")
            if kind == "omni":
                print(json.dumps(omni_figures(results, copies, pairs)))
        finally:
            if not args.keep:
                delete(slug)
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
