"""Judge evaluations: scoring judges against labels as the papers' scorers do, imported judgements,
the leaderboard; imports runs (its batch calls), roster and the kernel."""
