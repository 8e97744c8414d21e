"""The model leaderboard of a project (docs/leaderboard.md): the response models' pairwise
outcomes read from the database in one grouped query per source, ranked by
``annotation.leaderboard.bradley_terry``. Curators and researchers only: annotators never
see model names."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import models
from django.db.models import Count, Exists, F, OuterRef, Q

from annotation.core.local_settings import local_settings
from annotation.leaderboard.bradley_terry import (
    BOOTSTRAP_ROUNDS,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    Outcomes,
    Ranked,
    rank_models,
)
from annotation.models import Pair, PairStatus, PriorAnnotation, Project, Side, Vote

# The most bootstrap rounds a page, the API or the command may ask for.
MAX_BOOTSTRAP_ROUNDS = 10_000
# Results are cached by their outcome counts, so a new vote changes the key.
CACHE_SECONDS = 3600


class ModelSource(models.TextChoices):
    """What counts as one comparison of two models."""

    CONSENSUS = "consensus", "Consensus labels"
    VOTES = "votes", "Every vote"
    REFERENCE = "reference", "Reference labels"


@dataclass(frozen=True)
class ModelLeaderboard:
    source: str
    task: str
    pairs: int
    comparisons: int
    same_model: int
    unnamed: int
    rounds: int
    seed: int
    models: list[Ranked]
    outcomes: Outcomes

    def as_json(self) -> dict[str, Any]:
        """The contract of ``model_leaderboard --json`` and the API (docs/leaderboard.md)."""
        return {
            "source": self.source,
            "task": self.task or None,
            "pairs": self.pairs,
            "comparisons": self.comparisons,
            "left_out": {"same_model": self.same_model, "unnamed_model": self.unnamed},
            "rounds": self.rounds,
            "seed": self.seed,
            "confidence": CONFIDENCE,
            "models": [
                {
                    "model": row.model,
                    "score": _round(row.score),
                    "low": _round(row.low),
                    "high": _round(row.high),
                    "wins": row.wins,
                    "losses": row.losses,
                    "ties": row.ties,
                    "pairs": row.pairs,
                }
                for row in self.models
            ],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _source_rows(project: Project, source: str) -> tuple[models.QuerySet, str, str]:
    """The rows of one comparison each, the path from them to their pair and the field that
    holds the outcome in A/B terms."""
    if source == ModelSource.CONSENSUS:
        rows = Pair.objects.filter(project=project, status=PairStatus.CONSENSUS)
        return rows.filter(is_gold=False), "", "consensus_label"
    if source == ModelSource.REFERENCE:
        rows = (
            Pair.objects.filter(project=project, is_gold=False)
            .exclude(prior_label="")
            .exclude(status=PairStatus.EXCLUDED)
        )
        return rows, "", "prior_label"
    raise ValueError(f"source {source!r}: expected one of {', '.join(ModelSource.values)}")


def _vote_sources(project: Project) -> list[tuple[models.QuerySet, str, str]]:
    """Every human vote: the project's own (adjudications left out, as agreement does) and
    the prior annotations that came with the import."""
    votes = Vote.objects.filter(
        pair__project=project, pair__is_gold=False, is_adjudication=False
    ).exclude(pair__status=PairStatus.EXCLUDED)
    priors = PriorAnnotation.objects.filter(pair__project=project, pair__is_gold=False).exclude(
        pair__status=PairStatus.EXCLUDED
    )
    return [(votes, "pair__", "side"), (priors.exclude(label=""), "pair__", "label")]


def _counted_pairs(project: Project, source: str, task: str) -> int:
    """How many pairs gave at least one counted comparison."""
    pairs = (
        Pair.objects.filter(project=project, is_gold=False)
        .exclude(status=PairStatus.EXCLUDED)
        .exclude(response_a__model_name="")
        .exclude(response_b__model_name="")
        .exclude(response_a__model_name=F("response_b__model_name"))
    )
    if task:
        pairs = pairs.filter(task=task)
    if source == ModelSource.CONSENSUS:
        return pairs.filter(status=PairStatus.CONSENSUS).count()
    if source == ModelSource.REFERENCE:
        return pairs.exclude(prior_label="").count()
    # vote_count counts a pair's votes (never an adjudication): a semi-join over the votes
    # would read them all again.
    prior = PriorAnnotation.objects.filter(pair=OuterRef("pk")).exclude(label="")
    return pairs.filter(Q(vote_count__gt=0) | Exists(prior)).count()


# Memory enough to group a million votes by hashing instead of sorting them on disk, and no
# JIT compilation (it took longer than the query): for the grouping's transaction only.
_GROUPING = {"jit": "off", "work_mem": "64MB"}


def model_outcomes(*, project: Project, source: str, task: str = "") -> tuple[Outcomes, dict]:
    """The pairwise outcomes of ``source`` (a ``ModelSource``), optionally of one task, with
    how many pairs they come from and what was left out: comparisons of a model with itself
    and of a response without a model name."""
    with local_settings(**_GROUPING):
        return _outcomes(project, source, task)


def _outcomes(project: Project, source: str, task: str) -> tuple[Outcomes, dict]:
    if source == ModelSource.VOTES:
        sources = _vote_sources(project)
    else:
        sources = [_source_rows(project, source)]
    counts: Counter[tuple[str, str, str]] = Counter()
    same = unnamed = 0
    for rows, prefix, outcome in sources:
        if task:
            rows = rows.filter(**{f"{prefix}task": task})
        model_a, model_b = f"{prefix}response_a__model_name", f"{prefix}response_b__model_name"
        groups = (
            rows.values(a=F(model_a), b=F(model_b), outcome=F(outcome))
            .order_by()
            .annotate(n=Count("*"))
        )
        for group in groups:
            a, b, n = group["a"], group["b"], group["n"]
            if not a or not b:
                unnamed += n
            elif a == b:
                same += n
            elif group["outcome"] in Side.values:
                counts[a, b, group["outcome"]] += n
    left_out = {
        "pairs": _counted_pairs(project, source, task),
        "same_model": same,
        "unnamed": unnamed,
    }
    return Outcomes.from_counts(dict(counts)), left_out


def model_leaderboard(
    *,
    project: Project,
    source: str = ModelSource.CONSENSUS,
    task: str = "",
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = BOOTSTRAP_SEED,
) -> ModelLeaderboard:
    """The ranked models of ``project`` from ``source``: Bradley-Terry strengths with
    bootstrap 95% intervals, best first. The fit is cached by its outcome counts."""
    if not 0 <= rounds <= MAX_BOOTSTRAP_ROUNDS:
        raise ValueError(f"rounds: between 0 and {MAX_BOOTSTRAP_ROUNDS}")
    outcomes, left_out = model_outcomes(project=project, source=source, task=task)
    fingerprint = hashlib.sha256(
        repr((outcomes.models, rounds, seed)).encode()
        + outcomes.wins.tobytes()
        + outcomes.ties.tobytes()
    ).hexdigest()
    key = f"arbiter:model-leaderboard:{fingerprint}"
    ranked = cache.get(key)
    if ranked is None:
        ranked = rank_models(outcomes, rounds=rounds, seed=seed)
        cache.set(key, ranked, CACHE_SECONDS)
    return ModelLeaderboard(
        source=source,
        task=task,
        pairs=left_out["pairs"],
        comparisons=outcomes.comparisons,
        same_model=left_out["same_model"],
        unnamed=left_out["unnamed"],
        rounds=rounds,
        seed=seed,
        models=ranked,
        outcomes=outcomes,
    )


def model_tasks(project: Project) -> list[str]:
    """The project's tasks, for the page's task switch."""
    return sorted(
        set(
            Pair.objects.filter(project=project, is_gold=False)
            .exclude(task="")
            .values_list("task", flat=True)
            .distinct()
        )
    )
