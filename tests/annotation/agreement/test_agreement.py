"""Agreement statistics and consensus rules (docs/agreement.md), checked against the
``krippendorff`` package, published worked examples and cases worked out by hand."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from annotation.agreement import statistics as agreement
from annotation.agreement.statistics import (
    Ratings,
    bootstrap_alpha_ci,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_agreement,
    per_annotator,
    unanimous_share,
)
from annotation.decisions.rules import Consensus, DisputeReason, consensus

RAW_LEVELS = ("nominal", "ordinal", "interval")


def _from_matrix(matrix: list[list[float]], *, scale: str) -> Ratings:
    """Ratings from a reliability matrix (raters x units, NaN where missing)."""
    return Ratings.from_tuples(
        (
            (unit, rater, int(value))
            for rater, row in enumerate(matrix)
            for unit, value in enumerate(row)
            if not np.isnan(value)
        ),
        scale=scale,
    )


def _random_matrix(rng, *, scale: str, raters: int, units: int) -> np.ndarray:
    """Votes that agree somewhat: a latent side per unit plus noise, 30% left missing."""
    values = np.array(agreement.SCALE_VALUES[scale])
    latent = rng.integers(0, len(values), size=units)
    noise = rng.integers(-1, 2, size=(raters, units))
    matrix = values[np.clip(latent + noise, 0, len(values) - 1)].astype(float)
    matrix[rng.random((raters, units)) < 0.3] = np.nan
    return matrix


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 coders,
# 12 units, values 1-5, missing values as NaN; unit 12 has a single value and does not pair.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
    [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
]


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_alpha_reproduces_krippendorffs_worked_example(level, published):
    ratings = _from_matrix(KRIPPENDORFF_2011, scale="likert6")
    assert krippendorff_alpha(ratings, level) == pytest.approx(published, abs=5e-4)


@pytest.mark.parametrize("scale", ["binary", "ternary", "likert6"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_alpha_equals_the_package_on_its_reliability_data_form(scale, seed):
    matrix = _random_matrix(np.random.default_rng(seed), scale=scale, raters=7, units=60)
    ratings = _from_matrix(matrix.tolist(), scale=scale)
    domain = agreement.SCALE_VALUES[scale]
    for level in RAW_LEVELS:
        expected = krippendorff.alpha(
            reliability_data=matrix, value_domain=domain, level_of_measurement=level
        )
        assert krippendorff_alpha(ratings, level) == pytest.approx(expected, rel=1e-12)
    # `side`: nominal alpha on the side each vote leans to (likert6 4-6 A, 1-3 B; others
    # 3 A, 2 tie, 1 B), coded here as 0 = B, 1 = tie, 2 = A; index 0 of the table is missing.
    side_of_value = {
        "binary": [np.nan, 0, np.nan, 2],
        "ternary": [np.nan, 0, 1, 2],
        "likert6": [np.nan, 0, 0, 0, 2, 2, 2],
    }[scale]
    side_matrix = np.array(side_of_value)[np.nan_to_num(matrix).astype(int)]
    expected = krippendorff.alpha(reliability_data=side_matrix, level_of_measurement="nominal")
    assert krippendorff_alpha(ratings, "side") == pytest.approx(expected, rel=1e-12)


def test_alpha_is_the_same_from_arrays_and_from_tuples():
    matrix = _random_matrix(np.random.default_rng(4), scale="likert6", raters=5, units=40)
    raters, units = np.nonzero(~np.isnan(matrix))
    from_arrays = Ratings.from_arrays(
        scale="likert6",
        units=units * 10,  # pair primary keys need not be dense
        raters=raters,
        values=matrix[raters, units].astype(int),
    )
    from_tuples = _from_matrix(matrix.tolist(), scale="likert6")
    for level in (*RAW_LEVELS, "side"):
        assert krippendorff_alpha(from_arrays, level) == pytest.approx(
            krippendorff_alpha(from_tuples, level), rel=1e-12
        )


def test_alpha_is_undefined_without_two_votes_on_a_pair_or_without_variation():
    single_votes = Ratings.from_tuples([("p1", "alice", 3), ("p2", "bob", 1)], scale="ternary")
    all_alike = Ratings.from_tuples(
        [("p1", "alice", 3), ("p1", "bob", 3), ("p2", "alice", 3), ("p2", "bob", 3)],
        scale="ternary",
    )
    for ratings in (single_votes, all_alike):
        assert krippendorff_alpha(ratings, "nominal") is None
        assert bootstrap_alpha_ci(ratings, "nominal") is None


def test_alpha_refuses_an_unknown_level():
    ratings = _from_matrix(KRIPPENDORFF_2011, scale="likert6")
    with pytest.raises(
        ValueError, match=r"^level: must be one of nominal, ordinal, interval, side"
    ):
        krippendorff_alpha(ratings, "ratio")


def test_bootstrap_formula_is_the_packages():
    # The bootstrap recomputes alpha from summed coincidences; at the observed data it must
    # give the package's value at every level.
    ratings = _from_matrix(KRIPPENDORFF_2011, scale="likert6")
    observed = agreement._coincidences(ratings.value_counts).sum(axis=0)
    domain = np.array(agreement.SCALE_VALUES["likert6"])
    for level in RAW_LEVELS:
        alpha = agreement._alpha_from_coincidences(observed, domain, level)
        assert alpha == pytest.approx(krippendorff_alpha(ratings, level), rel=1e-12)


def test_bootstrap_is_reproducible_with_a_seed_and_differs_with_another():
    matrix = _random_matrix(np.random.default_rng(5), scale="likert6", raters=4, units=80)
    ratings = _from_matrix(matrix.tolist(), scale="likert6")
    for level in (*RAW_LEVELS, "side"):
        first = bootstrap_alpha_ci(ratings, level, resamples=300, seed=11)
        assert first == bootstrap_alpha_ci(ratings, level, resamples=300, seed=11)
        assert first != bootstrap_alpha_ci(ratings, level, resamples=300, seed=12)
        low, high = first
        assert low < krippendorff_alpha(ratings, level) < high


def test_bootstrap_of_identical_pairs_is_a_single_point():
    # Every pair has votes A, A, B: every resample is the data itself. By hand, for N pairs:
    # o(A,A) = N, o(A,B) = o(B,A) = N; n_A = 2N, n_B = N, n = 3N; expected disagreement
    # e(A,B) + e(B,A) = 2 * 2N * N / (3N - 1); alpha = 1 - 2N (3N - 1) / 4N^2 = 1 - (3N - 1) / 2N.
    # N = 10: 1 - 29/20 = -0.45.
    rows = [(pair, rater, value) for pair in range(10) for rater, value in enumerate((3, 3, 1))]
    ratings = Ratings.from_tuples(rows, scale="ternary")
    assert krippendorff_alpha(ratings, "nominal") == pytest.approx(-0.45)
    low, high = bootstrap_alpha_ci(ratings, "nominal", resamples=50, seed=0)
    assert low == pytest.approx(-0.45)
    assert high == pytest.approx(-0.45)


def test_bootstrap_matches_resampling_pair_indices_with_the_package():
    # Drawing how often each distinct row occurs is the same bootstrap as drawing pair
    # indices: compare with the plain method, the package on each resample of rows.
    matrix = _random_matrix(np.random.default_rng(6), scale="likert6", raters=3, units=90)
    ratings = _from_matrix(matrix.tolist(), scale="likert6")
    counts = ratings.value_counts
    rng = np.random.default_rng(99)
    plain = [
        krippendorff.alpha(
            value_counts=counts[rng.integers(0, len(counts), len(counts))],
            value_domain=agreement.SCALE_VALUES["likert6"],
            level_of_measurement="ordinal",
        )
        for _ in range(2000)
    ]
    expected = np.quantile(plain, [0.025, 0.975])
    low, high = bootstrap_alpha_ci(ratings, "ordinal", resamples=4000, seed=0)
    assert low == pytest.approx(expected[0], abs=0.01)
    assert high == pytest.approx(expected[1], abs=0.01)


def test_bootstrap_refuses_fewer_than_one_resample():
    ratings = _from_matrix(KRIPPENDORFF_2011, scale="likert6")
    with pytest.raises(ValueError, match=r"^resamples: must be at least 1"):
        bootstrap_alpha_ci(ratings, "nominal", resamples=0)


def _pairs(scale: str, *pairs: tuple[int, ...]) -> Ratings:
    """Ratings with one row of values per pair, raters r0, r1, ... in order."""
    return Ratings.from_tuples(
        [
            (pair, f"r{rater}", value)
            for pair, values in enumerate(pairs)
            for rater, value in enumerate(values)
        ],
        scale=scale,
    )


def test_pairwise_agreement_leaves_out_unsure_likert6_votes():
    ratings = _pairs("likert6", (6, 5, 1), (4, 5, 6), (3, 4, 2))
    # (6, 5, 1): sure A, A, B: 3 pairs of votes, 1 agrees (6-5).
    # (4, 5, 6): 4 is unsure; A, A: 1 pair, agrees.
    # (3, 4, 2): 3 and 4 unsure; one sure vote: no pair.
    # 2 agreeing of 4 pairs.
    assert pairwise_agreement(ratings) == pytest.approx(0.5)


def test_pairwise_agreement_leaves_out_ternary_ties():
    ratings = _pairs("ternary", (3, 3, 2), (3, 1, 2))
    # (A, A, tie): 1 pair, agrees. (A, B, tie): 1 pair, disagrees. 1 of 2.
    assert pairwise_agreement(ratings) == pytest.approx(0.5)


def test_pairwise_agreement_on_binary_counts_every_vote():
    ratings = _pairs("binary", (3, 3, 1), (1, 1, 1))
    # (A, A, B): 1 of 3 pairs agree; (B, B, B): 3 of 3. 4 of 6.
    assert pairwise_agreement(ratings) == pytest.approx(4 / 6)


def test_pairwise_agreement_is_undefined_when_every_vote_is_unsure():
    assert pairwise_agreement(_pairs("likert6", (3, 4, 4), (4, 5))) is None


def test_unanimous_share_counts_pairs_whose_votes_lean_one_way():
    ratings = _pairs("likert6", (4, 5, 6), (3, 4, 4), (1, 2), (6,))
    # (4, 5, 6) all A: unanimous. (3, 4, 4): B, A, A: not. (1, 2): B, B: unanimous.
    # (6,): a single vote, not counted. 2 of 3.
    assert unanimous_share(ratings) == pytest.approx(2 / 3)
    assert unanimous_share(_pairs("ternary", (2, 2, 2), (3, 2))) == pytest.approx(1 / 2)
    assert unanimous_share(_pairs("ternary", (3,))) is None


def test_fleiss_kappa_by_hand():
    ratings = _pairs("ternary", (3, 3, 3), (3, 3, 1), (1, 1, 2), (3, 1, 2))
    # Counts per pair (B, tie, A) and P_i = (sum n_ij^2 - n) / (n (n - 1)), n = 3:
    #   (0, 0, 3): (9 - 3) / 6 = 1;  (1, 0, 2): (5 - 3) / 6 = 1/3
    #   (2, 1, 0): (5 - 3) / 6 = 1/3;  (1, 1, 1): (3 - 3) / 6 = 0
    # P = (1 + 1/3 + 1/3 + 0) / 4 = 5/12.
    # Shares: B 4/12, tie 2/12, A 6/12; P_e = 1/9 + 1/36 + 1/4 = 7/18.
    # kappa = (5/12 - 7/18) / (1 - 7/18) = (1/36) / (22/36) = 1/22.
    assert fleiss_kappa(ratings) == pytest.approx(1 / 22)


def test_fleiss_kappa_needs_the_same_number_of_votes_on_every_pair():
    assert fleiss_kappa(_pairs("ternary", (3, 3, 3), (3, 1))) is None
    assert fleiss_kappa(_pairs("ternary", (3,), (1,))) is None
    assert fleiss_kappa(_pairs("ternary", (3, 3), (3, 3))) is None  # chance agreement is 1


def test_cohen_kappa_textbook_example():
    # Wikipedia, "Cohen's kappa", first example: 50 grant proposals, yes/yes 20, yes/no 5,
    # no/yes 10, no/no 15: p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    a = {unit: first for unit, (first, _) in enumerate(pairs)}
    b = {unit: second for unit, (_, second) in enumerate(pairs)}
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_kappa_by_hand_over_shared_units_only():
    a = {1: "A", 2: "A", 3: "B", 4: "tie", 5: "A"}
    b = {1: "A", 2: "B", 3: "B", 4: "tie", 6: "B"}
    # Shared: 1-4. Agree on 1, 3, 4: p_o = 3/4.
    # a: A 2, B 1, tie 1; b: A 1, B 2, tie 1: p_e = (2*1 + 1*2 + 1*1) / 16 = 5/16.
    # kappa = (3/4 - 5/16) / (1 - 5/16) = (7/16) / (11/16) = 7/11.
    assert cohen_kappa(a, b) == pytest.approx(7 / 11)
    assert cohen_kappa({1: "A"}, {2: "A"}) is None
    assert cohen_kappa({1: "A", 2: "A"}, {1: "A", 2: "A"}) is None  # chance agreement is 1


def _team() -> Ratings:
    """alice and bob rate pairs u0..u19, carol u0..u18 (ternary, 3 = A, 1 = B).
    alice: A on u0..u11, B on u12..u19.
    bob:   A on u0..u9, B on u10..u17, A on u18, u19.
    carol: A on u0..u9, B on u10..u18."""
    alice = {f"u{i}": 3 if i < 12 else 1 for i in range(20)}
    bob = {f"u{i}": 3 if i < 10 or i >= 18 else 1 for i in range(20)}
    carol = {f"u{i}": 3 if i < 10 else 1 for i in range(19)}
    times = {("alice", "u0"): 1000, ("alice", "u1"): 3000, ("alice", "u2"): 2000}
    times |= {("bob", f"u{i}"): ms for i, ms in enumerate((1000, 10000, 2000, 3000))}
    rows = [
        (pair, name, value)
        for name, votes in [("alice", alice), ("bob", bob), ("carol", carol)]
        for pair, value in votes.items()
    ]
    return Ratings.from_tuples(
        rows, scale="ternary", time_on_task_ms=[times.get((name, pair)) for pair, name, _ in rows]
    )


def test_per_annotator_by_hand():
    stats = {
        row.rater: row for row in per_annotator(_team(), gold={"u0": "A", "u10": "B", "x": "A"})
    }
    assert {name: row.votes for name, row in stats.items()} == {"alice": 20, "bob": 20, "carol": 19}
    # Medians: alice 1, 2, 3 s -> 2 s; bob 1, 2, 3, 10 s -> 2.5 s; carol has no times.
    assert stats["alice"].median_seconds == 2.0
    assert stats["bob"].median_seconds == 2.5
    assert stats["carol"].median_seconds is None
    # Leave-one-out, strict majority of the other votes on the pair:
    # alice: u0-9 others A, A (agrees, 10); u10-11 B, B (disagrees, 2); u12-17 B, B
    #   (agrees, 6); u18 A, B (no consensus); u19 bob A alone (disagrees, 1): 16 of 19.
    # bob: u0-9 A, A (10 agree); u10-11 A, B (none); u12-17 B, B (6 agree); u18 B, B
    #   (disagrees); u19 alice B (disagrees): 16 of 18.
    # carol: u0-9 A, A (10); u10-11 A, B (none); u12-17 B, B (6); u18 B, A (none): 16 of 16.
    assert (stats["alice"].consensus_agreement, stats["alice"].consensus_votes) == (16 / 19, 19)
    assert (stats["bob"].consensus_agreement, stats["bob"].consensus_votes) == (16 / 18, 18)
    assert (stats["carol"].consensus_agreement, stats["carol"].consensus_votes) == (1.0, 16)
    # alice x bob share 20 pairs: A/A 10, A/B 2, B/B 6, B/A 2: p_o = 0.8; marginals 12/8
    # each: p_e = (144 + 64) / 400 = 0.52; kappa = 0.28 / 0.48 = 7/12. carol shares 19 with
    # each: fewer than MIN_SHARED_PAIRS_FOR_KAPPA, so no kappa.
    assert stats["alice"].kappa == {"bob": pytest.approx(7 / 12)}
    assert stats["bob"].kappa == {"alice": pytest.approx(7 / 12)}
    assert stats["carol"].kappa == {}
    # Gold: u0 A, u10 B (x has no votes). alice votes A, A: 1 of 2; bob A, B; carol A, B.
    assert [(stats[n].gold_votes, stats[n].gold_accuracy) for n in ("alice", "bob", "carol")] == [
        (2, 0.5),
        (2, 1.0),
        (2, 1.0),
    ]


def test_per_annotator_kappa_is_cohens_on_sides():
    ratings = _team()
    by_rater = {}
    for unit, rater, side in zip(ratings.units, ratings.raters, ratings.sides, strict=True):
        by_rater.setdefault(ratings.rater_keys[rater], {})[unit] = side
    stats = {row.rater: row for row in per_annotator(ratings)}
    assert stats["alice"].kappa["bob"] == pytest.approx(
        cohen_kappa(by_rater["alice"], by_rater["bob"])
    )
    assert stats["alice"].gold_accuracy is None
    assert stats["alice"].gold_votes == 0


def test_per_annotator_refuses_a_gold_label_that_is_not_a_side():
    with pytest.raises(ValueError, match=r"^gold\['u0'\]: must be one of B, tie, A"):
        per_annotator(_team(), gold={"u0": "left"})


def test_ratings_name_the_row_of_a_value_off_the_scale():
    with pytest.raises(
        ValueError, match=r"^value: 2 in row 1 is not on the binary scale \(allowed: 1, 3\)"
    ):
        Ratings.from_tuples([("p", "alice", 3), ("p", "bob", 2)], scale="binary")
    with pytest.raises(ValueError, match=r"^value: 7 in row 0 is not on the likert6 scale"):
        Ratings.from_arrays(
            scale="likert6", units=np.array([1]), raters=np.array([1]), values=np.array([7])
        )
    for value in (True, 2.0, "2", None):
        with pytest.raises(ValueError, match=r"^value: "):
            Ratings.from_tuples([("p", "alice", value)], scale="ternary")


def test_ratings_refuse_two_votes_of_one_rater_on_a_pair():
    rows = [("p1", "alice", 3), ("p2", "alice", 1), ("p1", "bob", 1), ("p1", "alice", 1)]
    with pytest.raises(ValueError, match=r"^rater: 'alice' rated pair 'p1' twice \(rows 0 and 3\)"):
        Ratings.from_tuples(rows, scale="ternary")


def test_ratings_refuse_bad_shapes_scales_and_times():
    with pytest.raises(ValueError, match=r"^scale: must be one of binary, ternary, likert6"):
        Ratings.from_tuples([("p", "alice", 1)], scale="stars")
    with pytest.raises(ValueError, match=r"^units, raters, values: must have the same length"):
        Ratings.from_arrays(
            scale="ternary", units=np.array([1, 2]), raters=np.array([1]), values=np.array([1])
        )
    with pytest.raises(ValueError, match=r"^time_on_task_ms: must have one entry per vote"):
        Ratings.from_tuples([("p", "alice", 1)], scale="ternary", time_on_task_ms=[])
    with pytest.raises(ValueError, match=r"^time_on_task_ms: negative in row 0"):
        Ratings.from_tuples([("p", "alice", 1)], scale="ternary", time_on_task_ms=[-5])


def test_prior_annotations_join_as_raters_of_their_own():
    ratings = Ratings.from_tuples(
        [(7, 42, 6), (7, ("prior", 0), 5), (8, 42, 1), (8, ("prior", 0), 2), (8, ("prior", 1), 1)],
        scale="likert6",
    )
    assert set(ratings.rater_keys) == {42, ("prior", 0), ("prior", 1)}
    assert unanimous_share(ratings) == 1.0


# Consensus: values are canonical (ternary 3 = A, 2 = tie, 1 = B; likert6 4-6 lean A).
@pytest.mark.parametrize(
    ("scale", "values", "min_agree", "expected"),
    [
        ("ternary", (3, 3, 1), 2, Consensus("A")),  # A has 2 of 3
        ("ternary", (2, 2, 3), 2, Consensus("tie")),  # ties are a side: 2 of 3 say tie
        ("ternary", (3, 2, 1), 2, Consensus("", DisputeReason.NO_MAJORITY)),  # 1 each
        ("ternary", (3, 3, 1), 3, Consensus("", DisputeReason.NO_MAJORITY)),  # A has 2 < 3
        ("ternary", (3, 3, 1, 1), 2, Consensus("", DisputeReason.SPLIT)),  # A 2 and B 2
        ("binary", (1, 1, 3), 2, Consensus("B")),
        ("binary", (1, 3), 2, Consensus("", DisputeReason.NO_MAJORITY)),
        ("binary", (3,), 1, Consensus("A")),
        ("binary", (3, 1), 1, Consensus("", DisputeReason.SPLIT)),  # both reach 1
        ("likert6", (4, 3, 3), 2, Consensus("B")),  # sides A, B, B: unsure votes still lean
        ("likert6", (6, 5, 1), 2, Consensus("A")),
    ],
)
def test_majority_rule(scale, values, min_agree, expected):
    assert consensus(values, scale=scale, rule="majority", min_agree=min_agree) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((6, 5, 6), Consensus("A")),  # spread 1, mean 5.67, no unsure votes; A 3 of 3
        ((4, 5, 6), Consensus("A")),  # spread 2, mean 5, one unsure (4); A 3 of 3
        ((1, 2, 3), Consensus("B")),  # spread 2, mean 2, one unsure (3); B 3 of 3
        ((6, 1, 5), Consensus("", DisputeReason.SPREAD)),  # max - min = 5 > 4
        ((1, 2, 6), Consensus("", DisputeReason.SPREAD)),  # spread wins over the mean of 3
        ((5, 5, 1), Consensus("", DisputeReason.AMBIGUOUS_MEAN)),  # spread 4; mean 3.67
        ((2, 2, 5), Consensus("", DisputeReason.AMBIGUOUS_MEAN)),  # mean exactly 3
        ((2, 5, 5), Consensus("", DisputeReason.AMBIGUOUS_MEAN)),  # mean exactly 4
        ((4, 4, 6), Consensus("", DisputeReason.MAJORITY_UNSURE)),  # mean 4.67; 2 of 3 unsure
        ((3, 3, 1), Consensus("", DisputeReason.MAJORITY_UNSURE)),  # mean 2.33; 2 of 3 unsure
        ((1, 1, 4, 5), Consensus("", DisputeReason.NO_MAJORITY)),  # mean 2.75; B 2, A 2
        ((1, 1, 2, 6), Consensus("", DisputeReason.SPREAD)),
        ((1, 2, 2, 5), Consensus("B")),  # spread 4, mean 2.5, 0 unsure; B 3 of 4
    ],
)
def test_mmrb2_rule(values, expected):
    assert consensus(values, scale="likert6", rule="mmrb2", min_agree=2) == expected


@pytest.mark.parametrize(
    ("scale", "values", "expected"),
    [
        ("ternary", (2, 2, 2), Consensus("tie")),
        ("ternary", (3, 3, 2), Consensus("", DisputeReason.NOT_UNANIMOUS)),
        ("likert6", (4, 5, 6), Consensus("A")),  # all lean A, one of them unsure
        ("likert6", (4, 3), Consensus("", DisputeReason.NOT_UNANIMOUS)),
        ("binary", (1, 1, 1), Consensus("B")),
    ],
)
def test_unanimous_rule(scale, values, expected):
    assert consensus(values, scale=scale, rule="unanimous", min_agree=2) == expected


def test_a_consensus_is_disputed_exactly_when_it_has_no_label():
    assert consensus((3, 3, 1), scale="ternary", rule="majority", min_agree=2).disputed is False
    assert consensus((3, 2, 1), scale="ternary", rule="majority", min_agree=2).disputed is True


@pytest.mark.parametrize(
    ("values", "scale", "rule", "min_agree", "message"),
    [
        ((), "ternary", "majority", 2, "^values: a consensus needs at least one vote"),
        ((3, 7), "ternary", "majority", 2, "^values: 7 is not on the ternary scale"),
        ((2,), "binary", "majority", 2, "^values: 2 is not on the binary scale"),
        ((3,), "ternary", "majority", 0, "^min_agree: must be at least 1"),
        ((3,), "ternary", "plurality", 2, "^rule: must be one of majority, mmrb2, unanimous"),
        ((3,), "ternary", "mmrb2", 2, "^rule: mmrb2 needs the likert6 scale"),
        ((3,), "stars", "majority", 2, "^scale: must be one of"),
    ],
)
def test_consensus_refuses_bad_input_naming_the_field(values, scale, rule, min_agree, message):
    with pytest.raises(ValueError, match=message):
        consensus(values, scale=scale, rule=rule, min_agree=min_agree)
