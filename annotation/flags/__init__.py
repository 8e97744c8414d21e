"""Flags on a pair: annotators say what is wrong with a pair, curators reply and resolve
(docs/curators.md, "Flags")."""
