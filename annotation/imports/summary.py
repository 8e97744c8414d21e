"""What an import did (``ImportSummary``, printed by ``import_pairs`` and shown on the
import's page), and the signal that another run of its job finished it first."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ImportSummary:
    created_pairs: int = 0
    existing_pairs: int = 0
    prompts_created: int = 0
    responses_created: int = 0
    media_created: int = 0
    media_reused: int = 0
    prior_annotations: int = 0
    prior_ratings: int = 0
    decided_consensus: int = 0
    decided_disputed: int = 0
    pairs_read: int = 0
    seconds: float = 0.0

    @property
    def decided_pairs(self) -> int:
        """New pairs whose prior votes reached their target and were decided at import."""
        return self.decided_consensus + self.decided_disputed

    @property
    def pairs_per_second(self) -> float:
        return self.pairs_read / self.seconds if self.seconds else 0.0

    def describe(self) -> list[str]:
        return [
            f"Created pairs:      {self.created_pairs}",
            f"Already present:    {self.existing_pairs}",
            f"New prompts:        {self.prompts_created}",
            f"New responses:      {self.responses_created}",
            f"Media:              {self.media_created} new, {self.media_reused} reused",
            f"Prior annotations:  {self.prior_annotations}",
            f"Prior ratings:      {self.prior_ratings}",
            f"Decided by priors:  {self.decided_pairs} ({self.decided_consensus} consensus, "
            f"{self.decided_disputed} disputed)",
            f"Seconds:            {self.seconds:.2f} ({self.pairs_per_second:,.0f} pairs/s)",
        ]


class ImportJobFinished(Exception):
    """Another run of the same job finished it first (a redelivered task)."""
