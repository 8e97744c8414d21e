"""Training Arbiter's reward model (``judges.reward_model.model``) on what the humans decided:
``data`` reads preference pairs from a project's consensus, ``trainer`` fits them with the
Bradley-Terry loss. Database writes and jobs are in ``judges.reward_model.services``."""
