"""A local torch reward model as a judge: each distinct response in a batch is scored once,
and the preference is sigmoid(r_first - r_second)."""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING

from judges.backends.base import (
    JudgeBackend,
    JudgeItem,
    JudgeResult,
    Preference,
    content_images,
    content_text,
)

if TYPE_CHECKING:
    from judges.reward_model.model import RewardModel
from judges.backends.media_stats import media_hashes, media_stats_cached
from judges.core.images import ImageStats, image_stats_cached

DEFAULT_TIE_MARGIN = 0.05


class RewardModelBackend(JudgeBackend):
    def __init__(self, judge) -> None:
        super().__init__(judge)
        self.tie_margin = float((judge.options or {}).get("tie_margin", DEFAULT_TIE_MARGIN))
        self._model: RewardModel | None = None
        # Image, video and audio statistics by hash: media never change, so these survive
        # across batches.
        self._image_stats: dict[str, ImageStats | None] = {}
        self._media_stats: dict = {}

    def __repr__(self) -> str:
        return f"<RewardModelBackend judge={self.judge.name!r} device={self.judge.device!r}>"

    def model(self):
        """The loaded model (once per backend); raises ``CheckpointError`` when it cannot load."""
        # torch only where it is needed
        from judges.reward_model.model import checkpoint_local, load_checkpoint

        if self._model is None:
            with checkpoint_local(self.judge.checkpoint) as path:
                self._model = load_checkpoint(path, self.judge.device)
        return self._model

    def judge_batch(self, items: list[JudgeItem]) -> list[JudgeResult]:
        from judges.reward_model.model import CheckpointError, ScoringInput

        if not items:
            return []
        started = time.perf_counter()
        try:
            model = self.model()
        except CheckpointError as exc:
            return [JudgeResult(outcome="error", error=str(exc)) for _ in items]
        self._load_image_stats(items)
        keys: dict[str, int] = {}
        inputs: list[ScoringInput] = []
        item_keys = []
        for item in items:
            prompt_text = content_text(item.prompt)
            pair = []
            for response in (item.first, item.second):
                key = json.dumps([prompt_text, item.criterion, response], sort_keys=True)
                if key not in keys:
                    keys[key] = len(inputs)
                    images = tuple(self._image_stats[sha] for sha in content_images(response))
                    inputs.append(
                        ScoringInput(
                            prompt_text,
                            content_text(response),
                            images,
                            criterion=item.criterion,
                            videos=self._stats_of(response, "video"),
                            audios=self._stats_of(response, "audio"),
                        )
                    )
                pair.append(keys[key])
            item_keys.append(pair)
        batch_size = max(1, self.judge.batch_size)
        rewards: list[float] = []
        for start in range(0, len(inputs), batch_size):
            rewards.extend(model.score(inputs[start : start + batch_size]))
        latency_ms = int((time.perf_counter() - started) * 1000 / len(items))
        return [
            self._result(item, rewards[first], rewards[second], latency_ms)
            for item, (first, second) in zip(items, item_keys, strict=True)
        ]

    def _result(self, item: JudgeItem, r_first: float, r_second: float, latency_ms: int):
        p_first = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, r_first - r_second))))
        preferred: Preference
        if item.allow_tie and abs(p_first - 0.5) < self.tie_margin:
            preferred = "tie"
        else:
            preferred = "first" if p_first >= 0.5 else "second"
        summary = f"r_first={r_first:.4f} r_second={r_second:.4f} p_first={p_first:.4f}"
        return JudgeResult(
            outcome="ok",
            preferred=preferred,
            confidence=max(p_first, 1.0 - p_first),
            reasoning=summary,
            raw=json.dumps({"r_first": r_first, "r_second": r_second, "p_first": p_first}),
            latency_ms=latency_ms,
        )

    def _load_image_stats(self, items: list[JudgeItem]) -> None:
        hashes = (
            sha
            for item in items
            for response in (item.first, item.second)
            for sha in content_images(response)
        )
        image_stats_cached(hashes, self._image_stats)
        media_stats_cached(
            (
                sha
                for item in items
                for response in (item.first, item.second)
                for kind in ("video", "audio")
                for sha in media_hashes(response, kind)
            ),
            self._media_stats,
        )

    def _stats_of(self, response: list[dict], kind: str) -> tuple:
        return tuple(self._media_stats[sha] for sha in media_hashes(response, kind))

    def received_parts(self) -> frozenset[str]:
        """Video and audio too when the checkpoint has media features (``config.media``);
        one that cannot load is sent nothing new (``judge_batch`` names its error)."""
        from judges.reward_model.model import CheckpointError

        try:
            media = self.model().uses_media
        except CheckpointError:
            media = False
        return frozenset({"text", "image", *(("video", "audio") if media else ())})

    def refusal(self, kinds: list[str]) -> str:
        return (
            f"this pair has {', '.join(kinds)} parts, which judge {self.judge.name} is not sent: "
            "its checkpoint has no media features (config.media is false; train it again)"
            if {"video", "audio"} & set(kinds) and set(kinds) <= {"video", "audio"}
            else super().refusal(kinds)
        )

    def close(self) -> None:
        self._model = None
        self._image_stats.clear()
        self._media_stats.clear()
