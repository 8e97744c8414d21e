"""How fast a reward model trains (issue 11, "Speed": 10,000 text pairs on CPU in <= 5 minutes
with the hashed features, <= 10 minutes with MiniLM).

Each repeat runs in a fresh process, so MiniLM loads its weights and embeds every text again
(nothing is remembered between repeats), then trains with the default options (early stopping
included) on generated pairs with a learnable signal (tests/judges/training_support.py).
Prints each repeat's wall time, epochs and held-out accuracy, then the median and spread.

    python benchmarks/train_speed.py --pairs 10000 --features hashed,minilm --repeat 3
    python benchmarks/train_speed.py --device cuda      # on a machine with a GPU

Measurements are named in MEASUREMENTS; another measurement (such as evaluating a judge
whose verdicts are cached) is added there as a function of the parsed arguments that
returns one repeat's figures, and chosen with --measure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    import django

    django.setup()


def train_once(args: argparse.Namespace, features: str) -> dict:
    """One training, in this process: seconds in all, and those spent embedding texts."""
    setup_django()
    from judges.reward_model.trainer import TrainingOptions, train
    from tests.judges.training_support import preference_pairs

    pairs = preference_pairs(args.pairs, seed=args.seed)
    prepared: list[float] = []
    started = time.perf_counter()
    result = train(
        pairs,
        TrainingOptions(features=features, device=args.device, seed=args.seed),
        on_prepare=lambda done, total: (
            prepared.append(time.perf_counter()) if done == total else None
        ),
    )
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "embedding_seconds": (prepared[-1] - started) if prepared else 0.0,
        "epochs": len(result.history),
        "heldout_accuracy": result.best.heldout_accuracy,
        "train_pairs": result.train_pairs,
    }


# name -> (description, one repeat in a fresh process given the arguments and a variant)
MEASUREMENTS: dict[str, tuple[str, Callable[[argparse.Namespace, str], dict]]] = {
    "train": ("reward-model training, one variant per feature kind", train_once),
}


def repeat_in_fresh_processes(args: argparse.Namespace, measure: str, variant: str) -> list:
    runs = []
    for n in range(args.repeat):
        command = [
            sys.executable,
            __file__,
            "--one",
            measure,
            "--variant",
            variant,
            "--pairs",
            str(args.pairs),
            "--device",
            args.device,
            "--seed",
            str(args.seed),
        ]
        out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            sys.exit(f"{measure} {variant} failed:\n{out.stderr[-3000:]}")
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append(figures)
        print(
            f"  {measure} {variant} run {n + 1}: "
            + ", ".join(
                f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
            ),
            flush=True,
        )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--features", default="hashed,minilm", help="comma-separated kinds")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure", default="train", choices=sorted(MEASUREMENTS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(MEASUREMENTS[args.one][1](args, args.variant)))
        return
    description = MEASUREMENTS[args.measure][0]
    print(f"{description}: {args.pairs} pairs on {args.device}, {args.repeat} repeats", flush=True)
    for variant in [v.strip() for v in args.features.split(",") if v.strip()]:
        seconds = [run["seconds"] for run in repeat_in_fresh_processes(args, args.measure, variant)]
        print(
            f"{variant}: median {statistics.median(seconds):.1f} s, spread "
            f"{min(seconds):.1f}-{max(seconds):.1f} s over {len(seconds)} runs",
            flush=True,
        )


if __name__ == "__main__":
    main()
