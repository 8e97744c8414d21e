"""The heuristic judge (obviously broken responses) and the offline scores judge."""

from __future__ import annotations

import pytest
from django.conf import settings
from PIL import Image

from judges.backends import get_backend
from tests.factories import JudgeFactory
from tests.judges.backend_helpers import image_part, item, noisy_image, store_image, text_part

GOOD = "The capital of Australia is Canberra, chosen as a compromise between Sydney and Melbourne."


@pytest.fixture
def heuristic(db):
    return get_backend(JudgeFactory(name="sanity"))


def judge_one(backend, first, second, **kwargs):
    (result,) = backend.judge_batch([item(first, second, **kwargs)])
    return result


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        ("", "empty response"),
        ("   \n ", "empty response"),
        ("I'm sorry, but I can't help with that request.", "refusal"),
        ("I cannot assist with creating that image.", "refusal"),
        ("As an AI language model, I cannot generate images.", "refusal"),
    ],
)
def test_a_broken_response_loses_in_either_position(heuristic, broken, why):
    first_broken = judge_one(heuristic, broken, GOOD)
    second_broken = judge_one(heuristic, GOOD, broken, order="BA")
    assert (first_broken.outcome, first_broken.preferred) == ("ok", "second")
    assert (second_broken.outcome, second_broken.preferred) == ("ok", "first")
    assert first_broken.confidence >= 0.9
    assert why in first_broken.reasoning
    assert "response 1" in first_broken.reasoning


def test_a_long_answer_with_an_apology_is_not_a_refusal(heuristic):
    answer = "I'm sorry, but I can't help noticing the question is ambiguous. " + GOOD * 10
    assert judge_one(heuristic, answer, GOOD).outcome == "abstain"


def test_blank_and_unreadable_images_lose_to_a_real_one(heuristic):
    real = store_image(noisy_image(64, 64, seed=5))
    blank = store_image(Image.new("RGB", (64, 64), (250, 250, 250)))
    broken = store_image(noisy_image(64, 64, seed=6), "PNG")
    (settings.MEDIA_ROOT / broken.relative_path).write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    for bad, why in ((blank, "blank"), (broken, "unreadable")):
        result = judge_one(
            heuristic, [image_part(bad.sha256)], [image_part(real.sha256)], task="t2i"
        )
        assert (result.outcome, result.preferred) == ("ok", "second")
        assert why in result.reasoning


def test_an_image_task_answered_without_an_image_loses(heuristic):
    real = store_image(noisy_image(64, 64, seed=7))
    result = judge_one(heuristic, [text_part("A cat.")], [image_part(real.sha256)], task="t2i")
    assert (result.outcome, result.preferred) == ("ok", "second")
    # The same text is fine where no image is expected.
    assert judge_one(heuristic, "A cat.", GOOD, task="text").outcome == "abstain"


def test_the_heuristic_abstains_when_it_cannot_tell(heuristic):
    neither = judge_one(heuristic, GOOD, "Canberra.", allow_tie=True)
    both = judge_one(heuristic, "", "I am unable to help with that.", allow_tie=True)
    assert (neither.outcome, neither.preferred) == ("abstain", None)
    assert (both.outcome, both.preferred) == ("abstain", None)
    assert "both broken" in both.reasoning


@pytest.fixture
def scores(db):
    def make(**fields):
        return get_backend(JudgeFactory(kind="scores", **{"name": "offline", **fields}))

    return make


def test_scores_from_metadata_in_both_orders(scores):
    backend = scores()
    metadata = {"scores": {"offline": {"A": 0.7, "B": 0.2}}}
    ab, ba = backend.judge_batch(
        [item(order="AB", metadata=metadata), item(order="BA", metadata=metadata)]
    )
    assert (ab.outcome, ab.preferred, ba.preferred) == ("ok", "first", "second")
    assert ab.confidence == pytest.approx(0.6225, abs=1e-3)  # sigmoid(0.5)


def test_scores_key_option_and_ties(scores):
    backend = scores(options={"scores_key": "gpt-judge"})
    equal = {"scores": {"gpt-judge": {"A": 3, "B": 3}}}
    tie, no_tie = backend.judge_batch(
        [item(metadata=equal, allow_tie=True), item(metadata=equal, allow_tie=False)]
    )
    assert (tie.outcome, tie.preferred) == ("ok", "tie")
    assert no_tie.outcome == "abstain"


def test_per_order_verdicts_from_metadata(scores):
    backend = scores()
    metadata = {"scores": {"offline": {"AB": "B", "BA": {"side": "A", "confidence": 0.6}}}}
    ab, ba = backend.judge_batch(
        [item(order="AB", metadata=metadata), item(order="BA", metadata=metadata)]
    )
    # AB: B is second shown; BA: A is second shown.
    assert (ab.preferred, ab.confidence) == ("second", None)
    assert (ba.preferred, ba.confidence) == ("second", 0.6)
    only_ab = {"scores": {"offline": {"AB": "A"}}}
    (missing_order,) = backend.judge_batch([item(order="BA", metadata=only_ab)])
    assert missing_order.outcome == "abstain"


@pytest.mark.parametrize(
    ("metadata", "outcome", "message"),
    [
        ({}, "abstain", "no metadata.scores.offline"),
        ({"scores": {"someone-else": {"A": 1, "B": 0}}}, "abstain", "no metadata.scores.offline"),
        ({"scores": {"offline": {"A": "high", "B": 0}}}, "error", "offline.A must be a number"),
        ({"scores": {"offline": [0.1, 0.2]}}, "error", "must be an object"),
        ({"scores": {"offline": {"AB": "left"}}}, "error", "offline.AB must be one of A, B, tie"),
    ],
)
def test_missing_scores_abstain_and_malformed_ones_name_the_field(
    scores, metadata, outcome, message
):
    (result,) = scores().judge_batch([item(metadata=metadata)])
    assert result.outcome == outcome
    assert message in (result.reasoning if outcome == "abstain" else result.error)
    assert result.preferred is None
