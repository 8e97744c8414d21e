"""Bradley-Terry strengths of the response models from pairwise outcomes, as Chatbot Arena
ranks models (docs/leaderboard.md): a tie is half a win for each side, the strengths are the
maximum of the logistic likelihood, and the 95% intervals come from refitting on resampled
outcomes. Pure numpy; the database side is ``annotation.leaderboard.selectors``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Chatbot Arena's scale: 400 points are a factor of 10 in the odds of winning, and the mean
# strength is 1000 (Arena anchors one model instead; a mean anchor needs no model named).
ELO_SCALE = 400.0
ELO_MEAN = 1000.0
ELO_PER_LOG_ODDS = ELO_SCALE / math.log(10.0)

# A weak normal prior on the log-odds strengths (variance 1/PRIOR_PRECISION = 100): it keeps
# an undefeated model's strength finite and separates disconnected groups of models, while
# changing fitted strengths by well under 0.1 points once models have dozens of comparisons.
PRIOR_PRECISION = 0.01
BOOTSTRAP_ROUNDS = 1000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95

_MAX_ITERATIONS = 100
_TOLERANCE = 1e-8  # log-odds: a millionth of a point on the Elo scale
# The most memory one (rounds, K, K) array of a bootstrap chunk takes.
_CHUNK_BYTES = 32 * 1024 * 1024
# Newton steps are clipped to this many log-odds units: far from the optimum (an almost
# undefeated model) a full step can overshoot; near it the clip never binds.
_MAX_STEP = 4.0


@dataclass(frozen=True)
class Outcomes:
    """Pairwise outcomes among ``models``: ``wins[i, j]`` comparisons model i won against
    model j, ``ties[i, j]`` (symmetric) comparisons they tied. The diagonal is zero."""

    models: tuple[str, ...]
    wins: np.ndarray
    ties: np.ndarray

    @classmethod
    def from_counts(cls, counts: dict[tuple[str, str, str], int]) -> Outcomes:
        """From ``{(model_a, model_b, label): n}`` with label ``A``, ``B`` or ``tie``;
        comparisons of a model with itself must be left out by the caller."""
        models = tuple(sorted({m for a, b, _ in counts for m in (a, b)}))
        index = {model: i for i, model in enumerate(models)}
        wins = np.zeros((len(models), len(models)), dtype=np.int64)
        ties = np.zeros_like(wins)
        for (a, b, label), n in counts.items():
            if a == b:
                raise ValueError(f"a comparison of {a!r} with itself")
            i, j = index[a], index[b]
            if label == "A":
                wins[i, j] += n
            elif label == "B":
                wins[j, i] += n
            elif label == "tie":
                ties[i, j] += n
                ties[j, i] += n
            else:
                raise ValueError(f"label {label!r}: expected A, B or tie")
        return cls(models=models, wins=wins, ties=ties)

    @property
    def comparisons(self) -> int:
        return int(self.wins.sum() + np.triu(self.ties).sum())

    def win_rates(self) -> list[list[float | None]]:
        """Row model's share of its comparisons with the column model (ties as half), or
        None where they never met."""
        scored = self.wins + 0.5 * self.ties
        met = scored + scored.T
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = scored / met
        return [
            [None if met[i, j] == 0 else float(rates[i, j]) for j in range(len(self.models))]
            for i in range(len(self.models))
        ]


def fit_strengths(
    wins: np.ndarray,
    ties: np.ndarray,
    *,
    prior: float = PRIOR_PRECISION,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """The log-odds strengths (mean 0) maximising the Bradley-Terry likelihood with a tie as
    half a win each, plus ``-prior/2 * |theta|^2``. ``wins`` and ``ties`` may carry leading
    batch dimensions (..., K, K): each matrix is fitted on its own, by Newton's method from
    ``start`` (mean 0; zeros by default)."""
    scored = np.asarray(wins, dtype=np.float64) + 0.5 * np.asarray(ties, dtype=np.float64)
    met = scored + np.swapaxes(scored, -1, -2)
    count = scored.shape[-1]
    theta = np.zeros(scored.shape[:-1])
    if start is not None:
        theta = theta + start
    won = scored.sum(axis=-1)
    # H - 1 1^T: the Hessian's rows sum to -prior, so its constant direction is singular
    # when prior is 0; the added term makes it invertible without changing a step taken
    # orthogonally to it, and every gradient here is orthogonal to it when theta sums to 0.
    ones = np.ones((count, count))
    for _ in range(_MAX_ITERATIONS):
        p = _sigmoid(theta[..., :, None] - theta[..., None, :])
        gradient = won - (met * p).sum(axis=-1) - prior * theta
        curvature = met * p * (1.0 - p)
        hessian = curvature - np.eye(count) * (curvature.sum(axis=-1) + prior)[..., None]
        step = np.linalg.solve(hessian - ones, gradient[..., None])[..., 0]
        largest = np.abs(step).max(axis=-1, keepdims=True)
        step = step * np.minimum(1.0, _MAX_STEP / np.maximum(largest, _MAX_STEP))
        theta = theta - step
        if largest.max() < _TOLERANCE:
            break
    return theta - theta.mean(axis=-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def to_elo(theta: np.ndarray) -> np.ndarray:
    return ELO_MEAN + ELO_PER_LOG_ODDS * theta


@dataclass(frozen=True)
class Ranked:
    """One model's place: its strength on the Elo scale with its bootstrap interval."""

    model: str
    score: float
    low: float | None
    high: float | None
    wins: int
    losses: int
    ties: int
    pairs: int


def bootstrap_strengths(
    outcomes: Outcomes,
    *,
    rounds: int,
    seed: int,
    prior: float = PRIOR_PRECISION,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Strengths refitted on ``rounds`` resamples of the comparisons with replacement
    (Arena's bootstrap): shape (rounds, K), NaN for a model no resampled comparison holds.
    A resample of the comparisons is a multinomial draw over the cells (model pair, outcome)
    with their observed shares, so it is drawn as counts, never as a million rows. ``start``:
    the strengths fitted on all comparisons, where each refit begins. The rounds are fitted
    in chunks of at most ``_CHUNK_BYTES`` a (rounds, K, K) array (one chunk for a few dozen
    models): the draws are the same, drawn chunk after chunk, and the memory stays bounded
    however many models and rounds (10,000 rounds of 100 models were 800 MB an array)."""
    count = len(outcomes.models)
    upper_i, upper_j = np.triu_indices(count, k=1)
    cells = np.concatenate(
        [
            outcomes.wins[upper_i, upper_j],
            outcomes.wins[upper_j, upper_i],
            outcomes.ties[upper_i, upper_j],
        ]
    )
    total = int(cells.sum())
    generator = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_BYTES // (8 * max(count * count, cells.size)))
    pairs = upper_i.size
    fitted = []
    for done in range(0, rounds, chunk):
        size = min(chunk, rounds - done)
        drawn = generator.multinomial(total, cells / total, size=size)
        wins = np.zeros((size, count, count))
        ties = np.zeros_like(wins)
        wins[:, upper_i, upper_j] = drawn[:, :pairs]
        wins[:, upper_j, upper_i] = drawn[:, pairs : 2 * pairs]
        ties[:, upper_i, upper_j] = drawn[:, 2 * pairs :]
        ties[:, upper_j, upper_i] = drawn[:, 2 * pairs :]
        theta = fit_strengths(wins, ties, prior=prior, start=start)
        present = (wins.sum(axis=-1) + wins.sum(axis=-2) + ties.sum(axis=-1)) > 0
        fitted.append(np.where(present, theta, np.nan))
    return np.concatenate(fitted) if fitted else np.zeros((0, count))


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def rank_models(
    outcomes: Outcomes,
    *,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = BOOTSTRAP_SEED,
    prior: float = PRIOR_PRECISION,
) -> list[Ranked]:
    """The models best first, each with its score, 95% interval (None without rounds) and
    its counts of wins, losses and ties."""
    if not outcomes.models:
        return []
    theta = fit_strengths(outcomes.wins, outcomes.ties, prior=prior)
    scores = to_elo(theta)
    low: list[float | None] = [None] * len(outcomes.models)
    high: list[float | None] = [None] * len(outcomes.models)
    if rounds > 0 and outcomes.comparisons > 0:
        resampled = to_elo(
            bootstrap_strengths(outcomes, rounds=rounds, seed=seed, prior=prior, start=theta)
        )
        tail = 100 * (1 - CONFIDENCE) / 2
        bounds = np.nanpercentile(resampled, [tail, 100 - tail], axis=0)
        low, high = [_finite(v) for v in bounds[0]], [_finite(v) for v in bounds[1]]
    wins = outcomes.wins.sum(axis=1)
    losses = outcomes.wins.sum(axis=0)
    ties = outcomes.ties.sum(axis=1)
    ranked = [
        Ranked(
            model=model,
            score=float(scores[i]),
            low=low[i],
            high=high[i],
            wins=int(wins[i]),
            losses=int(losses[i]),
            ties=int(ties[i]),
            pairs=int(wins[i] + losses[i] + ties[i]),
        )
        for i, model in enumerate(outcomes.models)
    ]
    return sorted(ranked, key=lambda row: (-row.score, row.model))
