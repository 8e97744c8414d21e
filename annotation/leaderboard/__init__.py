"""The model leaderboard: Bradley-Terry strengths of the response models from human judgements
(docs/leaderboard.md); imports the models and the charts, nothing of another feature."""
