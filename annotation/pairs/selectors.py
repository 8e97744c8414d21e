"""The pairs browser's reads (docs/curators.md): filters, whitelisted sorts, keyset pages
with cursors, and a pair's neighbours."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce

from annotation.core.json_input import json_loads
from annotation.core.search import search_condition
from annotation.models import (
    Flag,
    Pair,
    PairStatus,
    Project,
    Skip,
)
from annotation.pairs.thumbnails import Thumbnail, pair_thumbnails

if TYPE_CHECKING:
    from typing import Any, TypedDict

    from django_stubs_ext import WithAnnotations

    class _BrowseAnnotations(TypedDict):
        sort_value: Any  # the row's sort key (its type depends on the sort)
        skip_count: int  # on the page's rows; neighbour lookups fetch only ids
        open_flags: int  # on the page's rows too

    # A pair as the browser's keyset query returns it.
    AnnotatedPair = WithAnnotations[Pair, _BrowseAnnotations]


# Page sizes a curator may pick, and the default one.
PAIR_PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAIR_PAGE_SIZE = 50
# Sort keys the browser offers (a whitelist: no other column can be sorted on). Each sorts on
# (key, id), so every row has a unique place and a keyset cursor never skips or repeats one.
# Statuses sort in lifecycle order; pairs without an ensemble agreement sort lowest.
_STATUS_ORDER = Case(
    *(When(status=value, then=Value(rank)) for rank, value in enumerate(PairStatus.values)),
    output_field=IntegerField(),
)


@dataclass(frozen=True)
class PairSort:
    label: str
    expression: Combinable
    key_type: type | tuple[type, ...]  # what a cursor's key must be for this sort


PAIR_SORTS: dict[str, PairSort] = {
    "id": PairSort("Import order", F("id"), int),
    "external_id": PairSort("Pair id", F("external_id"), str),
    "status": PairSort("Status", _STATUS_ORDER, int),
    "task": PairSort("Task", F("task"), str),
    "votes": PairSort("Votes", F("vote_count"), int),
    "agreement": PairSort(
        "Ensemble agreement", Coalesce(F("ensemble_agreement"), Value(-1.0)), (int, float)
    ),
    "priority": PairSort("Priority", F("priority"), int),
}
DEFAULT_PAIR_SORT = "id"
# A label filter's value for "no label yet".
NO_LABEL = "none"
# The Flags filter's values: pairs with an open flag, with any flag, with none.
FLAG_FILTERS = {"open": "open flags", "any": "flagged (open or resolved)", "none": "never flagged"}


@dataclass(frozen=True)
class PairFilters:
    """What the pairs browser shows: every field optional (None or empty: no filter)."""

    q: str = ""
    statuses: tuple[str, ...] = ()
    task: str = ""
    has_criterion: bool | None = None
    votes_min: int | None = None
    votes_max: int | None = None
    ensemble_label: str = ""  # A, B, tie, or NO_LABEL
    agreement_min: float | None = None
    agreement_max: float | None = None
    consensus_label: str = ""  # A, B, tie, or NO_LABEL
    is_gold: bool | None = None
    skipped: bool | None = None
    flags: str = ""  # a key of FLAG_FILTERS
    sort: str = DEFAULT_PAIR_SORT
    descending: bool = False


@dataclass(frozen=True)
class PairRow:
    pair: Pair
    skip_count: int
    open_flags: int
    # the first media part of the prompt and of each response (annotation/pairs/thumbnails.py)
    thumbnails: list[Thumbnail]


@dataclass
class PairPage:
    rows: list[PairRow]
    next_cursor: str | None
    prev_cursor: str | None
    counts: dict[str, int]  # pairs per status matching every filter but the status one
    total: int  # pairs matching every filter


def _search_filter(text: str) -> Q:
    """Pairs with every word of ``text`` starting a word of their id, prompt text or model
    names (through the GIN index on ``search_words``), or whose id is ``text`` exactly
    (docs/curators.md)."""
    exact = Q(external_id=text)
    words = search_condition(text=text)
    return exact if words is None else exact | words


def _label_filter(field: str, label: str) -> Q:
    return Q(**{field: "" if label == NO_LABEL else label})


# The filters that compare one column with the value given (None: not filtered), and the lookup
# each one is.
_VALUE_FILTERS = (
    ("votes_min", "vote_count__gte"),
    ("votes_max", "vote_count__lte"),
    ("agreement_min", "ensemble_agreement__gte"),
    ("agreement_max", "ensemble_agreement__lte"),
    ("is_gold", "is_gold"),
)
# The filters named after the label column they pick a value of (or none, NO_LABEL).
_LABEL_FILTERS = ("ensemble_label", "consensus_label")


def _filter_q(filters: PairFilters) -> Q:
    """Every filter but the status one, as one condition."""
    q = Q()
    if filters.q:
        q &= _search_filter(filters.q)
    if filters.task:
        q &= Q(task=filters.task)
    if filters.has_criterion is not None:
        q &= ~Q(criterion="") if filters.has_criterion else Q(criterion="")
    for name, lookup in _VALUE_FILTERS:
        if (value := getattr(filters, name)) is not None:
            q &= Q(**{lookup: value})
    for field in _LABEL_FILTERS:
        if label := getattr(filters, field):
            q &= _label_filter(field, label)
    if filters.skipped is not None:
        skipped = Exists(Skip.objects.filter(pair_id=OuterRef("pk")))
        q &= Q(skipped) if filters.skipped else ~Q(skipped)
    if filters.flags:
        flags = Flag.objects.filter(pair_id=OuterRef("pk"))
        if filters.flags == "open":
            flags = flags.filter(resolved_at__isnull=True)
        q &= ~Q(Exists(flags)) if filters.flags == "none" else Q(Exists(flags))
    return q


def pairs_matching(*, project: Project, filters: PairFilters) -> QuerySet[Pair]:
    """The project's pairs that pass every filter, unordered."""
    pairs = Pair.objects.filter(project=project).filter(_filter_q(filters))
    if filters.statuses:
        pairs = pairs.filter(status__in=filters.statuses)
    return pairs


def cursor_encode(key, pair_id: int) -> str:
    """A keyset cursor: the sort key and id of the row a page starts after (or ends before)."""
    raw = json.dumps([key, pair_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_decode(cursor: str, *, sort: str) -> tuple[object, int]:
    """(key, id) of a cursor for ``sort``; ValueError for anything ``cursor_encode`` did not
    make for it."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key, pair_id = json_loads(raw)  # JsonRefused is a ValueError
    except (ValueError, TypeError) as exc:
        raise ValueError("not a page cursor") from exc
    if (
        isinstance(key, bool)
        or not isinstance(key, PAIR_SORTS[sort].key_type)
        or isinstance(pair_id, bool)
        or not isinstance(pair_id, int)
    ):
        raise ValueError("not a page cursor")
    return key, pair_id


def _keyset(
    pairs: QuerySet[Pair], *, filters: PairFilters, cursor: str | None, forward: bool
) -> QuerySet[Pair]:
    """``pairs`` with their ``sort_value``, after the cursor (or, not ``forward``, before it),
    in the order to read them from it."""
    ascending = forward != filters.descending
    pairs = pairs.alias(sort_key=PAIR_SORTS[filters.sort].expression).annotate(
        sort_value=F("sort_key")
    )
    if cursor is not None:
        key, pair_id = cursor_decode(cursor, sort=filters.sort)
        if ascending:
            pairs = pairs.filter(Q(sort_key__gt=key) | Q(sort_key=key, id__gt=pair_id))
        else:
            pairs = pairs.filter(Q(sort_key__lt=key) | Q(sort_key=key, id__lt=pair_id))
    return pairs.order_by(*(("sort_key", "id") if ascending else ("-sort_key", "-id")))


def _keyset_rows(
    pairs: QuerySet[Pair], *, filters: PairFilters, cursor: str | None, forward: bool, limit: int
) -> list[AnnotatedPair]:
    """Up to ``limit`` rows of ``pairs`` in the filters' sort order, after the cursor (or,
    not ``forward``, before it), returned in page order. The rows are picked by their ids
    first, so that sorting many matching pairs (a common word, a sort no index serves) keeps
    ``limit`` narrow rows in memory rather than every matching row with all it shows."""
    ids = _keyset(pairs, filters=filters, cursor=cursor, forward=forward).values("pk")[:limit]
    page = _keyset(
        _page_rows(Pair.objects.filter(pk__in=ids)), filters=filters, cursor=None, forward=forward
    )
    # The page's query also carries skip_count and open_flags (_page_rows): the stubs lose them
    # across calls.
    rows = cast("list[AnnotatedPair]", list(page))
    return rows if forward else rows[::-1]


def pair_pks_by_external_id(*, project: Project, external_ids: Iterable[str]) -> dict[str, int]:
    """The primary keys of the project's pairs with these external ids, by external id (an
    id with no pair is left out)."""
    return dict(
        Pair.objects.filter(project=project, external_id__in=external_ids).values_list(
            "external_id", "pk"
        )
    )


def project_tasks(*, project: Project) -> list[str]:
    """The task slugs used by the project's pairs, for choosing pairs by task."""
    return list(
        Pair.objects.filter(project=project)
        .exclude(task="")
        .values_list("task", flat=True)
        .distinct()
        .order_by("task")
    )


def project_criteria(*, project: Project, limit: int) -> list[str]:
    """Up to ``limit`` distinct criteria of the project's pairs ("" for none among them), for
    choosing pairs by criterion."""
    return list(
        Pair.objects.filter(project=project)
        .values_list("criterion", flat=True)
        .distinct()
        .order_by("criterion")[:limit]
    )


def _page_rows(pairs: QuerySet[Pair]) -> QuerySet[Pair]:
    """What a row of the table needs, in the one query that fetches the page."""
    skips = (
        Skip.objects.filter(pair_id=OuterRef("pk"))
        .order_by()
        .values("pair_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    open_flags = (
        Flag.objects.filter(pair_id=OuterRef("pk"), resolved_at__isnull=True)
        .order_by()
        .values("pair_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    return (
        pairs.select_related("prompt", "response_a", "response_b")
        .defer("metadata", "ensemble_summary", "search_words", "prompt__metadata")
        .annotate(
            skip_count=Coalesce(Subquery(skips, output_field=IntegerField()), 0),
            open_flags=Coalesce(Subquery(open_flags, output_field=IntegerField()), 0),
        )
    )


def pairs_browse(
    *,
    project: Project,
    filters: PairFilters,
    after: str | None = None,
    before: str | None = None,
    limit: int = DEFAULT_PAIR_PAGE_SIZE,
) -> PairPage:
    """One page of the pairs browser: ``limit`` rows after the ``after`` cursor (or before
    ``before``), each with ``skip_count`` and ``thumbnails`` (the first media part of the
    prompt and of each response), the cursors of the pages around it, and the counts per
    status. Two queries, whatever the page size or depth (a third for the posters and peaks
    of a page with video or audio). Raises ValueError for a cursor it did not make."""
    forward = before is None
    cursor = after if forward else before
    rows = _keyset_rows(
        pairs_matching(project=project, filters=filters),
        filters=filters,
        cursor=cursor,
        forward=forward,
        limit=limit + 1,
    )
    more = len(rows) > limit
    if more:
        rows = rows[:limit] if forward else rows[1:]
    thumbnails = pair_thumbnails(
        project,
        ([row.prompt.content, row.response_a.content, row.response_b.content] for row in rows),
    )
    page_rows = [
        PairRow(pair=row, skip_count=row.skip_count, open_flags=row.open_flags, thumbnails=shown)
        for row, shown in zip(rows, thumbnails, strict=True)
    ]
    first, last = (rows[0], rows[-1]) if rows else (None, None)
    has_next = more if forward else cursor is not None
    has_prev = cursor is not None if forward else more
    counts = dict(
        Pair.objects.filter(project=project)
        .filter(_filter_q(filters))
        .values("status")
        .order_by()
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    shown = filters.statuses or tuple(counts)
    return PairPage(
        rows=page_rows,
        next_cursor=cursor_encode(last.sort_value, last.pk) if has_next and last else None,
        prev_cursor=cursor_encode(first.sort_value, first.pk) if has_prev and first else None,
        counts={value: counts.get(value, 0) for value in PairStatus.values},
        total=sum(counts.get(value, 0) for value in shown),
    )


def pair_neighbours(
    *, project: Project, filters: PairFilters, pair: Pair
) -> tuple[int | None, int | None]:
    """The ids of the pairs before and after ``pair`` in the browser's order under
    ``filters`` (None at either end). Three small queries."""
    expression = PAIR_SORTS[filters.sort].expression
    key = Pair.objects.filter(pk=pair.pk).annotate(k=expression).values_list("k", flat=True)[0]
    cursor = cursor_encode(key, pair.pk)
    matching = pairs_matching(project=project, filters=filters)

    def neighbour(forward: bool) -> int | None:
        ordered = _keyset(matching, filters=filters, cursor=cursor, forward=forward)
        return next(iter(ordered.values_list("pk", flat=True)[:1]), None)

    return neighbour(False), neighbour(True)
