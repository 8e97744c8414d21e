"""The annotators' hot path as prepared statements (docs/architecture.md, "The annotators'
hot path"): the reads and writes every claim and vote makes, written once by hand and
planned once per database connection (``annotation.core.prepared``), where the ORM would
compile them in Python and PostgreSQL plan them again on every request. Each says which ORM
query it stands for; the instances they return are the ones those queries would."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.authtoken.models import Token

from annotation.accounts.authentication import TOKEN_COLUMNS, USER_COLUMNS, token_user_checked
from annotation.core.prepared import ModelColumns, execute_prepared, sql_literals
from annotation.models import (
    Assignment,
    Membership,
    Pair,
    Project,
    Prompt,
    Response,
    Role,
)
from annotation.queue.serving import OPEN_STATUSES

_ASSIGNMENT = ModelColumns(Assignment, "a")
_PAIR = ModelColumns(Pair, "p")
_PROJECT = ModelColumns(Project, "j")
_PROMPT = ModelColumns(Prompt, "q")
_RESPONSE_A = ModelColumns(Response, "ra")
_RESPONSE_B = ModelColumns(Response, "rb")

_A, _P, _J = (model._meta.db_table for model in (Assignment, Pair, Project))
_M = Membership._meta.db_table
_OPEN = sql_literals(OPEN_STATUSES)

# Assignment.objects.select_related("pair__project").filter(pk=..., annotator=...), with the
# annotator's role in the project (NULL for none) for the access check.
_ASSIGNMENT_SQL = f"""
SELECT {_ASSIGNMENT.select_list()}, {_PAIR.select_list()}, {_PROJECT.select_list()},
  (SELECT m."role" FROM "{_M}" m WHERE m."project_id" = p."project_id" AND m."user_id" = %s)
FROM "{_A}" a JOIN "{_P}" p ON p."id" = a."pair_id" JOIN "{_J}" j ON j."id" = p."project_id"
WHERE a."id" = %s AND a."annotator_id" = %s
"""


# The largest id a bigint column holds: a path's id beyond it names no row (and bound to the
# prepared statement's bigint parameter it would fail the statement).
_MAX_ID = 2**63 - 1


def _stored_id(value: int) -> int:
    """``value``, or 0 (which no row has) when no row can have it."""
    return value if 0 < value <= _MAX_ID else 0


def assignment_with_role(*, assignment_id: int, user_id: int) -> tuple[Assignment, str | None]:
    """The user's assignment with its pair and project loaded, and the user's role in that
    project (None when not a member); raises ``Assignment.DoesNotExist`` for anyone else's."""
    with connection.cursor() as cursor:
        execute_prepared(
            cursor,
            "arbiter_assignment_role",
            _ASSIGNMENT_SQL,
            [user_id, _stored_id(assignment_id), user_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Assignment.DoesNotExist
    return _assignment_loaded(row), row[-1]


def _assignment_loaded(row, at: int = 0) -> Assignment:
    """The assignment, its pair and project from ``row[at:]``, as ``_ASSIGNMENT_SQL`` selects
    them."""
    assignment = _ASSIGNMENT.load(row, at)
    at += _ASSIGNMENT.width
    pair = _PAIR.load(row, at)
    pair.project = _PROJECT.load(row, at + _PAIR.width)
    assignment.pair = pair
    return assignment


# The API token and its user (annotation.accounts.authentication), the user's assignment as
# _ASSIGNMENT_SQL reads it (NULLs when it is not theirs), their role in its project, and
# whether the project has expired leases to free (_EXPIRED_SQL): the first statement of a
# vote, in place of three.
_TOKEN_ASSIGNMENT_SQL = f"""
SELECT {TOKEN_COLUMNS.select_list()}, {USER_COLUMNS.select_list()},
  {_ASSIGNMENT.select_list()}, {_PAIR.select_list()}, {_PROJECT.select_list()},
  (SELECT m."role" FROM "{_M}" m WHERE m."project_id" = p."project_id" AND m."user_id" = u."id"),
  EXISTS (
    SELECT 1 FROM "{_A}" x JOIN "{_P}" y ON y."id" = x."pair_id"
    WHERE y."project_id" = p."project_id" AND x."status" = '{Assignment.Status.LIVE}'
      AND x."expires_at" <= %s LIMIT 1)
FROM "{Token._meta.db_table}" t JOIN "{get_user_model()._meta.db_table}" u ON u."id" = t."user_id"
LEFT JOIN ("{_A}" a JOIN "{_P}" p ON p."id" = a."pair_id" JOIN "{_J}" j ON j."id" = p."project_id")
  ON a."id" = %s AND a."annotator_id" = u."id"
WHERE t."key" = %s
"""


@dataclass
class TokenAssignment:
    """``token_with_assignment``'s answer: the token's user, the token, and the user's
    assignment (None when it is not theirs) with their role and whether expired leases wait
    in its project."""

    user: object
    token: Token
    assignment: Assignment | None
    role: str | None
    expired: bool


def token_with_assignment(*, key: str, assignment_id: int, now) -> TokenAssignment:
    """The API token's user (DRF's refusals for an unknown key or an inactive user) and
    their assignment, in one statement."""
    params = [connection.ops.adapt_datetimefield_value(now), _stored_id(assignment_id), key]
    with connection.cursor() as cursor:
        execute_prepared(cursor, "arbiter_token_assignment", _TOKEN_ASSIGNMENT_SQL, params)
        row = cursor.fetchone()
    user, token = token_user_checked(row)
    at = TOKEN_COLUMNS.width + USER_COLUMNS.width
    if row[at] is None:
        return TokenAssignment(user, token, None, None, False)
    return TokenAssignment(user, token, _assignment_loaded(row, at), row[-2], row[-1])


# Membership.objects.select_for_update(of=("self",)).filter(project=..., user=...,
# role=ANNOTATOR).values_list("pk", "project__paused", "paused", "claim_cursor")[:1]
_MEMBERSHIP_LOCK_SQL = f"""
SELECT m."id", j."paused", m."paused", m."claim_cursor"
FROM "{_M}" m JOIN "{_J}" j ON j."id" = m."project_id"
WHERE m."project_id" = %s AND m."user_id" = %s AND m."role" = '{Role.ANNOTATOR}'
FOR UPDATE OF m
"""


def annotator_membership_lock(*, project_id: int, user_id: int) -> tuple | None:
    """Locks the annotator's membership (serialising one annotator's claims) and returns
    (membership id, project paused, annotator paused, claim cursor), or None when the user
    does not annotate the project. Caller holds a transaction."""
    with connection.cursor() as cursor:
        execute_prepared(
            cursor, "arbiter_membership_lock", _MEMBERSHIP_LOCK_SQL, [project_id, user_id]
        )
        return cursor.fetchone()


# live_assignments(project=..., annotator=..., now=...).first(); also the claim's ``held``
# (annotation.queue.services.claim._TAKE_SQL): a lease on screen before one claimed ahead.
_HELD_TEMPLATE = f"""
SELECT {_ASSIGNMENT.select_list()}
FROM "{_A}" a JOIN "{_P}" p ON p."id" = a."pair_id"
WHERE a."annotator_id" = %(annotator)s AND a."status" = '{Assignment.Status.LIVE}'
  AND a."expires_at" > %(now)s AND p."project_id" = %(project)s AND p."status" IN ({_OPEN})
  {{only}}
ORDER BY a."ahead", a."expires_at" DESC, a."id" DESC
LIMIT 1
"""
HELD_SQL = _HELD_TEMPLATE.format(only="")
# The lease the annotator holds claimed ahead (the claim ahead's ``held``).
HELD_AHEAD_SQL = _HELD_TEMPLATE.format(only='AND a."ahead"')


# Assignment.objects.filter(pair__project=..., status=LIVE, expires_at__lte=now).exists()
_EXPIRED_SQL = f"""
SELECT 1 FROM "{_A}" a JOIN "{_P}" p ON p."id" = a."pair_id"
WHERE p."project_id" = %s AND a."status" = '{Assignment.Status.LIVE}' AND a."expires_at" <= %s
LIMIT 1
"""


def any_expired_lease(*, project_id: int, now) -> bool:
    params = [project_id, connection.ops.adapt_datetimefield_value(now)]
    with connection.cursor() as cursor:
        execute_prepared(cursor, "arbiter_any_expired", _EXPIRED_SQL, params)
        return cursor.fetchone() is not None


# Pair.objects.select_related("prompt", "response_a", "response_b").get(pk=...)
# The pair's content after its columns, joined to the pair ``p``: also the claim's
# (annotation.queue.services.claim._TAKE_SQL); pair_with_content_row() reads it.
CONTENT_COLUMNS = (
    f"{_PROMPT.select_list()}, {_RESPONSE_A.select_list()}, {_RESPONSE_B.select_list()}"
)
CONTENT_JOINS = (
    f'JOIN "{Prompt._meta.db_table}" q ON q."id" = p."prompt_id" '
    f'JOIN "{Response._meta.db_table}" ra ON ra."id" = p."response_a_id" '
    f'JOIN "{Response._meta.db_table}" rb ON rb."id" = p."response_b_id"'
)
_CONTENT_SQL = f"""
SELECT {_PAIR.select_list()}, {CONTENT_COLUMNS}
FROM "{_P}" p {CONTENT_JOINS}
WHERE p."id" = %s
"""


def pair_with_content(pair_id: int) -> Pair:
    """The pair with its prompt and both responses loaded."""
    with connection.cursor() as cursor:
        execute_prepared(cursor, "arbiter_pair_content", _CONTENT_SQL, [pair_id])
        row = cursor.fetchone()
    if row is None:
        raise Pair.DoesNotExist
    return pair_with_content_row(row)


def pair_with_content_row(row, at: int = 0) -> Pair:
    """The pair with its prompt and responses from ``row[at:]``: the pair's columns, then
    the prompt's, response A's and response B's, as ``_CONTENT_SQL`` selects them."""
    pair = _PAIR.load(row, at)
    at += _PAIR.width
    pair.prompt = _PROMPT.load(row, at)
    pair.response_a = _RESPONSE_A.load(row, at + _PROMPT.width)
    pair.response_b = _RESPONSE_B.load(row, at + _PROMPT.width + _RESPONSE_A.width)
    return pair
