r"""Reading a judge's free-text answer into a verdict, tolerantly but never by guessing.

Accepted, in this order: a JSON object with a ``better`` key (alone, in a code fence or with
text around it; the last such object wins); a bracketed verdict (``[[1]]``, ``[[2]]``,
``[[A]]``, ``[[B]]``, ``[[C]]`` or ``[[tie]]``) when exactly one distinct one appears; an
answer that is nothing but a verdict (``2``, ``Response 1``, ``Response B is better.``).
Anything else is unparseable. A and B name the responses in the order shown. In the ``mmrb2``
answer format, ``{"better_response": "Response 1", "score": 1..6}`` is read first, the score
giving the confidence. In the ``omni`` and ``omni-ties`` formats Omni-RewardBench's verdicts
are read first, as its released ``parse_judgement`` reads them: ``[[A]]``, ``[[B]]``,
``\boxed{A}``, ``\boxed{B}``, ``[[C]]``, ``\boxed{C}`` (tie), the first of these found winning,
and an answer holding both ``[[A]]`` and ``[[B]]`` (or both boxed) unparseable; a tie counts
only in ``omni-ties``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from judges.backends.base import Preference
from judges.prompts import OMNI_FORMAT, OMNI_FORMATS

# Verdict tokens as judges write them, in shown terms.
_TOKENS: dict[str, Preference] = {
    "1": "first",
    "2": "second",
    "a": "first",
    "b": "second",
    "first": "first",
    "second": "second",
    "response 1": "first",
    "response 2": "second",
    "response a": "first",
    "response b": "second",
    "response_1": "first",
    "response_2": "second",
    "tie": "tie",
    "c": "tie",
    "equal": "tie",
    "draw": "tie",
}
_ANSWER_KEYS = ("better", "winner", "preferred", "verdict", "choice", "answer")
_BRACKETS = re.compile(r"\[\[\s*(1|2|a|b|c|tie)\s*\]\]", re.IGNORECASE)
_STRICT = re.compile(
    r"^(?:the\s+)?(?:response\s*)?(1|2|a|b|tie)(?:\s+is\s+better)?$", re.IGNORECASE
)


@dataclass(frozen=True)
class ParsedVerdict:
    preferred: Preference
    confidence: float | None = None
    reasoning: str = ""


class UnparseableAnswer(ValueError):
    """The answer holds no verdict that the rules above can read."""


def parse_verdict(text: str, *, allow_tie: bool, answer_format: str = "arbiter") -> ParsedVerdict:
    """The verdict in ``text``; raises ``UnparseableAnswer`` saying why when there is none.
    With ``answer_format="mmrb2"`` a JSON answer's ``better_response`` and 1-6 ``score`` are
    read first; the score becomes the confidence."""
    if not text or not text.strip():
        raise UnparseableAnswer("empty answer")
    verdict = None
    if answer_format == "mmrb2":
        verdict = _from_mmrb2(text)
    elif answer_format in OMNI_FORMATS:
        verdict = _from_omni(text)
        # the prompt without ties never offered one, whatever the project's scale
        allow_tie = allow_tie and answer_format != OMNI_FORMAT
    verdict = verdict or _from_json(text) or _from_brackets(text) or _from_strict_text(text)
    if verdict is None:
        raise UnparseableAnswer("no verdict found")
    if verdict.preferred == "tie" and not allow_tie:
        raise UnparseableAnswer("answered tie, which was not offered")
    return verdict


def _json_objects(text: str):
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            yield value
        index = text.find("{", end)


def _from_json(text: str) -> ParsedVerdict | None:
    found = None
    for obj in _json_objects(text):
        key = next((k for k in obj if k.lower() in _ANSWER_KEYS), None)
        if key is None:
            continue
        preferred = _token(obj[key])
        if preferred is None:
            raise UnparseableAnswer(f"unknown value {str(obj[key])[:40]!r} for {key!r}")
        reasoning = next(
            (str(v) for k, v in obj.items() if k.lower() in ("reasoning", "reason", "rationale")),
            "",
        )
        found = ParsedVerdict(preferred, _confidence(obj.get("confidence")), reasoning)
    return found


# MMRB2's 1-6 score, in the order shown: 6 = Response 1 much better ... 1 = Response 2 much
# better; 4 and 3 lean only slightly. Its strength becomes a confidence: 0.6, 0.8 or 1.0.
MMRB2_SCORES = range(1, 7)


def mmrb2_confidence(score: int) -> float:
    return round(0.5 + abs(score - 3.5) / 5, 6)


def _from_mmrb2(text: str) -> ParsedVerdict | None:
    """The last JSON object with ``better_response`` or ``score``: the side, checked against
    the score's side, and the score as confidence."""
    found = None
    for obj in _json_objects(text):
        keys = {k.lower(): k for k in obj}
        if "better_response" not in keys and "score" not in keys:
            continue
        preferred = None
        if "better_response" in keys:
            value = obj[keys["better_response"]]
            preferred = _token(value)
            if preferred is None or preferred == "tie":
                raise UnparseableAnswer(f"unknown value {str(value)[:40]!r} for 'better_response'")
        confidence = None
        if "score" in keys:
            score = _score(obj[keys["score"]])
            if score is None:
                raise UnparseableAnswer(
                    f"score {str(obj[keys['score']])[:20]!r} is not a whole number from 1 to 6"
                )
            leans: Preference = "first" if score >= 4 else "second"
            if preferred is not None and preferred != leans:
                raise UnparseableAnswer(
                    f"better_response names Response {1 if preferred == 'first' else 2} but "
                    f"score {score} favours Response {1 if leans == 'first' else 2}"
                )
            preferred, confidence = leans, mmrb2_confidence(score)
        reasoning = next(
            (str(v) for k, v in obj.items() if k.lower() in ("reasoning", "reason", "rationale")),
            "",
        )
        found = ParsedVerdict(preferred, confidence, reasoning) if preferred else None
    return found


def _score(value) -> int | None:
    if isinstance(value, str):
        value = value.strip()
        if not value.isdigit():
            return None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        return None
    return int(value) if int(value) in MMRB2_SCORES else None


# Omni-RewardBench's verdict tokens in the order its parse_judgement tries them
# (utils/video_utils.py in HongbangYuan/OmniReward); A is the response shown first.
_OMNI_VERDICTS: tuple[tuple[str, Preference], ...] = (
    ("[[A]]", "first"),
    ("[[B]]", "second"),
    ("\\boxed{A}", "first"),
    ("\\boxed{B}", "second"),
    ("[[C]]", "tie"),
    ("\\boxed{C}", "tie"),
)


def _from_omni(text: str) -> ParsedVerdict | None:
    for first, second in (("[[A]]", "[[B]]"), ("\\boxed{A}", "\\boxed{B}")):
        if first in text and second in text:
            raise UnparseableAnswer(f"contradictory verdicts {first} and {second}")
    for token, preferred in _OMNI_VERDICTS:
        if token in text:
            return ParsedVerdict(preferred, reasoning=text.strip())
    return None


def _from_brackets(text: str) -> ParsedVerdict | None:
    verdicts = {_TOKENS[match.lower()] for match in _BRACKETS.findall(text)}
    if len(verdicts) > 1:
        raise UnparseableAnswer("contradictory bracketed verdicts")
    return ParsedVerdict(verdicts.pop(), reasoning=text.strip()) if verdicts else None


def _from_strict_text(text: str) -> ParsedVerdict | None:
    bare = text.strip().strip("\"'`*").rstrip(".").strip()
    match = _STRICT.match(bare)
    return ParsedVerdict(_TOKENS[match.group(1).lower()]) if match else None


def _token(value) -> Preference | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value in (1, 2):
        return "first" if value == 1 else "second"
    if isinstance(value, str):
        return _TOKENS.get(re.sub(r"\s+", " ", value.strip().strip(".").lower()))
    return None


def _confidence(value) -> float | None:
    """A confidence in [0, 1]; percentages (0-100, or "85%") are scaled; anything else is None."""
    if isinstance(value, str):
        value = value.strip()
        percent = value.endswith("%")
        try:
            value = float(value.rstrip("%"))
        except ValueError:
            return None
        if percent:
            value /= 100
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    if 1 < value <= 100:
        value /= 100
    return float(value) if 0 <= value <= 1 else None
