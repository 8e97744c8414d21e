"""Cheap signals for obviously broken responses: empty, a refusal, a missing image where the
task needs one, an image that is unreadable or blank. The judge votes only when exactly one
side is broken; otherwise it abstains (an abstention is not a vote)."""

from __future__ import annotations

import re
import time

from judges.backends.base import (
    JudgeBackend,
    JudgeItem,
    JudgeResult,
    content_images,
    content_text,
)
from judges.core.images import ImageStats, media_image_stats, media_rows
from judges.prompts import task_family

DEFAULT_CONFIDENCE = 0.95
# A refusal is short and says so near its start; a long answer with a caveat is not one.
REFUSAL_MAX_CHARS = 600
REFUSAL_WINDOW = 200
_REFUSAL = re.compile(
    r"\b(?:i(?:'m| am) sorry,? but|i apologi[sz]e,? but|"
    r"i (?:can(?:'t|not|no)|am unable to|'m unable to|am not able to|won't be able to|"
    r"will not be able to) (?:help|assist|comply|fulfil|fulfill|create|generate|produce|"
    r"provide|draw|edit|do that|process)|"
    r"as an ai(?: language)? model,? i (?:can(?:'t|not)|am unable|don't))",
    re.IGNORECASE,
)
# Tasks whose answers are images: a response without one is broken.
IMAGE_TASK_FAMILIES = ("t2i", "edit")


class HeuristicBackend(JudgeBackend):
    def __init__(self, judge) -> None:
        super().__init__(judge)
        self.confidence = float((judge.options or {}).get("confidence", DEFAULT_CONFIDENCE))
        self._image_problems: dict[str, str] = {}

    def judge_batch(self, items: list[JudgeItem]) -> list[JudgeResult]:
        started = time.perf_counter()
        self._inspect_images(items)
        results = [self._judge(item) for item in items]
        latency_ms = int((time.perf_counter() - started) * 1000 / max(1, len(items)))
        for result in results:
            result.latency_ms = latency_ms
        return results

    def problems(self, response: list[dict], *, task: str) -> list[str]:
        """Why ``response`` is obviously broken; empty when nothing is seen."""
        text = content_text(response).strip()
        images = content_images(response)
        if not text and not images:
            return ["empty response"]
        found = []
        if not images and task_family(task) in IMAGE_TASK_FAMILIES:
            found.append("no image for an image task")
        if not images and len(text) <= REFUSAL_MAX_CHARS and _REFUSAL.search(text[:REFUSAL_WINDOW]):
            found.append("refusal")
        found.extend(
            f"image {sha[:12]}: {self._image_problems[sha]}"
            for sha in images
            if self._image_problems.get(sha)
        )
        return found

    def _judge(self, item: JudgeItem) -> JudgeResult:
        first = self.problems(item.first, task=item.task)
        second = self.problems(item.second, task=item.task)
        described = "; ".join(
            f"response {n}: {', '.join(p)}" for n, p in ((1, first), (2, second)) if p
        )
        if bool(first) == bool(second):
            why = f"both broken ({described})" if first else "nothing obviously broken"
            return JudgeResult(outcome="abstain", reasoning=why)
        return JudgeResult(
            outcome="ok",
            preferred="second" if first else "first",
            confidence=self.confidence,
            reasoning=described,
        )

    def _inspect_images(self, items: list[JudgeItem]) -> None:
        wanted = {
            sha
            for item in items
            for response in (item.first, item.second)
            for sha in content_images(response)
            if sha not in self._image_problems
        }
        rows = media_rows(wanted)
        stats = media_image_stats(rows)
        for sha in wanted:
            self._image_problems[sha] = _image_problem(stats.get(sha), stored=sha in rows)

    def close(self) -> None:
        self._image_problems.clear()


def _image_problem(stats: ImageStats | None, *, stored: bool) -> str:
    if not stored:
        return "not in the media store"
    if stats is None:
        return "unreadable"
    return "blank (near-uniform pixels)" if stats.is_blank else ""
