"""The judges themselves: creating, checking and editing them, and which projects may use them;
imports the kernel (core, backends, prompts) and, to check a reward-model judge, its model."""
