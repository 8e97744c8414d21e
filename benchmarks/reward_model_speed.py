"""How fast the reward-model judge scores responses on CPU (issue 4, "Speed": a small model
scores >= 2,000 responses/s).

Writes a randomly initialised checkpoint of the given size to a temporary folder under
ARBITER_CHECKPOINT_ROOT (the only place a reward-model judge loads from), generates
synthetic prompts and responses, and prints responses per second for

1. the model alone (``RewardModel.score`` in batches: tokenising, features, forward pass);
2. the judge backend (``judge_batch`` on pairs shown in both orders, each distinct response
   scored once, as a filter run calls it).

    python benchmarks/reward_model_speed.py --responses 20000 --batch-size 256 --words 120
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VOCABULARY = (  # noqa: SIM905 - a list literal of these words reads worse
    "the a an of to in on with red green blue small large cat dog car tree house person "
    "image shows left right above below text sign reads number three two one answer because "
    "therefore first second step result equals water mountain city night light shadow colour"
).split()


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    import django

    django.setup()


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(VOCABULARY, k=max(1, int(rng.gauss(words, words / 4)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", type=int, default=20_000, help="responses to score")
    parser.add_argument("--batch-size", type=int, default=256, help="responses per forward pass")
    parser.add_argument("--words", type=int, default=120, help="mean words per response")
    parser.add_argument("--prompt-words", type=int, default=40, help="mean words per prompt")
    parser.add_argument("--n-buckets", type=int, default=1 << 16)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best is printed")
    args = parser.parse_args()

    setup_django()
    import torch
    from django.conf import settings

    from judges.backends.base import JudgeItem
    from judges.backends.reward_model import RewardModelBackend
    from judges.models import Judge
    from judges.reward_model.model import ScoringInput, init_checkpoint, load_checkpoint

    if args.threads:
        torch.set_num_threads(args.threads)
    rng = random.Random(0)
    n_pairs = max(1, args.responses // 2)
    prompts = [sentence(rng, args.prompt_words) for _ in range(n_pairs)]
    responses = [(sentence(rng, args.words), sentence(rng, args.words)) for _ in range(n_pairs)]

    settings.ARBITER_CHECKPOINT_ROOT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=settings.ARBITER_CHECKPOINT_ROOT) as folder:
        checkpoint = init_checkpoint(
            Path(folder) / "rm.pt",
            n_buckets=args.n_buckets,
            embed_dim=args.embed_dim,
            hidden_dim=args.hidden_dim,
            max_tokens=args.max_tokens,
        )
        size_mb = checkpoint.stat().st_size / 1e6
        model = load_checkpoint(checkpoint, args.device)
        parameters = sum(p.numel() for p in model.parameters())
        print(
            f"model: {parameters:,} parameters ({size_mb:.1f} MB checkpoint), device "
            f"{args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads"
        )
        inputs = [
            ScoringInput(prompt, response)
            for prompt, pair in zip(prompts, responses, strict=True)
            for response in pair
        ]
        model.score(inputs[: args.batch_size])  # warm up
        best = float("inf")
        for _ in range(args.repeats):
            started = time.perf_counter()
            for start in range(0, len(inputs), args.batch_size):
                model.score(inputs[start : start + args.batch_size])
            best = min(best, time.perf_counter() - started)
        print(
            f"model alone: {len(inputs):,} responses in {best:.2f} s = "
            f"{len(inputs) / best:,.0f} responses/s (batch {args.batch_size})"
        )

        judge = Judge(
            name="rm-bench",
            kind="reward_model",
            checkpoint=str(checkpoint),
            device=args.device,
            batch_size=args.batch_size,
        )
        backend = RewardModelBackend(judge)
        items = [
            JudgeItem(
                pair_id=n,
                order=order,
                task="text",
                prompt=[{"type": "text", "text": prompt}],
                first=[{"type": "text", "text": first if order == "AB" else second}],
                second=[{"type": "text", "text": second if order == "AB" else first}],
            )
            for n, (prompt, (first, second)) in enumerate(zip(prompts, responses, strict=True))
            for order in ("AB", "BA")
        ]
        backend.judge_batch(items[:8])  # loads the model
        best = float("inf")
        for _ in range(args.repeats):
            started = time.perf_counter()
            results = backend.judge_batch(items)
            best = min(best, time.perf_counter() - started)
        assert all(r.outcome == "ok" for r in results)
        distinct = 2 * n_pairs
        print(
            f"judge backend: {len(items):,} judgements ({n_pairs:,} pairs x 2 orders, "
            f"{distinct:,} distinct responses) in {best:.2f} s = "
            f"{distinct / best:,.0f} responses/s, {len(items) / best:,.0f} judgements/s"
        )
        backend.close()


if __name__ == "__main__":
    main()
