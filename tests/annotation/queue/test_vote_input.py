"""The vote's own input check (``annotation.queue.api.vote_input``) against the serializer it
stands in for: on every input it accepts it gives what ``VoteApi.InputSerializer`` validates
it to; everything else it leaves to the serializer, whose answer (and errors) the client gets."""

from __future__ import annotations

import itertools
import random

import pytest

from annotation.core.limits import MAX_RATIONALE_CHARS, MAX_TIME_ON_TASK_MS
from annotation.queue.api import VoteApi, vote_input

# Values each field may be sent as, the plain ones and the odd ones.
CHOICES = ["left", "right", "tie", " left ", "", "   ", "le\x00ft", "\ud800", 1, True, None, []]
VALUES = [1, 6, 0, -1, 2**63, -(2**63), 2**63 - 1, True, False, 3.0, "3", None, 1.5]
RATIONALES = [
    "",
    "clearer",
    "  padded  ",
    "x" * MAX_RATIONALE_CHARS,
    "x" * (MAX_RATIONALE_CHARS + 1),
    " " + "x" * MAX_RATIONALE_CHARS + " ",
    "naïve 日本語",
    "a\x00b",
    "lone \udc80",
    None,
    5,
    ["a"],
]
TIMES = [0, 1500, MAX_TIME_ON_TASK_MS, MAX_TIME_ON_TASK_MS + 1, -1, None, True, "1500", 1.0]
NEXTS = [True, False, "true", 1, 0, None, "yes"]
ABSENT = object()


def serializer_answer(data) -> dict | None:
    serializer = VoteApi.InputSerializer(data=data)
    return dict(serializer.validated_data) if serializer.is_valid() else None


def bodies():
    """Every field alone and in pairs with the others, each absent or each of its values."""
    fields = {
        "choice": CHOICES,
        "value": VALUES,
        "rationale": RATIONALES,
        "time_on_task_ms": TIMES,
        "next": NEXTS,
    }
    names = list(fields)
    for first, second in itertools.combinations(names, 2):
        for one, two in itertools.product([ABSENT, *fields[first]], [ABSENT, *fields[second]]):
            body = {}
            if one is not ABSENT:
                body[first] = one
            if two is not ABSENT:
                body[second] = two
            yield body
    chooser = random.Random(19)
    for _ in range(2000):  # all five at once, each present or not
        body = {}
        for name in names:
            if chooser.random() < 0.7:
                body[name] = chooser.choice(fields[name])
        yield body


def test_the_plain_vote_is_taken_without_the_serializer():
    assert vote_input({"choice": "left"}) == {"choice": "left", "rationale": "", "next": False}
    body = {
        "choice": "tie",
        "rationale": " close call ",
        "time_on_task_ms": 2400,
        "next": True,
    }
    assert vote_input(body) == {
        "choice": "tie",
        "rationale": "close call",
        "time_on_task_ms": 2400,
        "next": True,
    }
    assert vote_input({"value": 4, "time_on_task_ms": None}) == {
        "value": 4,
        "rationale": "",
        "time_on_task_ms": None,
        "next": False,
    }


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"rationale": "no answer"},
        {"choice": "left", "extra": 1},  # the serializer ignores it: its answer, not ours
        {"choice": True},
        {"value": True},
        {"value": "3"},
        {"choice": "left", "next": "true"},
        {"choice": "left", "rationale": "x" * (MAX_RATIONALE_CHARS + 1)},
        {"choice": "left", "time_on_task_ms": -1},
    ],
)
def test_anything_else_is_left_to_the_serializer(body):
    assert vote_input(body) is None
    assert vote_input([body]) is None


def test_every_input_taken_is_what_the_serializer_makes_of_it():
    taken = 0
    for body in bodies():
        ours = vote_input(body)
        if ours is None:
            continue
        taken += 1
        assert ours == serializer_answer(body), body
        assert list(ours) == list(serializer_answer(body)), body  # the same fields, in order
    assert taken > 200  # the plain inputs are taken, not all left to the serializer
