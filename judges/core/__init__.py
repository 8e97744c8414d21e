"""Judges' shared kernel: access to jobs, reading media, API-key rules, the broker's refusal, form
and page helpers; imports annotation and judges.models, no judges feature."""
