"""Fitting the reward model to preference pairs with the Bradley-Terry loss
``-log sigmoid(r_chosen - r_rejected)``.

The pairs are split by prompt (no prompt on both sides), the model with the best held-out
accuracy is kept (of equal accuracies, the lower held-out loss), and training stops after
``patience`` epochs without a better one. A seed
fixes everything random (initial weights, the split, the batch order), and training runs with
torch's deterministic algorithms on one CPU thread, so one seed gives bit-identical weights.

With a ``state_path`` the whole state (weights, optimizer, random generators, the best epoch so
far) is written there after each epoch, and a training that finds its own state there goes on
from that epoch: a training killed and resumed gives the weights an uninterrupted one gives.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from judges.reward_model.data import PreferencePair, TrainingDataError
from judges.reward_model.model import RewardModel, resolve_device, validate_config
from judges.reward_model.options import TrainingOptions, options_errors

STATE_FORMAT = "arbiter-training-state"
EVAL_BATCH = 512


@dataclass(frozen=True)
class EpochMetrics:
    epoch: int
    train_loss: float
    heldout_loss: float
    heldout_accuracy: float


@dataclass
class TrainingResult:
    model: RewardModel
    config: dict
    history: list[EpochMetrics]
    best_epoch: int
    train_pairs: int
    heldout_pairs: int
    stopped_early: bool
    heldout_keys: list[str] = field(default_factory=list)
    resumed_from_epoch: int = 0  # the epochs read back from ``state_path``; 0: a fresh start

    @property
    def best(self) -> EpochMetrics:
        return self.history[self.best_epoch - 1]


def split_by_prompt(
    pairs: list[PreferencePair], *, holdout: float, seed: int
) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(train, held out): a seeded ``holdout`` share of the prompts, at least one, goes to
    the held-out side with all its pairs."""
    groups = sorted({pair.group for pair in pairs})
    if len(groups) < 2:
        raise TrainingDataError(
            f"{len(pairs)} pairs from {len(groups)} prompt(s): training needs pairs from at "
            "least 2 prompts, so that some prompts can be held out"
        )
    order = np.random.default_rng(seed).permutation(len(groups))
    n_held = min(len(groups) - 1, max(1, round(len(groups) * holdout)))
    held = {groups[i] for i in order[:n_held]}
    return (
        [pair for pair in pairs if pair.group not in held],
        [pair for pair in pairs if pair.group in held],
    )


@contextmanager
def _deterministic(device: torch.device, seed: int) -> Iterator[None]:
    """Deterministic algorithms, one CPU thread and a seeded generator of torch's own,
    all put back afterwards."""
    if device.type == "cuda":  # cuBLAS is deterministic only with a fixed workspace
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            yield
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(threads)


def _losses(model: RewardModel, batch: list[PreferencePair]) -> torch.Tensor:
    """The Bradley-Terry loss of each pair in ``batch``."""
    inputs = [pair.chosen for pair in batch] + [pair.rejected for pair in batch]
    rewards = model(*model.featurize(inputs))
    margin = rewards[: len(batch)] - rewards[len(batch) :]
    return -F.logsigmoid(margin)


def evaluate(model: RewardModel, pairs: list[PreferencePair]) -> tuple[float, float]:
    """(mean loss, accuracy) on ``pairs``; a pair counts as right when r_chosen > r_rejected."""
    model.eval()
    total_loss, right = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(pairs), EVAL_BATCH):
            losses = _losses(model, pairs[start : start + EVAL_BATCH])
            total_loss += float(losses.sum())
            # loss < log 2 exactly when the margin is positive
            right += int((losses < math.log(2)).sum())
    return total_loss / len(pairs), right / len(pairs)


def state_fingerprint(pairs: list[PreferencePair], options: TrainingOptions, config: dict) -> str:
    """What a saved state must have been trained on to be resumed: the options, the model's
    config and every pair (key, texts, criterion), in order."""
    digest = hashlib.sha256(json.dumps([options.as_dict(), config], sort_keys=True).encode())
    for pair in pairs:
        for part in (pair.key, pair.group, *_texts(pair.chosen), *_texts(pair.rejected)):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def _texts(item) -> tuple[str, ...]:
    return (
        item.prompt_text,
        item.response_text,
        item.criterion,
        repr(item.images),
        repr(item.videos),
        repr(item.audios),
    )


def _read_state(path: Path | None, fingerprint: str) -> dict | None:
    """The state saved at ``path`` when it is this training's (same fingerprint); None when
    there is none, or it is another training's or unreadable (the training starts afresh)."""
    if path is None or not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # a file cut short by the kill, or not a state at all
        return None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        return None
    return state if state.get("fingerprint") == fingerprint else None


def _write_state(path: Path, state: dict) -> None:
    """Writes ``state`` next to ``path`` and moves it there, so a kill mid-write leaves the
    previous epoch's state whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    torch.save(state, partial)
    os.replace(partial, path)


def _cpu(state_dict: dict) -> dict:
    return {name: tensor.detach().cpu().clone() for name, tensor in state_dict.items()}


def train(
    pairs: list[PreferencePair],
    options: TrainingOptions,
    *,
    model_config: dict | None = None,
    on_step: Callable[[int, int], None] | None = None,
    on_epoch: Callable[[EpochMetrics], None] | None = None,
    on_prepare: Callable[[int, int], None] | None = None,
    on_start: Callable[[list[EpochMetrics]], None] | None = None,
    state_path: Path | None = None,
) -> TrainingResult:
    """Trains a new reward model on ``pairs``. ``on_step(steps_done, steps_at_most)`` follows
    the batches, ``on_epoch`` each epoch's metrics, ``on_prepare(done, total)`` the one-off
    MiniLM embedding of every text, ``on_start(history)`` is called once before the first
    epoch with the epochs read back from ``state_path`` (none on a fresh start). With
    ``state_path`` the state is saved there after every epoch (module docstring)."""
    if errors := options_errors(options):
        raise ValueError("; ".join(f"{k}: {v}" for k, v in errors.items()))
    device = resolve_device(options.device)
    config = validate_config(
        {**(model_config or {}), "features": options.features, "criterion": True, "media": True}
    )
    train_pairs, heldout = split_by_prompt(pairs, holdout=options.holdout, seed=options.seed)
    batches = math.ceil(len(train_pairs) / options.batch_size)
    steps_at_most, steps = batches * options.epochs, 0
    history: list[EpochMetrics] = []
    best: tuple[float, float] = (-1.0, 0.0)  # (accuracy, -loss): higher is better
    best_epoch, best_state, stale = 0, {}, 0
    fingerprint = state_fingerprint(pairs, options, config) if state_path else ""
    saved = _read_state(state_path, fingerprint)
    with _deterministic(device, options.seed):
        model = RewardModel(config).to(device)
        model.prepare(
            [p for pair in pairs for p in (pair.chosen, pair.rejected)], progress=on_prepare
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=options.lr)
        order_rng = np.random.default_rng(options.seed)
        first_epoch = 1
        if saved is not None:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            order_rng.bit_generator.state = saved["order_rng"]
            torch.set_rng_state(saved["torch_rng"])
            if device.type == "cuda" and saved.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(saved["cuda_rng"], device)
            history = [EpochMetrics(**metrics) for metrics in saved["history"]]
            best = (float(saved["best"][0]), float(saved["best"][1]))
            best_epoch, stale = saved["best_epoch"], saved["stale"]
            best_state = {k: v.to(device) for k, v in saved["best_state"].items()}
            first_epoch = len(history) + 1
            steps = batches * len(history)
        if on_start is not None:
            on_start(list(history))
        # a state saved by the epoch that stopped early has no epoch left to run
        last_epoch = first_epoch - 1 if saved is not None and saved["stopped"] else options.epochs
        for epoch in range(first_epoch, last_epoch + 1):
            model.train()
            total = 0.0
            order = order_rng.permutation(len(train_pairs))
            for start in range(0, len(order), options.batch_size):
                batch = [train_pairs[i] for i in order[start : start + options.batch_size]]
                loss = _losses(model, batch).mean()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * len(batch)
                steps += 1
                if on_step is not None:
                    on_step(steps, steps_at_most)
            heldout_loss, accuracy = evaluate(model, heldout)
            metrics = EpochMetrics(epoch, total / len(train_pairs), heldout_loss, accuracy)
            history.append(metrics)
            if on_epoch is not None:
                on_epoch(metrics)
            if (accuracy, -heldout_loss) > best:
                best, best_epoch, stale = (accuracy, -heldout_loss), epoch, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                stale += 1
            stopped = stale >= options.patience
            if state_path is not None:
                _write_state(
                    state_path,
                    {
                        "format": STATE_FORMAT,
                        "fingerprint": fingerprint,
                        "model": _cpu(model.state_dict()),
                        "optimizer": optimizer.state_dict(),
                        "order_rng": order_rng.bit_generator.state,
                        "torch_rng": torch.get_rng_state(),
                        "cuda_rng": torch.cuda.get_rng_state(device)
                        if device.type == "cuda"
                        else None,
                        "history": [asdict(metrics) for metrics in history],
                        "best": list(best),
                        "best_epoch": best_epoch,
                        "best_state": _cpu(best_state),
                        "stale": stale,
                        "stopped": stopped,
                    },
                )
            if stopped:
                break
        model.load_state_dict(best_state)
    model.eval()
    return TrainingResult(
        model=model,
        config=config,
        history=history,
        best_epoch=best_epoch,
        train_pairs=len(train_pairs),
        heldout_pairs=len(heldout),
        stopped_early=len(history) < options.epochs,
        heldout_keys=[pair.key for pair in heldout],
        resumed_from_epoch=0 if saved is None else len(saved["history"]),
    )
