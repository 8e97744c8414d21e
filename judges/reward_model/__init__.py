"""Arbiter's reward model: the model and its features (hashed words, MiniLM, image statistics), its
training data, trainer, held-out report and training runs; imports roster and the kernel."""
