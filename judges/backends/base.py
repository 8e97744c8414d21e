"""What every judge backend receives and returns.

A backend sees a pair in one presentation order: ``first`` and ``second`` are the responses
as shown to it, so position bias is measurable. Results are in shown terms (``first``,
``second``, ``tie``); the filter run maps them back to canonical A/B with ``JudgeItem.order``.

Outcomes: ``ok`` (a vote, ``preferred`` set), ``unparseable`` (an answer that could not be read,
kept in ``raw``), ``error`` (the call failed), ``abstain`` (the judge declines to vote on this
item, e.g. a heuristic that sees nothing broken), ``skipped`` (the pair holds a kind of part the
judge is not sent, video to a judge that reads text and images: never called, the reason in
``error``); only ``ok`` results are votes.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Literal

Order = Literal["AB", "BA"]
Preference = Literal["first", "second", "tie"]
Outcome = Literal["ok", "unparseable", "error", "abstain", "skipped"]


def content_text(content: list[dict]) -> str:
    """The text parts of a prompt or response, joined."""
    return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def content_images(content: list[dict]) -> list[str]:
    """The media hashes of a prompt's or response's image parts, in order."""
    return [p["media"] for p in content if p.get("type") == "image"]


@dataclass(frozen=True)
class JudgeItem:
    pair_id: int
    order: Order
    task: str
    prompt: list[dict]
    first: list[dict]
    second: list[dict]
    criterion: str = ""
    allow_tie: bool = False
    metadata: dict = field(default_factory=dict)

    def canonical_side(self, preferred: Preference) -> str:
        if preferred == "tie":
            return "tie"
        first_is_a = self.order == "AB"
        return "A" if (preferred == "first") == first_is_a else "B"

    def shown_preference(self, side: str) -> Preference:
        """The inverse of ``canonical_side``: canonical A/B/tie in this item's shown terms."""
        if side == "tie":
            return "tie"
        return "first" if (side == "A") == (self.order == "AB") else "second"


@dataclass
class JudgeResult:
    outcome: Outcome
    preferred: Preference | None = None
    confidence: float | None = None
    reasoning: str = ""
    raw: str = ""
    error: str = ""
    transient: bool = False  # worth retrying later (429, 5xx, timeouts)
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1  # calls made for this item, retries included


# What a backend receives unless it says otherwise (``JudgeBackend.received_parts``): a
# judge that saw only a pair's text would vote on half of it.
JUDGED_PART_TYPES = frozenset({"text", "image"})


def unjudged_parts(item: JudgeItem, received: frozenset[str] = JUDGED_PART_TYPES) -> list[str]:
    """The kinds of part in ``item`` outside ``received``, sorted; empty when none."""
    return sorted(
        {
            part.get("type", "")
            for content in (item.prompt, item.first, item.second)
            for part in content
        }
        - received
    )


def judge_judgeable(backend: JudgeBackend, items: list[JudgeItem]) -> list[JudgeResult]:
    """``backend.judge_batch`` on the items it can judge; the others are skipped, never
    called, with the reason naming the parts it would not see (never a silent vote on the
    text alone)."""
    return results_of(judge_judgeable_submit(backend, items))


def judge_judgeable_submit(
    backend: JudgeBackend, items: list[JudgeItem]
) -> list[Future[JudgeResult]]:
    """As ``judge_judgeable``, through ``backend.submit``: one future per item, in order,
    each done as soon as its own answer is in."""
    received = backend.received_parts()
    refused = {i: unjudged_parts(item, received) for i, item in enumerate(items)}
    refused = {i: kinds for i, kinds in refused.items() if kinds}
    sent = [item for i, item in enumerate(items) if i not in refused]
    answered = backend.submit(sent) if sent else []
    if len(answered) != len(sent):
        for future in answered:
            future.cancel()
        raise RuntimeError(
            f"{type(backend).__name__} answered {len(answered)} of {len(sent)} items"
        )
    answers = iter(answered)
    return [
        done_future(JudgeResult(outcome="skipped", error=backend.refusal(refused[i])))
        if i in refused
        else next(answers)
        for i in range(len(items))
    ]


def done_future(result: JudgeResult) -> Future[JudgeResult]:
    future: Future[JudgeResult] = Future()
    future.set_result(result)
    return future


def results_of(futures: list[Future[JudgeResult]]) -> list[JudgeResult]:
    """Waits for every future; an exception (a task's time limit) cancels those not done."""
    try:
        return [future.result() for future in futures]
    except BaseException:
        for future in futures:
            future.cancel()
        raise


class JudgeBackend:
    """Judges a batch of items; returns one result per item, in the same order.

    Backends never raise for a single item's failure: they return ``outcome="error"``
    (with ``transient=True`` when a later retry may succeed)."""

    def __init__(self, judge) -> None:
        self.judge = judge

    def judge_batch(self, items: list[JudgeItem]) -> list[JudgeResult]:
        raise NotImplementedError

    def submit(self, items: list[JudgeItem]) -> list[Future[JudgeResult]]:
        """Starts judging ``items``: one future per item, in order. A backend that judges in
        the calling thread returns them done; an HTTP one returns at once, its calls running
        on the process's event loop (``judges.backends.event_loop``)."""
        return [done_future(result) for result in self.judge_batch(items)]

    def received_parts(self) -> frozenset[str]:
        """The kinds of content part this backend is sent; pairs with others are refused."""
        return JUDGED_PART_TYPES

    def refusal(self, kinds: list[str]) -> str:
        """Why a pair holding parts of ``kinds``, which it is not sent, is skipped."""
        return f"this pair has {', '.join(kinds)} parts, which this judge is not sent"

    def close(self) -> None:
        """Releases clients, models and pools."""
