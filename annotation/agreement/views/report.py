"""The Agreement page (docs/agreement.md, "The Agreement page"): a project's cached agreement
report as headline figures and server-side SVG charts, each with its table and CSV; the
Recompute button; and one annotator's votes, a click away from their bar. Curators and
researchers only: annotators get 403, outsiders 404.

The page reads the cached report and nothing else of the votes, so it costs the same on a
million votes as on ten; what a chart draws is capped (the CSV has everything).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotation.agreement.report import LOW_AGREEMENT_BELOW, check_report_source
from annotation.agreement.selectors import (
    ANNOTATOR_VOTES_PAGE_SIZE,
    agreement_report_cached,
    annotator_in_project,
    annotator_votes,
    report_votes_exceed,
)
from annotation.agreement.services import agreement_report_queue_refresh, agreement_report_recompute
from annotation.charts.bars import bars, histogram, stacked_bar
from annotation.charts.heatmap import heatmap
from annotation.charts.line import line_with_band
from annotation.charts.markup import ALPHA_REFERENCES, BandPoint, Bar, Cell, Chart, Reference
from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.core.errors import Conflict, InvalidInput, Unavailable
from annotation.core.scales import CANONICAL_WORDS, on_screen_words
from annotation.core.spreadsheets import csv_response
from annotation.models import (
    AgreementReport,
    PairStatus,
    Project,
    ReportSource,
    Vote,
)
from config.errors import status_for

PAGE = "annotation/agreement.html"
ANNOTATOR_PAGE = "annotation/agreement_annotator.html"
# A project without a report gets one computed during its first visit when it has at most
# this many votes (well under a second); a larger one is queued for the worker.
FIRST_VISIT_BUILD_MAX_VOTES = 20_000
# What a chart draws at most, so the page stays fast on hundreds of annotators: the heatmap's
# most active annotators (each cell is a shape with its tooltip: 30 take about 16 ms, 60 four
# times that), and the annotator bars (flagged ones first). The CSV has them all.
HEATMAP_MAX_ANNOTATORS = 30
ANNOTATOR_BARS_MAX = 60
FLAG_WORDS = {
    "low_agreement": "low agreement",
    "too_fast": "too fast",
    "low_gold_accuracy": "low gold accuracy",
}
JUST_NOW = timedelta(minutes=1)  # a report younger than this was computed "just now"
NO_TASK = "(no task)"
NO_CRITERION = "(no criterion)"
ALPHA_LEVELS = ("nominal", "ordinal", "interval", "side")


def _staff_project(request, slug: str) -> tuple[Project, str]:
    return get_project_for_user(request.user, slug, roles=STAFF_ROLES)


def _source(params) -> str:
    return check_report_source(params.get("source", ReportSource.ALL))


def _bad_request(message: str) -> HttpResponse:
    # Plain text: the message may quote the value the request sent.
    return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


# ---- Charts from the report ------------------------------------------------------------


@dataclass(frozen=True)
class _Drawing:
    """What a chart is drawn from: the report, a link for each annotator, and whether to cap
    what it draws (the page) or not (the CSV)."""

    report: dict
    annotator_href: Callable[[str], str]
    capped: bool


def _ci(interval: Sequence[float | None] | None) -> tuple[float | None, float | None]:
    return (interval[0], interval[1]) if interval else (None, None)


def _history(drawing: _Drawing) -> Chart:
    points = [
        BandPoint(point["votes"], point["alpha_side"], *_ci(point["alpha_side_ci95"]))
        for point in drawing.report["history"]
    ]
    return line_with_band(
        points,
        title="Side alpha as the votes arrived",
        y_label="side alpha",
        chart_id="chart-history",
    )


def _most_votes_first(groups: dict) -> list[tuple[str, dict]]:
    """A report's groups (tasks, criteria) with the most votes first: the cached JSON keeps
    no key order (PostgreSQL's jsonb sorts keys)."""
    return sorted(groups.items(), key=lambda item: (-item[1]["votes"], item[0]))


def _tasks(drawing: _Drawing) -> Chart:
    items = [
        Bar(
            task or NO_TASK,
            figures["krippendorff_alpha"]["side"],
            *_ci(figures["alpha_ci95"]["side"]),
        )
        for task, figures in _most_votes_first(drawing.report["by_task"])
    ]
    return bars(
        items,
        title="Side alpha per task, with its 95% interval",
        label_header="task",
        value_header="side alpha",
        references=ALPHA_REFERENCES,
        chart_id="chart-tasks",
    )


def _drawn_annotators(drawing: _Drawing) -> list[dict]:
    """The annotators a bar chart draws: all of them for the CSV; on the page every flagged
    one, then the most active, up to ANNOTATOR_BARS_MAX; lowest agreement first."""
    rows = drawing.report["per_annotator"]
    if drawing.capped:
        rows = sorted(rows, key=lambda row: (not row["flags"], -row["votes"], row["annotator"]))
        rows = rows[:ANNOTATOR_BARS_MAX]
    unknown = float("inf")
    return sorted(
        rows,
        key=lambda row: (
            unknown if row["agreement_with_others"] is None else row["agreement_with_others"],
            row["annotator"],
        ),
    )


def _annotators(drawing: _Drawing) -> Chart:
    items = [
        Bar(
            row["annotator"],
            row["agreement_with_others"],
            flags=tuple(FLAG_WORDS.get(flag, flag) for flag in row["flags"]),
            href=drawing.annotator_href(row["annotator"]) if row["source"] == "vote" else None,
        )
        for row in _drawn_annotators(drawing)
    ]
    return bars(
        items,
        title="Agreement of each annotator with the others' consensus",
        label_header="annotator",
        value_header="agreement with the others",
        references=(Reference(LOW_AGREEMENT_BELOW, "low"),),
        chart_id="chart-annotators",
    )


def _kappa(drawing: _Drawing) -> Chart:
    rows = drawing.report["per_annotator"]
    if drawing.capped:
        rows = sorted(rows, key=lambda row: (-row["votes"], row["annotator"]))
        rows = rows[:HEATMAP_MAX_ANNOTATORS]
    labels = [row["annotator"] for row in rows]
    matrix = [[row["cohen_kappa"].get(other) for other in labels] for row in rows]
    return heatmap(labels, matrix, title="Cohen's kappa between annotators", chart_id="chart-kappa")


def _values(drawing: _Drawing) -> Chart:
    report = drawing.report
    words = CANONICAL_WORDS.get(report["scale"], {})
    counts = {
        f"{value} {words.get(int(value), '')}".strip(): count
        for value, count in sorted(report["value_distribution"].items(), key=lambda i: int(i[0]))
    }
    return histogram(counts, title="Votes by scale value", chart_id="chart-values")


def _statuses(drawing: _Drawing) -> Chart:
    counts = drawing.report["pairs_by_status"]
    counts = {status: counts.get(status, 0) for status in PairStatus.values}
    return stacked_bar(counts, title="Pairs by status", chart_id="chart-statuses")


def _judges(drawing: _Drawing) -> Chart:
    items = []
    for row in drawing.report.get("per_judge", []):
        by_order = row["by_order"]
        items += [
            Bar(f"{row['judge']} ({row['pairs']} pairs)", row["agreement"]),
            Bar(f"{row['judge']}, A first", by_order.get("AB")),
            Bar(f"{row['judge']}, B first", by_order.get("BA")),
        ]
    return bars(
        items,
        title="Judges against people: agreement with the consensus",
        label_header="judge",
        value_header="agreement",
        chart_id="chart-judges",
    )


@dataclass(frozen=True)
class _ChartSpec:
    name: str
    heading: str
    about: str
    draw: Callable[[_Drawing], Chart]


CHARTS = (
    _ChartSpec(
        "history",
        "Alpha over time",
        "Side alpha over every vote up to each point, with its bootstrap 95% interval.",
        _history,
    ),
    _ChartSpec("tasks", "Agreement per task", "Side alpha on each task's votes.", _tasks),
    _ChartSpec(
        "annotators",
        "Annotators",
        "Each annotator's agreement with the consensus of the others on the same pairs "
        "(leave-one-out). Flagged annotators are hatched; a bar opens that annotator's votes.",
        _annotators,
    ),
    _ChartSpec(
        "kappa",
        "Cohen's kappa",
        "Between each two annotators who share enough pairs.",
        _kappa,
    ),
    _ChartSpec("values", "Scale values", "How many votes each value of the scale got.", _values),
    _ChartSpec(
        "statuses", "Pairs by status", "Every pair of the project, gold included.", _statuses
    ),
    _ChartSpec(
        "judges",
        "Judges against people",
        "How often each judge of the filter runs chose the side people settled on, overall "
        "and by the order it saw the pair in; a gap between the orders is a position bias.",
        _judges,
    ),
)
_CHARTS = {spec.name: spec for spec in CHARTS}


# ---- Tables by task and by criterion -----------------------------------------------------

GROUP_HEADER = (
    "votes",
    "pairs",
    "annotators",
    *(f"alpha {level}{end}" for level in ALPHA_LEVELS for end in ("", " 95% low", " 95% high")),
    "pairwise agreement",
    "unanimous share",
    "Fleiss' kappa",
)


def _group_rows(groups: dict, blank: str) -> tuple[tuple[Cell, ...], ...]:
    return tuple(
        (
            name or blank,
            figures["votes"],
            figures["pairs"],
            figures["annotators"],
            *(
                cell
                for level in ALPHA_LEVELS
                for cell in (
                    figures["krippendorff_alpha"][level],
                    *_ci(figures["alpha_ci95"][level]),
                )
            ),
            figures["pairwise_agreement"],
            figures["unanimous_share"],
            figures["fleiss_kappa"],
        )
        for name, figures in _most_votes_first(groups)
    )


TABLES: dict[str, tuple[str, str, str]] = {
    # name: (the report's key, the first column, the name of what has none)
    "by-task": ("by_task", "task", NO_TASK),
    "by-criterion": ("by_criterion", "criterion", NO_CRITERION),
}


def _table(report: dict, name: str) -> tuple[tuple[str, ...], tuple[tuple[Cell, ...], ...]]:
    key, first, blank = TABLES[name]
    return (first, *GROUP_HEADER), _group_rows(report[key], blank)


def _shown(cell: Cell) -> str:
    """A table cell: integers with thousands separators, statistics to three decimals."""
    if cell is None:
        return "n/a"
    if isinstance(cell, bool) or not isinstance(cell, int | float):
        return str(cell)
    return f"{cell:,}" if isinstance(cell, int) else f"{cell:.3f}"


def _shown_rows(rows: Sequence[Sequence[Cell]]) -> list[list[str]]:
    return [[_shown(cell) for cell in row] for row in rows]


def _table_body(rows: Sequence[Sequence[Cell]]) -> SafeString:
    """A chart's rows as table rows, every cell escaped. Built here rather than in the
    template, which takes ten times as long over the heatmap's hundreds of rows."""
    return mark_safe(
        "".join(
            "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
            for row in _shown_rows(rows)
        )
    )


_ALPHAS_AT = 4  # where a group row's alphas start: after its name, votes, pairs, annotators


def _alphas_combined(
    header: Sequence[str], rows: Sequence[Sequence[Cell]]
) -> tuple[list[str], list[list[str]]]:
    """A group table as the page shows it: each alpha and its interval in one cell
    ("0.712 [0.690, 0.731]"), so the table fits a screen; the CSV keeps them apart."""
    end = _ALPHAS_AT + 3 * len(ALPHA_LEVELS)
    shown_header = [*header[:_ALPHAS_AT], *(f"alpha {level}" for level in ALPHA_LEVELS)]
    shown_rows = []
    for row in _shown_rows(rows):
        alphas = [f"{row[at]} [{row[at + 1]}, {row[at + 2]}]" for at in range(_ALPHAS_AT, end, 3)]
        shown_rows.append([*row[:_ALPHAS_AT], *alphas, *row[end:]])
    return [*shown_header, *header[end:]], shown_rows


# ---- Views ------------------------------------------------------------------------------


def _annotator_href(project: Project, source: str) -> Callable[[str], str]:
    return lambda username: (
        f"{reverse('agreement-annotator', args=[project.slug, username])}?source={source}"
    )


def _csv_url(project: Project, name: str, source: str) -> str:
    return f"{reverse('agreement-csv', args=[project.slug, name])}?source={source}"


def _first_report(
    project: Project, source: str
) -> tuple[AgreementReport | None, Unavailable | None]:
    """No report yet: built now when small, else queued for a worker. Returns the report
    (None when queued) and the error when it could not be queued."""
    if not report_votes_exceed(project=project, source=source, limit=FIRST_VISIT_BUILD_MAX_VOTES):
        return agreement_report_recompute(project=project, source=source), None
    try:
        agreement_report_queue_refresh(project=project, source=source)
    except Unavailable as exc:
        return None, exc
    return None, None


def _page_context(project: Project, source: str, row: AgreementReport) -> dict:
    report = row.data
    drawing = _Drawing(report=report, annotator_href=_annotator_href(project, source), capped=True)
    charts = []
    for spec in CHARTS:
        chart = spec.draw(drawing)
        charts.append(
            {
                "spec": spec,
                "chart": chart,
                "body": _table_body(chart.rows),
                "csv_url": _csv_url(project, spec.name, source),
            }
        )
    tables = []
    for name, (key, first, _) in TABLES.items():
        header, rows = _alphas_combined(*_table(report, name))
        tables.append(
            {
                "name": name,
                "heading": f"By {first}",
                "header": header,
                "rows": rows,
                "csv_url": _csv_url(project, name, source),
                "total": len(report[key]),
            }
        )
    annotators = len(report["per_annotator"])
    return {
        "report": report,
        "alphas": [
            {
                "level": level,
                "alpha": report["krippendorff_alpha"][level],
                "ci": report["alpha_ci95"][level],
            }
            for level in ALPHA_LEVELS
        ],
        "just_now": timezone.now() - row.computed_at < JUST_NOW,
        "charts": charts,
        "tables": tables,
        "raters": annotators,
        "bars_capped": annotators > ANNOTATOR_BARS_MAX,
        "heatmap_capped": annotators > HEATMAP_MAX_ANNOTATORS,
        "bars_max": ANNOTATOR_BARS_MAX,
        "heatmap_max": HEATMAP_MAX_ANNOTATORS,
        # A vote after the report asked for a refresh (debounced): it is on its way.
        "refreshing": row.refresh_requested_at is not None
        and row.refresh_requested_at > row.computed_at,
    }


def _render_page(request, project: Project, role: str, source: str, *, status: int = 200):
    row, queue_error = agreement_report_cached(project=project, source=source), None
    if row is None:
        row, queue_error = _first_report(project, source)
        status = status_for(queue_error) if queue_error else status
    context = {
        "project": project,
        "role": role,
        "source": source,
        "sources": ReportSource.choices,
        "row": row,
        "first_visit_max": FIRST_VISIT_BUILD_MAX_VOTES,
        "queue_error": queue_error,
    }
    if row is not None:
        context |= _page_context(project, source, row)
    return render(request, PAGE, context, status=status)


@require_GET
@never_cache
@login_required
def agreement_page(request, slug: str):
    project, role = _staff_project(request, slug)
    try:
        source = _source(request.GET)
    except InvalidInput as exc:
        return _bad_request(str(exc))
    return _render_page(request, project, role, source)


@require_POST
@never_cache
@login_required
def agreement_recompute(request, slug: str):
    """Queues a recompute of the report now, as the API's POST does; 503 when the broker
    is down (nothing was queued)."""
    project, role = _staff_project(request, slug)
    try:
        source = _source(request.POST)
    except InvalidInput as exc:
        return _bad_request(str(exc))
    try:
        agreement_report_queue_refresh(project=project, source=source)
    except (Unavailable, Conflict) as exc:  # the broker is down, or one is queued already
        messages.error(request, str(exc))
        return _render_page(request, project, role, source, status=status_for(exc))
    messages.success(request, "The report is being recomputed; reload this page in a moment.")
    return redirect(f"{reverse('agreement', args=[project.slug])}?source={source}")


@require_GET
@never_cache
@login_required
def agreement_csv(request, slug: str, chart: str):
    """The numbers of one chart or table of the cached report, uncapped, as CSV."""
    project, _ = _staff_project(request, slug)
    try:
        source = _source(request.GET)
    except InvalidInput as exc:
        return _bad_request(str(exc))
    if chart not in _CHARTS and chart not in TABLES:
        raise Http404("No such chart")
    row = agreement_report_cached(project=project, source=source)
    if row is None:
        raise Http404("No agreement report yet: open the Agreement page first")
    if chart in TABLES:
        header, rows = _table(row.data, chart)
    else:
        drawing = _Drawing(
            report=row.data, annotator_href=_annotator_href(project, source), capped=False
        )
        drawn = _CHARTS[chart].draw(drawing)
        header, rows = drawn.header, drawn.rows
    return csv_response(f"{project.slug}-agreement-{source}-{chart}.csv", header, rows)


def _agreed(vote: Vote) -> bool | None:
    """Whether the vote took the side the pair settled on (its gold label on a gold pair);
    None while the pair has no label."""
    pair = vote.pair
    label = pair.gold_label if pair.is_gold else pair.consensus_label
    return None if not label else vote.side == label


@require_GET
@never_cache
@login_required
def agreement_annotator(request, slug: str, username: str):
    """One annotator's votes in the project, newest first, with their figures from the
    cached report."""
    project, role = _staff_project(request, slug)
    annotator = annotator_in_project(project=project, username=username)
    try:
        source = _source(request.GET)
        before = int(request.GET["before"]) if "before" in request.GET else None
    except InvalidInput as exc:
        return _bad_request(str(exc))
    except ValueError:
        return _bad_request("before: must be a vote id (a whole number)")
    votes = annotator_votes(project=project, annotator=annotator, before=before)
    page, older = votes[:ANNOTATOR_VOTES_PAGE_SIZE], len(votes) > ANNOTATOR_VOTES_PAGE_SIZE
    words = CANONICAL_WORDS[project.scale]
    cached = agreement_report_cached(project=project, source=source)
    figures = None
    if cached is not None:
        figures = next(
            (row for row in cached.data["per_annotator"] if row["annotator"] == username), None
        )
    context = {
        "project": project,
        "role": role,
        "annotator": annotator,
        "figures": figures,
        "flag_words": [FLAG_WORDS.get(flag, flag) for flag in (figures or {}).get("flags", [])],
        "report_row": cached,
        "rows": [
            {
                "vote": vote,
                "on_screen": on_screen_words(
                    scale=project.scale, left_is_a=vote.left_is_a, side=vote.side, value=vote.value
                ),
                "canonical": f"{vote.value} \u00b7 {words.get(vote.value, vote.side)}",
                "agreed": _agreed(vote),
            }
            for vote in page
        ],
        "source": source,
        "older": page[-1].pk if older else None,
        "newest": before is not None,
        "page_size": ANNOTATOR_VOTES_PAGE_SIZE,
    }
    return render(request, ANNOTATOR_PAGE, context)
