"""The model leaderboard: Bradley-Terry strengths of the response models from human judgements
(docs/leaderboard.md); imports core, models and charts."""
