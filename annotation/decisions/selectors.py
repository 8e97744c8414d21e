"""What the decisions read besides a pair's values: who may still give a pair a vote, so a
dispute goes back to the annotators only while one of them can answer it (docs/agreement.md,
"Consensus in the app")."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import connection

from annotation.models import Membership, Pair, PairRestriction, Role, Skip, Vote

# Who may still give a pair a vote, seen from the pair (the mirror of
# ``annotation.queue.serving.CLAIMABLE_WHERE``: a change to one is a change to the other): an
# annotator of its project (``m``, a membership row), not paused, who has neither voted on the
# pair (``p``) nor skipped it, and to whom it is not restricted away. A dispute none of them
# can answer goes to adjudication (``annotation.decisions.services.disputes_settle``).
FREE_ANNOTATOR_WHERE = f"""
    m.project_id = p.project_id AND m.role = '{Role.ANNOTATOR}' AND NOT m.paused
    AND (NOT p.restricted OR EXISTS (
        SELECT 1 FROM {PairRestriction._meta.db_table} r
        WHERE r.pair_id = p.id AND r.annotator_id = m.user_id))
    AND NOT EXISTS (
        SELECT 1 FROM {Vote._meta.db_table} v WHERE v.pair_id = p.id AND v.annotator_id = m.user_id)
    AND NOT EXISTS (
        SELECT 1 FROM {Skip._meta.db_table} s WHERE s.pair_id = p.id AND s.annotator_id = m.user_id)
"""
# Pair ids per query of the annotators left on pairs: a statement of bounded size.
_FREE_BATCH = 500


def free_annotators(*, pair_ids: Iterable[int], names: bool = False) -> dict[int, list[str]]:
    """Per pair among ``pair_ids`` that some annotator may still vote on, those annotators'
    usernames (``names``; else an empty list: only which pairs have one). A pair nobody can
    answer is absent."""
    ids = list(pair_ids)
    found: dict[int, list[str]] = {}
    user_table = get_user_model()._meta.db_table
    for start in range(0, len(ids), _FREE_BATCH):
        batch = ids[start : start + _FREE_BATCH]
        marks = ", ".join(["%s"] * len(batch))
        if names:
            sql = f"""SELECT p.id, u.username FROM {Pair._meta.db_table} p
                JOIN {Membership._meta.db_table} m ON m.project_id = p.project_id
                JOIN {user_table} u ON u.id = m.user_id
                WHERE p.id IN ({marks}) AND {FREE_ANNOTATOR_WHERE} ORDER BY p.id, u.username"""
        else:
            sql = f"""SELECT p.id, NULL FROM {Pair._meta.db_table} p WHERE p.id IN ({marks})
                AND EXISTS (SELECT 1 FROM {Membership._meta.db_table} m
                            WHERE {FREE_ANNOTATOR_WHERE})"""
        with connection.cursor() as cursor:
            cursor.execute(sql, batch)
            for pair_id, username in cursor.fetchall():
                found.setdefault(pair_id, [])
                if username is not None:
                    found[pair_id].append(username)
    return found
