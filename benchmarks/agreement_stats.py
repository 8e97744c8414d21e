"""How fast the agreement statistics are on a large project
(``annotation/agreement/statistics.py``).

Builds 1,000,002 synthetic likert6 votes with numpy (333,334 pairs x 3 of 30 annotators, each
pair with a latent preference plus per-vote noise, so agreement is moderate; a time on task per
vote; 1% gold pairs), then times each function and the bootstrap intervals, and prints the
total for a whole report (four alphas with intervals, pairwise agreement, unanimous share,
Fleiss' kappa, per-annotator figures) and the peak RSS of the process.

Target (the agreement report): <= 10 s including bootstrap intervals, peak RSS < 1 GB.

    .venv/bin/python benchmarks/agreement_stats.py                  # the target's sizes
    .venv/bin/python benchmarks/agreement_stats.py --pairs 10000    # a quick look

No database is used; Django is set up only because the module reads the scale and rule enums.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def synthetic_votes(*, pairs: int, annotators: int, seed: int) -> dict[str, np.ndarray]:
    """Three distinct annotators per pair; values 1..6 around a latent preference per pair."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, annotators, pairs)
    second = (first + rng.integers(1, annotators, pairs)) % annotators
    low, high = np.minimum(first, second), np.maximum(first, second)
    third = rng.integers(0, annotators - 2, pairs)  # skip the two already chosen
    third += third >= low
    third += third >= high
    latent = rng.normal(3.5, 1.5, pairs)
    values = np.clip(np.rint(latent[:, None] + rng.normal(0, 1.2, (pairs, 3))), 1, 6)
    return {
        "units": np.repeat(np.arange(pairs) * 7 + 1000, 3),  # sparse, like primary keys
        "raters": np.stack([first, second, third], axis=1).ravel() + 1,
        "values": values.astype(np.int64).ravel(),
        "time_on_task_ms": rng.lognormal(np.log(20_000), 0.6, pairs * 3),
    }


def timed(label: str, func, *args, **kwargs):
    start = time.perf_counter()
    result = func(*args, **kwargs)
    elapsed = time.perf_counter() - start
    print(f"  {label:<34} {elapsed:7.3f} s")
    return result, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=333_334)
    parser.add_argument("--annotators", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--consensus-sample", type=int, default=20_000)
    args = parser.parse_args()
    setup_django()
    from annotation.agreement import statistics as agreement
    from annotation.decisions import rules

    votes = synthetic_votes(pairs=args.pairs, annotators=args.annotators, seed=args.seed)
    print(f"{len(votes['values']):,} votes on {args.pairs:,} pairs by {args.annotators} annotators")
    print(f"bootstrap: {agreement.BOOTSTRAP_RESAMPLES} resamples (BOOTSTRAP_RESAMPLES)")
    ratings, build = timed(
        "Ratings.from_arrays", agreement.Ratings.from_arrays, scale="likert6", **votes
    )
    report = build
    for level in agreement.AlphaLevel:
        alpha, seconds = timed(
            f"krippendorff_alpha({level})", agreement.krippendorff_alpha, ratings, level
        )
        ci, ci_seconds = timed(
            f"bootstrap_alpha_ci({level})", agreement.bootstrap_alpha_ci, ratings, level
        )
        print(f"    alpha {alpha:.4f}, 95% interval {ci[0]:.4f} .. {ci[1]:.4f}")
        report += seconds + ci_seconds
    gold_ids = ratings.unit_ids[::100]
    gold = {pair: "A" for pair in gold_ids}
    for label, func, kwargs in [
        ("pairwise_agreement", agreement.pairwise_agreement, {}),
        ("unanimous_share", agreement.unanimous_share, {}),
        ("fleiss_kappa", agreement.fleiss_kappa, {}),
        ("per_annotator", agreement.per_annotator, {"gold": gold}),
    ]:
        value, seconds = timed(label, func, ratings, **kwargs)
        if not isinstance(value, list):
            print(f"    {value:.4f}")
        report += seconds
    sample = votes["values"][: args.consensus_sample * 3].reshape(-1, 3).tolist()
    start = time.perf_counter()
    for values in sample:
        rules.consensus(values, scale="likert6", rule="mmrb2", min_agree=2)
    per_pair = (time.perf_counter() - start) / len(sample)
    print(f"  consensus (mmrb2), per pair          {per_pair * 1e6:7.2f} us")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"report total: {report:.2f} s (target <= 10 s); peak RSS {peak_mb:.0f} MB (target < 1024)"
    )


if __name__ == "__main__":
    main()
