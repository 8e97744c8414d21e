"""Scores computed offline elsewhere and imported with the pair's metadata.

Accepted shapes, under ``metadata["scores"][KEY]`` where KEY is ``judge.options["scores_key"]``
or else the judge's name (A and B are the imported, canonical responses):

- scores: ``{"A": 0.7, "B": 0.2}``; higher is better, preference sigmoid(s_A - s_B);
- per-order verdicts: ``{"AB": "A", "BA": "tie"}``, or ``{"AB": {"side": "A",
  "confidence": 0.8}, ...}``: the side the offline judge chose when shown A first (AB) and
  B first (BA), in canonical terms.

A pair without its entry (or without the order asked) gets an abstention; a malformed entry
gets an error naming the field.
"""

from __future__ import annotations

import math

from judges.backends.base import JudgeBackend, JudgeItem, JudgeResult

DEFAULT_TIE_MARGIN = 0.0
SIDES = ("A", "B", "tie")


class MalformedScores(ValueError):
    pass


class ScoresBackend(JudgeBackend):
    def __init__(self, judge) -> None:
        super().__init__(judge)
        options = judge.options or {}
        self.key = options.get("scores_key") or judge.name
        self.tie_margin = float(options.get("tie_margin", DEFAULT_TIE_MARGIN))

    def judge_batch(self, items: list[JudgeItem]) -> list[JudgeResult]:
        return [self._judge(item) for item in items]

    def _judge(self, item: JudgeItem) -> JudgeResult:
        scores = (item.metadata or {}).get("scores")
        field = f"metadata.scores.{self.key}"
        entry = scores.get(self.key) if isinstance(scores, dict) else None
        if entry is None:
            return JudgeResult(outcome="abstain", reasoning=f"no {field}")
        try:
            if not isinstance(entry, dict):
                raise MalformedScores(f"{field} must be an object")
            if "A" in entry or "B" in entry:
                side, confidence, reasoning = self._from_scores(entry, field, item.allow_tie)
            else:
                verdict = entry.get(item.order)
                if verdict is None:
                    return JudgeResult(outcome="abstain", reasoning=f"no {field}.{item.order}")
                side, confidence = _from_verdict(verdict, f"{field}.{item.order}")
                reasoning = f"offline verdict for order {item.order}: {side}"
        except MalformedScores as exc:
            return JudgeResult(outcome="error", error=str(exc))
        if side == "tie" and not item.allow_tie:
            return JudgeResult(outcome="abstain", reasoning=f"{reasoning}; no tie on this scale")
        return JudgeResult(
            outcome="ok",
            preferred=item.shown_preference(side),
            confidence=confidence,
            reasoning=reasoning,
            raw=str(entry)[:500],
        )

    def _from_scores(self, entry: dict, field: str, allow_tie: bool):
        values = []
        for side in ("A", "B"):
            value = entry.get(side)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise MalformedScores(f"{field}.{side} must be a number, not {value!r}")
            if not math.isfinite(value):
                raise MalformedScores(f"{field}.{side} must be finite")
            values.append(float(value))
        score_a, score_b = values
        p_a = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score_a - score_b))))
        if score_a == score_b or (allow_tie and abs(p_a - 0.5) < self.tie_margin):
            side = "tie"
        else:
            side = "A" if score_a > score_b else "B"
        return side, max(p_a, 1 - p_a), f"offline scores A={score_a:g} B={score_b:g}"


def _from_verdict(verdict, field: str) -> tuple[str, float | None]:
    confidence = None
    if isinstance(verdict, dict):
        confidence = verdict.get("confidence")
        if confidence is not None and (
            isinstance(confidence, bool)
            or not isinstance(confidence, int | float)
            or not 0 <= confidence <= 1
        ):
            raise MalformedScores(f"{field}.confidence must be a number from 0 to 1")
        verdict = verdict.get("side")
    if verdict not in SIDES:
        raise MalformedScores(f"{field} must be one of A, B, tie, not {verdict!r}")
    return verdict, None if confidence is None else float(confidence)
