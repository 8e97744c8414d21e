"""Bradley-Terry strengths (annotation/leaderboard/bradley_terry.py, docs/leaderboard.md):
worked cases by hand, an independent logistic-regression fit, and simulated models whose
true strengths the fit must recover."""

from __future__ import annotations

import math

import numpy as np
import pytest

from annotation.leaderboard.bradley_terry import (
    ELO_PER_LOG_ODDS,
    Outcomes,
    bootstrap_strengths,
    fit_strengths,
    rank_models,
)


def outcomes(counts: dict[tuple[str, str, str], int]) -> Outcomes:
    return Outcomes.from_counts(counts)


def test_two_models_three_wins_to_one():
    # The likelihood 3 log s(d) + log s(-d) peaks where s(d) = 3/4: d = ln 3, split about the mean.
    board = rank_models(outcomes({("x", "y", "A"): 3, ("x", "y", "B"): 1}), rounds=0, prior=0.0)
    assert [row.model for row in board] == ["x", "y"]
    assert board[0].score == pytest.approx(1000 + ELO_PER_LOG_ODDS * math.log(3) / 2, abs=1e-6)
    assert board[1].score == pytest.approx(1000 - ELO_PER_LOG_ODDS * math.log(3) / 2, abs=1e-6)
    assert (board[0].wins, board[0].losses, board[0].ties, board[0].pairs) == (3, 1, 0, 4)
    assert (board[0].low, board[0].high) == (None, None)


def test_a_tie_is_half_a_win_each():
    # 1 win, 1 loss and 2 ties: 2 scored wins each, equal strengths.
    counts = {("x", "y", "A"): 1, ("x", "y", "B"): 1, ("x", "y", "tie"): 2}
    board = rank_models(outcomes(counts), rounds=0, prior=0.0)
    assert board[0].score == pytest.approx(1000, abs=1e-9)
    assert board[1].score == pytest.approx(1000, abs=1e-9)
    assert board[0].ties == 2
    # 3 wins, 1 loss, 2 ties: scored 4 to 2, so s(d) = 2/3 and d = ln 2.
    counts = {("x", "y", "A"): 3, ("x", "y", "B"): 1, ("x", "y", "tie"): 2}
    theta = fit_strengths(*_matrices(counts), prior=0.0)
    assert theta[0] - theta[1] == pytest.approx(math.log(2), abs=1e-9)


def _matrices(counts):
    table = outcomes(counts)
    return table.wins, table.ties


def _plain_logistic_regression(rows: list[tuple[int, int, float]], count: int) -> np.ndarray:
    """Independent of the module: gradient ascent on the log-likelihood of one row per
    comparison (winner, loser, weight), with theta kept at mean 0, as Chatbot Arena's
    LogisticRegression(fit_intercept=False) fits it."""
    theta = [0.0] * count
    for _ in range(20_000):
        gradient = [0.0] * count
        for winner, loser, weight in rows:
            p = 1 / (1 + math.exp(-(theta[winner] - theta[loser])))
            gradient[winner] += weight * (1 - p)
            gradient[loser] -= weight * (1 - p)
        theta = [t + 0.05 * g for t, g in zip(theta, gradient, strict=True)]
        mean = sum(theta) / count
        theta = [t - mean for t in theta]
    return np.array(theta)


def test_equal_to_a_plain_logistic_regression():
    counts = {
        ("a", "b", "A"): 5,
        ("a", "b", "B"): 2,
        ("a", "b", "tie"): 1,
        ("b", "c", "A"): 4,
        ("b", "c", "B"): 3,
        ("a", "c", "A"): 6,
        ("a", "c", "B"): 1,
        ("c", "d", "A"): 2,
        ("c", "d", "B"): 2,
        ("c", "d", "tie"): 3,
        ("b", "d", "B"): 1,
        ("b", "d", "A"): 3,
    }
    index = {"a": 0, "b": 1, "c": 2, "d": 3}
    rows = []
    for (x, y, label), n in counts.items():
        i, j = index[x], index[y]
        if label == "A":
            rows.append((i, j, float(n)))
        elif label == "B":
            rows.append((j, i, float(n)))
        else:  # a tie: half a win each
            rows += [(i, j, n / 2), (j, i, n / 2)]
    expected = _plain_logistic_regression(rows, 4)
    assert fit_strengths(*_matrices(counts), prior=0.0) == pytest.approx(expected, abs=1e-6)
    # The default weak prior moves these strengths by less than 0.005 log-odds (2 points).
    assert fit_strengths(*_matrices(counts)) == pytest.approx(expected, abs=5e-3)


def test_an_undefeated_model_gets_a_finite_score():
    board = rank_models(outcomes({("x", "y", "A"): 5}), rounds=200)
    assert all(math.isfinite(row.score) for row in board)
    assert board[0].model == "x"
    assert board[0].score > board[1].score


def simulated(strengths: np.ndarray, comparisons: int, seed: int) -> Outcomes:
    rng = np.random.default_rng(seed)
    count = strengths.size
    a = rng.integers(0, count, comparisons)
    b = (a + rng.integers(1, count, comparisons)) % count  # never a model with itself
    p = 1 / (1 + np.exp(-(strengths[a] - strengths[b])))
    # A tie one time in ten, taken evenly from both sides' chances, so that the scored
    # share of A (a tie is half a win) stays p: P(A wins) = p - 0.05.
    u = rng.random(comparisons)
    tie = u < 0.1
    a_wins = ~tie & (u < 0.1 + p - 0.05)
    b_wins = ~tie & ~a_wins
    wins = np.zeros((count, count), dtype=np.int64)
    ties = np.zeros_like(wins)
    np.add.at(wins, (a[a_wins], b[a_wins]), 1)
    np.add.at(wins, (b[b_wins], a[b_wins]), 1)
    np.add.at(ties, (a[tie], b[tie]), 1)
    return Outcomes(models=tuple(f"m{i}" for i in range(count)), wins=wins, ties=ties + ties.T)


def test_recovers_the_order_of_simulated_models_and_the_intervals_cover_them():
    strengths = np.linspace(-1.0, 1.0, 8)
    table = simulated(strengths, 20_000, seed=3)
    board = rank_models(table, rounds=400, seed=5)
    assert [row.model for row in board] == [f"m{i}" for i in reversed(range(8))]
    truth = dict(
        zip(table.models, 1000 + ELO_PER_LOG_ODDS * (strengths - strengths.mean()), strict=True)
    )
    covered = sum(row.low <= truth[row.model] <= row.high for row in board)
    assert covered >= 7
    assert all(row.high - row.low < 60 for row in board)


def test_intervals_are_wide_on_little_data_and_narrow_on_much():
    strengths = np.array([0.0, 0.5, 1.0])
    narrow = rank_models(simulated(strengths, 30_000, seed=1), rounds=300)
    wide = rank_models(simulated(strengths, 300, seed=1), rounds=300)
    assert max(r.high - r.low for r in narrow) * 5 < min(r.high - r.low for r in wide)


def test_the_bootstrap_is_seeded_and_resamples_every_comparison():
    table = simulated(np.array([0.0, 0.3, 0.9, 1.2]), 2_000, seed=2)
    first = bootstrap_strengths(table, rounds=50, seed=7)
    assert np.array_equal(first, bootstrap_strengths(table, rounds=50, seed=7))
    assert not np.array_equal(first, bootstrap_strengths(table, rounds=50, seed=8))
    assert first.shape == (50, 4)


def test_a_model_absent_from_a_resample_is_left_out_of_its_interval():
    # z meets y once: many resamples hold no comparison of z, which must not pull its
    # interval towards the mean.
    table = outcomes({("x", "y", "A"): 200, ("x", "y", "B"): 100, ("z", "y", "A"): 1})
    theta = bootstrap_strengths(table, rounds=300, seed=1)
    absent = np.isnan(theta[:, table.models.index("z")])
    assert 0 < absent.sum() < 300
    assert not np.isnan(theta[:, table.models.index("x")]).any()


def test_a_comparison_of_a_model_with_itself_is_refused():
    with pytest.raises(ValueError, match="itself"):
        outcomes({("x", "x", "A"): 1})


def test_win_rates_count_ties_half():
    rates = outcomes({("x", "y", "A"): 2, ("x", "y", "tie"): 2, ("y", "z", "B"): 1}).win_rates()
    assert rates[0][1] == pytest.approx(0.75)
    assert rates[1][0] == pytest.approx(0.25)
    assert rates[0][2] is None
    assert rates[2][1] == 1.0


def test_the_bootstrap_in_chunks_draws_and_fits_the_same(monkeypatch):
    """Fitted a few rounds at a time (as many models' rounds are, to bound the memory), the
    bootstrap draws the same resamples and gives the same strengths as in one batch."""
    table = simulated(np.array([0.0, 0.4, -0.3, 1.1, 0.2]), 2_000, seed=7)
    whole = bootstrap_strengths(table, rounds=50, seed=3)
    monkeypatch.setattr("annotation.leaderboard.bradley_terry._CHUNK_BYTES", 8 * 25 * 7)
    chunked = bootstrap_strengths(table, rounds=50, seed=3)
    assert chunked.shape == whole.shape == (50, 5)
    assert np.allclose(chunked, whole, atol=1e-7, equal_nan=True)


def test_the_bootstrap_of_many_models_stays_within_its_memory(monkeypatch):
    """Many rounds of many models: in one batch the fit's (rounds, K, K) arrays together
    were several times one of them (2,000 rounds of 30 models: 160 MB); fitted in chunks
    of a 4 MB array, the peak stays near a chunk's arrays, whatever the rounds."""
    import tracemalloc

    monkeypatch.setattr("annotation.leaderboard.bradley_terry._CHUNK_BYTES", 4 * 1024 * 1024)
    table = simulated(np.linspace(-1.0, 1.0, 30), 5_000, seed=2)
    tracemalloc.start()
    try:
        strengths = bootstrap_strengths(table, rounds=2_000, seed=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert strengths.shape == (2_000, 30)
    assert not np.isnan(strengths).any()
    assert peak < 48 * 1024 * 1024, f"{peak / 2**20:.0f} MB"
