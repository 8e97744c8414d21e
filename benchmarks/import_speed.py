"""How fast ``pairs_import`` is, and how much memory it needs (issue 2, "Speed").

Generates its data in a temporary folder and imports it into throw-away projects on the
database named by DATABASE_URL (PostgreSQL is what the targets are about), then prints:

1. text pairs per second (target: 100,000 pairs at >= 10,000 pairs/s);
2. seconds for pairs that reference distinct PNG images (target: 10,000 pairs over 1,000
   images in <= 30 s);
3. with ``--rss-mb``, the peak RSS of a child process importing a JSONL file of about that
   size (target: < 500 MB for a 1 GB file, ``--rss-mb 1024``).

    DATABASE_URL=postgres://... python benchmarks/import_speed.py --text-pairs 20000 \
        --image-pairs 2000 --images 200 --rss-mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django(media_root: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # DEBUG keeps a log of every query, which is not what production pays for.
    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    os.environ["ARBITER_MEDIA_ROOT"] = media_root
    import django

    django.setup()


def text_pair(index: int, rng: random.Random, filler: str, annotations: int = 3) -> dict:
    return {
        "id": f"text-{index}",
        "task": "reasoning",
        "prompt_content": [["text", f"Question {index}: {filler}"]],
        "response_a": {
            "model_name": f"model-{index % 7}",
            "response_content": [["text", f"Answer A to {index}. {filler}"]],
        },
        "response_b": {
            "model_name": f"model-{(index + 3) % 7}",
            "response_content": [["text", f"Answer B to {index}. {filler}"]],
        },
        "criterion": "Which answer is more correct?" if index % 5 == 0 else "",
        "prompt_source": "benchmark",
        "human_annotations": [rng.randint(1, 6) for _ in range(annotations)],
        "chosen": rng.choice(["A", "B"]),
    }


def write_text_pairs(
    path: Path, count: int, *, annotations: int = 3, filler_chars: int = 40
) -> int:
    rng = random.Random(1)
    filler = ("lorem ipsum dolor sit amet " * (filler_chars // 27 + 1))[:filler_chars]
    with open(path, "w", encoding="utf-8") as out:
        for index in range(count):
            out.write(json.dumps(text_pair(index, rng, filler, annotations)) + "\n")
    return path.stat().st_size


def write_jsonl_of_size(path: Path, megabytes: int) -> int:
    """About ``megabytes`` MB of text pairs, each around 1 KB."""
    rng = random.Random(2)
    filler = "the quick brown fox jumps over the lazy dog " * 6
    target = megabytes * 1024 * 1024
    written = 0
    index = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            line = json.dumps(text_pair(index, rng, filler)) + "\n"
            out.write(line)
            written += len(line)
            index += 1
    return index


def write_image_pairs(folder: Path, pairs: int, images: int) -> Path:
    from PIL import Image

    rng = random.Random(3)
    media = folder / "images"
    media.mkdir()
    for index in range(images):
        image = Image.new("RGB", (96, 96), (index % 256, (index // 256) % 256, 120))
        noise = Image.effect_noise((96, 96), 40).convert("RGB")
        Image.blend(image, noise, 0.3).save(media / f"{index}.png")
    path = folder / "image_pairs.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for index in range(pairs):
            a, b = rng.sample(range(images), 2)
            out.write(
                json.dumps(
                    {
                        "id": f"t2i-{index}",
                        "task": "t2i",
                        "prompt_content": [["text", f"Draw picture number {index}"]],
                        "response_a": {
                            "model_name": "painter-1",
                            "response_content": [["image", f"images/{a}.png"]],
                        },
                        "response_b": {
                            "model_name": "painter-2",
                            "response_content": [["image", f"images/{b}.png"]],
                        },
                    }
                )
                + "\n"
            )
    return path


def new_project():
    from annotation.models import Project

    slug = f"bench-{uuid.uuid4().hex[:10]}"
    return Project.objects.create(slug=slug, name=slug, scale="likert6", overlap=3)


def drop_project(project) -> None:
    """Removes the benchmark's rows with a few set-based statements (the ORM's cascade
    would load every row first)."""
    from django.db import connection, transaction

    from annotation.models import (
        Media,
        Pair,
        PriorAnnotation,
        Project,
        ProjectMedia,
        Prompt,
        Response,
    )

    def table(model) -> str:
        return connection.ops.quote_name(model._meta.db_table)

    with transaction.atomic(), connection.cursor() as cursor:
        pid = project.pk
        cursor.execute(
            f"DELETE FROM {table(PriorAnnotation)} WHERE pair_id IN "
            f"(SELECT id FROM {table(Pair)} WHERE project_id = %s)",
            [pid],
        )
        for model in (Pair, Prompt, Response):
            cursor.execute(f"DELETE FROM {table(model)} WHERE project_id = %s", [pid])
        cursor.execute(
            f"DELETE FROM {table(ProjectMedia)} WHERE project_id = %s RETURNING media_id", [pid]
        )
        shas = [sha for (sha,) in cursor.fetchall()]
        if shas:
            Media.objects.filter(pk__in=shas).exclude(
                pk__in=ProjectMedia.objects.values("media_id")
            ).delete()
        Project.objects.filter(pk=pid).delete()
    # Repeated runs would otherwise measure a table full of dead rows.
    with connection.cursor() as cursor:
        for model in (PriorAnnotation, Pair, Prompt, Response, ProjectMedia, Media):
            cursor.execute(f"VACUUM (ANALYZE) {table(model)}")


def backend_cpu_seconds() -> float | None:
    """CPU seconds this connection's PostgreSQL backend has used so far, when the server runs
    on this machine and its /proc is readable (else None). On a machine others load, CPU time
    says what an import costs where wall time says mostly how busy the machine was."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # utime and stime, the 14th and 15th fields (the 12th and 13th after the command name).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_note(started_here: float, started_there: float | None) -> str:
    """The CPU seconds spent since the two readings, in this process and in the backend."""
    here = time.process_time() - started_here
    there = backend_cpu_seconds()
    if there is None or started_there is None:
        return f"CPU {here:.2f} s in Python"
    return f"CPU {here:.2f} s in Python + {there - started_there:.2f} s in PostgreSQL"


def run_import(path: Path, media_root: Path | None = None, batch_size: int | None = None):
    """Imports ``path`` into a new project: the summary, the wall seconds and the CPU spent."""
    from annotation.imports.importer import BATCH_SIZE, pairs_import

    project = new_project()
    try:
        cpu_here, cpu_there = time.process_time(), backend_cpu_seconds()
        started = time.perf_counter()
        summary = pairs_import(
            project=project,
            source=path,
            media_root=media_root,
            batch_size=batch_size or BATCH_SIZE,
        )
        return summary, time.perf_counter() - started, cpu_note(cpu_here, cpu_there)
    finally:
        if not ARGS.keep:
            drop_project(project)


def child_main(path: str, batch_size: int) -> None:
    """The child process of the memory check: imports ``path`` and prints its own peak RSS."""
    summary, seconds, _ = run_import(Path(path), batch_size=batch_size)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"pairs": summary.created_pairs, "seconds": seconds, "peak_mb": peak_mb}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text-pairs", type=int, default=100_000)
    parser.add_argument("--image-pairs", type=int, default=10_000)
    parser.add_argument("--images", type=int, default=1_000)
    parser.add_argument(
        "--rss-mb",
        type=int,
        default=0,
        help="also import a JSONL file of about this many MB in a child process and report "
        "its peak RSS (1024 for the issue's 1 GB check; 0 skips it)",
    )
    parser.add_argument(
        "--annotations",
        type=int,
        default=3,
        help="prior human votes per text pair, as in MMRB2 (each one is a row)",
    )
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark projects")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    global ARGS
    ARGS = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="arbiter-import-bench-") as tmp:
        folder = Path(tmp)
        setup_django(str(folder / "media-store"))
        if ARGS.child:
            child_main(ARGS.child, ARGS.batch_size)
            return
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        print(f"database: {connection.vendor} ({connection.settings_dict['NAME']})")

        if ARGS.text_pairs:
            path = folder / "text_pairs.jsonl"
            size = write_text_pairs(path, ARGS.text_pairs, annotations=ARGS.annotations)
            summary, seconds, cpu = run_import(path, batch_size=ARGS.batch_size)
            print(
                f"text pairs:  {summary.created_pairs:,} pairs with {ARGS.annotations} prior "
                f"votes each ({size / 2**20:.1f} MB) in "
                f"{seconds:.2f} s = {summary.created_pairs / seconds:,.0f} pairs/s "
                f"(target >= 10,000 pairs/s for 100,000); {cpu}"
            )

        if ARGS.image_pairs:
            path = write_image_pairs(folder, ARGS.image_pairs, ARGS.images)
            summary, seconds, cpu = run_import(path, media_root=folder, batch_size=ARGS.batch_size)
            print(
                f"image pairs: {summary.created_pairs:,} pairs over {summary.media_created:,} "
                f"distinct images in {seconds:.2f} s = {summary.created_pairs / seconds:,.0f} "
                f"pairs/s (target <= 30 s for 10,000 pairs over 1,000 images); {cpu}"
            )

        if ARGS.rss_mb:
            path = folder / "big.jsonl"
            count = write_jsonl_of_size(path, ARGS.rss_mb)
            size_mb = path.stat().st_size / 2**20
            command = [sys.executable, __file__, "--child", str(path)]
            if ARGS.batch_size:
                command += ["--batch-size", str(ARGS.batch_size)]
            if ARGS.keep:
                command.append("--keep")
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            result = json.loads(output.strip().splitlines()[-1])
            peak_children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            print(
                f"memory:      {count:,} pairs, {size_mb:,.0f} MB JSONL imported in "
                f"{result['seconds']:.1f} s = {result['pairs'] / result['seconds']:,.0f} "
                f"pairs/s; peak RSS of the importing process {peak_children_mb:,.0f} MB "
                "(target < 500 MB for 1 GB)"
            )


ARGS: argparse.Namespace

if __name__ == "__main__":
    main()
