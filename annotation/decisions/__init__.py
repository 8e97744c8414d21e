"""Decisions: what becomes of a pair. The lifecycle (``lifecycle.py``, the one owner of
``Pair.status`` and ``Pair.target_votes``), the consensus rules (``rules.py``, pure), deciding
pairs by them (the vote that fills a pair's last slot, the import, re-applying the rule),
settling disputes nobody can answer, and adjudication (``services.py``), and who may still vote
on a pair (``selectors.py``). Called by the queue, imports, adjudication, the settings and the
judges; imports core and models."""
