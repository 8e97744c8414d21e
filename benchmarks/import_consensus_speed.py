"""What deciding pairs at import costs (issue 18, "Speed"): MMRB2's three voted files imported
with their prior votes deciding each pair as it goes, against the same import with the
decision switched off (the import alone, writing the pair rows as it did before). Target: no
more than 10% slower.

Generates three MMRB2-shaped JSON documents (``{"pairs": [...]}``, indented, three likert
votes and ``chosen`` per pair; text-only, so the decision's share of the time is as large as
it can be: images would add hashing and checking that both variants pay), then imports all
three into a throw-away project per run, each run in a fresh process, the two variants
alternating, and prints each run and the median and spread (min to max) of each variant.

    DATABASE_URL=postgres://... python benchmarks/import_consensus_speed.py --pairs 10000 \
        --repeat 3
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import import_speed as helpers  # the import benchmark's setup and clean-up

FILES = ("t2i", "edit", "interleaved")
VARIANTS = ("alone", "decide")


def mmrb2_pair(task: str, index: int, rng: random.Random) -> dict:
    # MMRB2's pairs have a clear majority: most unanimous, a tenth two votes against one.
    high = rng.random() < 0.5
    votes = [rng.choice([5, 6]) if high else rng.choice([1, 2]) for _ in range(3)]
    if rng.random() < 0.1:
        votes[0] = 7 - votes[0]
    return {
        "id": f"{task}_{index:05d}_model-{index % 5}_0_model-{(index + 2) % 5}_4000",
        "response_a": {
            "model_name": f"model-{index % 5}",
            "response_content": [["text", f"Response A to {task} prompt {index}."]],
        },
        "response_b": {
            "model_name": f"model-{(index + 2) % 5}",
            "response_content": [["text", f"Response B to {task} prompt {index}."]],
        },
        "chosen": "A" if high else "B",
        "human_annotations": votes,
        "prompt_source": f"{task}bench",
        "prompt_metadata": {"id": index, "category": "general"},
        "prompt_content": [["text", f"The {task} prompt number {index}."]],
    }


def write_files(folder: Path, pairs: int) -> list[Path]:
    rng = random.Random(18)
    paths = []
    for task in FILES:
        path = folder / f"{task}.json"
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"pairs": [mmrb2_pair(task, i, rng) for i in range(pairs)]}, out, indent=2)
        paths.append(path)
    return paths


def one_run(variant: str, paths: list[str]) -> dict:
    """Imports the files into a new project in this process; the figures as a dict."""
    from annotation.imports import importer
    from annotation.imports.importer import pairs_import
    from annotation.models import Pair, PairStatus

    if variant == "alone":
        # The import as it was before deciding at import: no consensus columns written.
        importer._Importer._decision = lambda self, spec: {}  # type: ignore[method-assign]
    project = helpers.new_project()
    try:
        cpu_here, cpu_there = time.process_time(), helpers.backend_cpu_seconds()
        started = time.perf_counter()
        summaries = [pairs_import(project=project, source=path) for path in paths]
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu_here
        there = helpers.backend_cpu_seconds()
        if there is not None and cpu_there is not None:
            cpu += there - cpu_there
        decided = Pair.objects.filter(project=project, status=PairStatus.CONSENSUS).count()
        return {
            "variant": variant,
            "seconds": seconds,
            # Python's and the PostgreSQL backend's CPU seconds: on a machine others load,
            # what the import costs, where wall time says how busy the machine was.
            "cpu_seconds": cpu,
            "pairs": sum(s.created_pairs for s in summaries),
            "decided": sum(s.decided_pairs for s in summaries),
            "consensus_pairs": decided,
        }
    finally:
        helpers.drop_project(project)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000, help="pairs per file")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant")
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    helpers.ARGS = argparse.Namespace(keep=False)

    with tempfile.TemporaryDirectory(prefix="arbiter-consensus-bench-") as tmp:
        folder = Path(tmp)
        helpers.setup_django(str(folder / "media-store"))
        if args.one:
            print(json.dumps(one_run(args.one, args.files)))
            return
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        print(f"database: {connection.vendor} ({connection.settings_dict['NAME']})")
        paths = [str(path) for path in write_files(folder, args.pairs)]
        runs: dict[str, list[dict]] = {variant: [] for variant in VARIANTS}
        for n in range(args.repeat):
            # Alternating which variant goes first cancels what running second costs or saves.
            for variant in VARIANTS if n % 2 == 0 else VARIANTS[::-1]:
                command = [sys.executable, __file__, "--one", variant, "--files", *paths]
                out = subprocess.run(command, capture_output=True, text=True, cwd=helpers.ROOT)
                if out.returncode != 0:
                    sys.exit(f"{variant} failed:\n{out.stderr[-3000:]}")
                figures = json.loads(out.stdout.strip().splitlines()[-1])
                runs[variant].append(figures)
                print(
                    f"  run {n + 1} {variant:>6}: {figures['pairs']:,} pairs in "
                    f"{figures['seconds']:.2f} s (CPU {figures['cpu_seconds']:.2f} s), "
                    f"{figures['decided']:,} decided at import, "
                    f"{figures['consensus_pairs']:,} in consensus",
                    flush=True,
                )
        for key, what in (("seconds", "wall"), ("cpu_seconds", "CPU")):
            medians = {}
            for variant, results in runs.items():
                values = [r[key] for r in results]
                medians[variant] = statistics.median(values)
                print(
                    f"{variant:>6} {what}: median {medians[variant]:.2f} s "
                    f"(spread {min(values):.2f} to {max(values):.2f} s, {len(values)} runs)"
                )
            extra = medians["decide"] / medians["alone"] - 1
            print(f"deciding at import costs {extra:+.1%} of the import's {what} time (<= +10%)")


if __name__ == "__main__":
    main()
