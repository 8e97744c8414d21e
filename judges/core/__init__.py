"""Judges' shared kernel: access to jobs, reading media, API-key rules, form and page helpers;
imports annotation and judges.models, no judges feature."""
