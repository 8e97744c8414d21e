"""Server-side SVG charts for the Agreement page, each with the table of its numbers.

Every chart function returns a ``Chart``: SVG markup built only from escaped text and numbers
this module formats, with no script and no inline style (the CSP's ``style-src 'self'`` holds),
and the header and rows of the same numbers for an HTML table and a CSV download
(``annotation.spreadsheets.csv_response``).
What each chart shows: ``docs/agreement.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TypeVar
from urllib.parse import urlsplit

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from annotation.agreement import MIN_SHARED_PAIRS_FOR_KAPPA

Cell = str | int | float | None
_T = TypeVar("_T")

# Geometry, in viewBox units; the SVG scales to its container's width.
WIDTH = 720
PAD = 12
FONT_SIZE = 12
SMALL_FONT_SIZE = 11
CHAR_WIDTH_EM = 0.6  # a generous average glyph width, so fitted labels do not overflow
EMPTY_HEIGHT = 80
LINE_HEIGHT = 300
LINE_LABELS_WIDTH = 112  # right of the plot, for the reference lines' labels
LINE_MARKERS_MAX = 60  # more points than this are drawn as a line without dots
BAND_POINT_WIDTH = 8  # an interval with no neighbour to join is a bar this wide
BAR_ROW = 24
REFERENCE_ROW = 14
BAR_THICKNESS = 14
BAR_LABEL_WIDTH = 180
BAR_VALUE_WIDTH_MAX = 280
HISTOGRAM_HEIGHT = 260
HISTOGRAM_BAR_MAX = 80
HISTOGRAM_LABEL_CHARS_MIN = 3  # a category label gets at least this many characters
STACK_HEIGHT = 32
LEGEND_ROW = 20
LEGEND_COLUMN = 232
HEATMAP_SIZE = 480
HEATMAP_CELL_MAX = 36
HEATMAP_LABEL_CHARS = 16
HEATMAP_FONT_MIN = 7.0
HEATMAP_GRID_CELL_MIN = 4  # smaller cells have no white grid line between them
HEATMAP_VALUE_CELL_MIN = 30  # cells at least this wide print their value
HEATMAP_TITLED_MAX = 100  # up to this many raters every cell carries its own tooltip
HEATMAP_COLOR_STEPS = 20  # beyond, cells take one of this many colours per unit
LEGEND_BAR_WIDTH = 200

# Colours: text at least 7:1 on white; the flag colour at least 4.5:1.
TEXT_COLOR = "#1d2330"
MUTED_COLOR = "#475467"
GRID_COLOR = "#e3e6eb"
AXIS_COLOR = "#667085"
ACCENT = "#3b5bdb"
BAND_OPACITY = 0.18
FLAG_COLOR = "#b54708"
FLAG_BACKGROUND = "#fde9d9"
MISSING_COLOR = "#98a2b3"
# Okabe and Ito's colour-blind-safe palette, each with the text colour readable on it.
PALETTE: tuple[tuple[str, str], ...] = (
    ("#0072b2", "#ffffff"),
    ("#e69f00", "#1d2330"),
    ("#009e73", "#ffffff"),
    ("#cc79a7", "#1d2330"),
    ("#56b4e9", "#1d2330"),
    ("#d55e00", "#ffffff"),
    ("#f0e442", "#1d2330"),
    ("#999999", "#1d2330"),
)
# A diverging red-white-blue scale for values in -1..1 (ColorBrewer RdBu).
DIVERGING: tuple[tuple[float, str], ...] = (
    (-1.0, "#b2182b"),
    (-0.5, "#ef8a62"),
    (0.0, "#f7f7f7"),
    (0.5, "#67a9cf"),
    (1.0, "#2166ac"),
)
DARK_CELL = 0.55  # cells further than this from zero get white text

NO_DATA = "no data yet"
NOT_AVAILABLE = "n/a"
ELLIPSIS = "\u2026"
FLAG_MARK = "\u25b2"  # drawn before a highlighted bar's label, beside its flags in words
CHART_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
LINK_SCHEMES = frozenset({"", "http", "https"})
# Characters XML 1.0 forbids, and line breaks: a label is one line.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True)
class Reference:
    """A labelled reference line, such as Krippendorff's threshold for tentative conclusions."""

    value: float
    label: str


# Krippendorff's thresholds: alpha >= 0.667 for tentative conclusions, >= 0.8 for reliable data.
ALPHA_REFERENCES = (Reference(0.667, "tentative"), Reference(0.8, "good"))


@dataclass(frozen=True)
class BandPoint:
    """One point of a line with its interval; ``x`` is a number (votes) or a datetime."""

    x: float | datetime
    y: float | None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Bar:
    """One bar; ``flags`` (display text) highlight it, ``href`` makes it a link."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    flags: tuple[str, ...] = ()
    href: str | None = None


@dataclass(frozen=True)
class Chart:
    """An SVG chart and its numbers: ``rows`` under ``header``, ``None`` where undefined."""

    svg: SafeString
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]


# ---- Markup ------------------------------------------------------------------------------


def _n(value: float) -> str:
    """A coordinate: two decimals at most, no trailing zeros, never ``-0``."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _tag(name: str, *children: SafeString, **attrs: object) -> SafeString:
    """An element; attribute values are escaped (floats formatted), ``class_`` is ``class``
    and other underscores become hyphens. Children are markup this module built."""
    rendered = []
    for key, value in attrs.items():
        if value is None:
            continue
        attr = "class" if key == "class_" else key.replace("_", "-")
        text = _n(value) if isinstance(value, float) else str(value)
        rendered.append(f' {attr}="{escape(text)}"')
    opening = f"<{name}{''.join(rendered)}"
    if not children:
        return mark_safe(f"{opening}/>")
    return mark_safe(f"{opening}>{''.join(children)}</{name}>")


def _clean(text: str) -> str:
    return _UNPRINTABLE.sub(" ", str(text)).strip()


def _text(text: str) -> SafeString:
    """Text from outside the module, escaped even when it comes marked safe."""
    return escape(_clean(text))


def _fit(text: str, width: float, font_size: float) -> str:
    """``text`` cut with an ellipsis to what fits in ``width`` at ``font_size``."""
    chars = max(1, int(width / (font_size * CHAR_WIDTH_EM) + 1e-6))
    return text if len(text) <= chars else text[: chars - 1] + ELLIPSIS


def _label(text: str, width: float, font_size: float, **attrs: object) -> SafeString:
    """A ``<text>`` fitted to ``width``; a cut label carries its full text as a tooltip."""
    full = _clean(text)
    shown = _fit(full, width, font_size)
    tooltip = () if shown == full else (_tag("title", _text(full)),)
    return _tag("text", *tooltip, _text(shown), font_size=font_size, **attrs)


def _svg(chart_id: str, title: str, desc: str, height: float, *body: SafeString) -> SafeString:
    return _tag(
        "svg",
        _tag("title", _text(title), id=f"{chart_id}-title"),
        _tag("desc", _text(desc), id=f"{chart_id}-desc"),
        *body,
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {WIDTH} {_n(height)}",
        width="100%",
        role="img",
        aria_labelledby=f"{chart_id}-title",
        aria_describedby=f"{chart_id}-desc",
        class_="chart",
        font_family="system-ui, sans-serif",
        font_size=FONT_SIZE,
        fill=TEXT_COLOR,
    )


def _chart_id(chart_id: str | None, title: str) -> str:
    """The prefix of the chart's element ids: given, or derived from the title."""
    if chart_id is None:
        return "chart-" + hashlib.sha256(title.encode()).hexdigest()[:10]
    if not CHART_ID.fullmatch(chart_id):
        raise ValueError(
            f"chart_id: {chart_id!r} must start with a letter and hold only letters, "
            "digits, '-' and '_'"
        )
    return chart_id


def _no_data(
    chart_id: str, title: str, header: tuple[str, ...], rows: tuple[tuple[Cell, ...], ...] = ()
) -> Chart:
    svg = _svg(
        chart_id,
        title,
        f"{_clean(title)}: {NO_DATA}.",
        EMPTY_HEIGHT,
        _tag(
            "text",
            _text(NO_DATA),
            x=WIDTH / 2,
            y=EMPTY_HEIGHT / 2,
            text_anchor="middle",
            dominant_baseline="middle",
            fill=MUTED_COLOR,
            class_="chart-empty",
        ),
    )
    return Chart(svg=svg, header=header, rows=rows)


def _hatch(pattern_id: str, color: str, background: str = "#ffffff") -> SafeString:
    """A diagonal hatch: marks what differs by more than its colour."""
    return _tag(
        "pattern",
        _tag("rect", width=6, height=6, fill=background),
        _tag("line", x1=0, y1=0, x2=0, y2=6, stroke=color, stroke_width=3),
        id=pattern_id,
        width=6,
        height=6,
        patternUnits="userSpaceOnUse",
        patternTransform="rotate(45)",
    )


# ---- Numbers -----------------------------------------------------------------------------


def _finite(value: float | None) -> float | None:
    """``value`` (an int stays an int), or ``None`` when missing or not a finite number."""
    if value is None or not math.isfinite(value):
        return None
    return value if isinstance(value, int) else float(value)


def _fmt(value: float | None) -> str:
    """A number for a label: integers with thousands separators, statistics to 3 decimals."""
    if value is None:
        return NOT_AVAILABLE
    if isinstance(value, int) or (abs(value) >= 1000 and float(value).is_integer()):
        return f"{int(value):,}"
    text = f"{value:.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return text[1:] if text.startswith("-") and float(text.replace(",", "")) == 0 else text


def _round_text(value: float) -> str:
    """A tick or a threshold: as short as it is exact (0.2, 0.667, 1,000)."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _share(count: float, total: float) -> float | None:
    return round(count / total, 4) if total else None


def _percent(share: float | None) -> str:
    return NOT_AVAILABLE if share is None else f"{share:.1%}"


def _ticks(low: float, high: float, *, integer: bool = False, count: int = 5) -> list[float]:
    """Round ticks (1, 2 or 5 times a power of ten apart) from at most ``low`` to at least
    ``high``, as near ``count`` intervals as such steps allow; whole numbers when ``integer``."""
    if high <= low:
        high = low + 1
    magnitude = 10 ** math.floor(math.log10((high - low) / count))
    candidates = []
    for multiple in (1, 2, 5, 10):
        step = max(1, round(multiple * magnitude)) if integer else multiple * magnitude
        first = math.floor(low / step + 1e-9) * step
        intervals = round((math.ceil(high / step - 1e-9) * step - first) / step)
        candidates.append((abs(intervals - count), -intervals, first, step))
    _, fewer, first, step = min(candidates)  # on a tie, the finer step
    intervals = -fewer
    return [round(first + i * step, 10) for i in range(intervals + 1)]


def _scale(domain: tuple[float, float], span: tuple[float, float]) -> Callable[[float], float]:
    (d0, d1), (r0, r1) = domain, span
    ratio = (r1 - r0) / (d1 - d0) if d1 != d0 else 0.0
    return lambda value: r0 + (value - d0) * ratio


def _domain(values: Iterable[float], *, floor: float, ceiling: float) -> tuple[float, float]:
    """``floor``..``ceiling`` widened to every value."""
    values = list(values)
    return min([floor, *values]), max([ceiling, *values])


def _reference_label(reference: Reference) -> str:
    return f"{_clean(reference.label)} ({_round_text(reference.value)})"


# ---- Line with a band --------------------------------------------------------------------


def line_with_band(
    points: Sequence[BandPoint],
    *,
    title: str,
    x_label: str = "votes",
    y_label: str = "alpha",
    references: Sequence[Reference] = ALPHA_REFERENCES,
    chart_id: str | None = None,
) -> Chart:
    """A statistic over votes or time (alpha as votes arrive), its 95% interval shaded, with
    labelled reference lines; the y axis runs from min(0, lowest) to at least 1."""
    chart_id = _chart_id(chart_id, title)
    by_time = [isinstance(point.x, datetime) for point in points]
    if any(by_time) and not all(by_time):
        raise ValueError("points: x must be numbers for every point or datetimes for every point")
    at = {id(point): _x_number(point.x) for point in points}
    points = sorted(points, key=lambda point: at[id(point)])
    header = (x_label, y_label, "95% low", "95% high")
    rows = tuple(
        (_x_cell(point.x), _finite(point.y), _finite(point.low), _finite(point.high))
        for point in points
    )
    series = [
        _Plotted(
            at[id(point)],
            _x_words(point.x, x_label),
            *map(_finite, (point.y, point.low, point.high)),
        )
        for point in points
    ]
    drawn = [point for point in series if point.y is not None]
    if not drawn:
        return _no_data(chart_id, title, header, rows)

    left, right, top, bottom = 56.0, WIDTH - LINE_LABELS_WIDTH, 16.0, LINE_HEIGHT - 44.0
    values = [v for point in series for v in (point.y, point.low, point.high) if v is not None]
    y_ticks = _ticks(*_domain(values, floor=0.0, ceiling=1.0))
    y = _scale((y_ticks[0], y_ticks[-1]), (bottom, top))
    x_low, x_high = min(point.at for point in series), max(point.at for point in series)
    if x_low == x_high:
        x_low, x_high = x_low - 1, x_high + 1
    x = _scale((x_low, x_high), (left, right))

    body = [*_y_axis(y_ticks, y, left, right)]
    zone = points[0].x.tzinfo if isinstance(points[0].x, datetime) else None
    for tick, text in _x_ticks(x_low, x_high, by_time=any(by_time), zone=zone):
        body.append(
            _tag("line", x1=x(tick), x2=x(tick), y1=bottom, y2=bottom + 4, stroke=AXIS_COLOR)
        )
        body.append(_small(text, x=x(tick), y=bottom + 16, text_anchor="middle"))
    body.append(_tag("line", x1=left, x2=right, y1=bottom, y2=bottom, stroke=AXIS_COLOR))
    body.extend(_axis_titles(x_label, y_label, left, right, top, bottom, LINE_HEIGHT))
    for reference in references:
        if y_ticks[0] <= reference.value <= y_ticks[-1]:
            level = y(reference.value)
            body.append(_reference(left, level, right, level))
            body.append(
                _small(
                    _reference_label(reference), x=right + 6, y=level, dominant_baseline="middle"
                )
            )

    bands = [
        (p.at, p.low, p.high) if p.low is not None and p.high is not None else None for p in series
    ]
    for run in _runs(bands):
        if len(run) == 1:  # a band one point wide is a bar across its interval
            (a, low, high), width = run[0], BAND_POINT_WIDTH
            body.append(
                _tag(
                    "rect",
                    x=x(a) - width / 2,
                    y=y(high),
                    width=width,
                    height=y(low) - y(high),
                    fill=ACCENT,
                    fill_opacity=BAND_OPACITY,
                    class_="chart-band",
                )
            )
            continue
        outline = [(x(a), y(high)) for a, _, high in run] + [
            (x(a), y(low)) for a, low, _ in run[::-1]
        ]
        body.append(
            _tag(
                "polygon",
                points=_path(outline),
                fill=ACCENT,
                fill_opacity=BAND_OPACITY,
                class_="chart-band",
            )
        )
    for line in _runs((p.at, p.y) if p.y is not None else None for p in series):
        body.append(
            _tag(
                "polyline",
                points=_path((x(a), y(value)) for a, value in line),
                fill="none",
                stroke=ACCENT,
                stroke_width=2,
                class_="chart-line",
            )
        )
    if len(drawn) <= LINE_MARKERS_MAX:
        for point in drawn:
            tip = _tag("title", _text(f"{point.words}: {_clean(y_label)} {point.summary()}"))
            body.append(
                _tag(
                    "circle",
                    tip,
                    cx=x(point.at),
                    cy=y(point.value),
                    r=3,
                    fill=ACCENT,
                    stroke="#ffffff",
                )
            )

    first, last = drawn[0], drawn[-1]
    desc = (
        f"{len(drawn)} points of {_clean(y_label)}, from {_fmt(first.y)} at {first.words} "
        f"to {last.summary()} at {last.words}."
    )
    return Chart(svg=_svg(chart_id, title, desc, LINE_HEIGHT, *body), header=header, rows=rows)


@dataclass(frozen=True)
class _Plotted:
    """A point as drawn: ``at`` its x as a number, ``words`` its x in words."""

    at: float
    words: str
    y: float | None
    low: float | None
    high: float | None

    @property
    def value(self) -> float:
        return self.y if self.y is not None else math.nan

    def summary(self) -> str:
        if self.low is None or self.high is None:
            return _fmt(self.y)
        return f"{_fmt(self.y)} (95% interval {_fmt(self.low)} to {_fmt(self.high)})"


def _x_number(x: float | datetime) -> float:
    return x.timestamp() if isinstance(x, datetime) else float(x)


def _x_cell(x: float | datetime) -> Cell:
    return x.isoformat() if isinstance(x, datetime) else x


def _x_words(x: float | datetime, x_label: str) -> str:
    if isinstance(x, datetime):
        return x.isoformat(sep=" ", timespec="minutes")
    return f"{_fmt(x)} {_clean(x_label)}"


def _x_ticks(
    low: float, high: float, *, by_time: bool, zone: tzinfo | None
) -> list[tuple[float, str]]:
    """Ticks inside ``low``..``high``: round numbers of votes or, ``by_time`` (the numbers are
    timestamps), five evenly spaced times in ``zone``; dates alone over a week or more."""
    if not by_time:
        ticks = _ticks(low, high, integer=True)
        return [(tick, _round_text(tick)) for tick in ticks if low <= tick <= high]
    step = (high - low) / 4
    stamp = "%Y-%m-%d" if high - low >= 7 * 86400 else "%m-%d %H:%M"
    return [
        (low + i * step, datetime.fromtimestamp(low + i * step, zone).strftime(stamp))
        for i in range(5)
    ]


def _y_axis(
    ticks: list[float], y: Callable[[float], float], left: float, right: float
) -> list[SafeString]:
    """Horizontal grid lines with their labels, and the zero line where it falls inside."""
    shapes = []
    for tick in ticks:
        shapes.append(_tag("line", x1=left, x2=right, y1=y(tick), y2=y(tick), stroke=GRID_COLOR))
        shapes.append(
            _small(
                _round_text(tick),
                x=left - 6,
                y=y(tick),
                text_anchor="end",
                dominant_baseline="middle",
            )
        )
    if ticks[0] < 0 < ticks[-1]:
        shapes.append(_tag("line", x1=left, x2=right, y1=y(0), y2=y(0), stroke=AXIS_COLOR))
    return shapes


def _axis_titles(
    x_label: str, y_label: str, left: float, right: float, top: float, bottom: float, height: float
) -> list[SafeString]:
    middle = _n((top + bottom) / 2)
    return [
        _label(
            x_label,
            right - left,
            FONT_SIZE,
            x=(left + right) / 2,
            y=height - 8,
            text_anchor="middle",
        ),
        _label(
            y_label,
            bottom - top,
            FONT_SIZE,
            x=0,
            y=0,
            text_anchor="middle",
            transform=f"translate(14 {middle}) rotate(-90)",
        ),
    ]


def _small(text: str, **attrs: object) -> SafeString:
    """An axis or reference label, in the muted colour and the small size."""
    return _tag("text", _text(text), fill=MUTED_COLOR, font_size=SMALL_FONT_SIZE, **attrs)


def _reference(x1: float, y1: float, x2: float, y2: float) -> SafeString:
    return _tag(
        "line",
        x1=x1,
        y1=y1,
        x2=x2,
        y2=y2,
        stroke=MUTED_COLOR,
        stroke_dasharray="5 4",
        class_="chart-reference",
    )


def _runs(items: Iterable[_T | None]) -> list[list[_T]]:
    """The stretches of consecutive items that are not ``None``: a gap breaks the line."""
    runs: list[list[_T]] = [[]]
    for item in items:
        if item is not None:
            runs[-1].append(item)
        elif runs[-1]:
            runs.append([])
    return [run for run in runs if run]


def _path(coordinates: Iterable[tuple[float, float]]) -> str:
    return " ".join(f"{_n(px)},{_n(py)}" for px, py in coordinates)


# ---- Horizontal bars ---------------------------------------------------------------------


def bars(
    items: Sequence[Bar],
    *,
    title: str,
    label_header: str = "label",
    value_header: str = "value",
    domain: tuple[float, float] | None = None,
    references: Sequence[Reference] = (),
    chart_id: str | None = None,
) -> Chart:
    """Horizontal bars with their values in words, optional 95% whiskers, flagged bars hatched
    and marked in text, and bars that link where an item has an ``href``; the axis runs from
    min(0, lowest) to at least 1 unless ``domain`` is given."""
    chart_id = _chart_id(chart_id, title)
    for item in items:
        _check_href(item.href)
    plotted = [(item, _finite(item.value), *_interval(item.low, item.high)) for item in items]
    with_interval = any(low is not None for _, _, low, _ in plotted)
    with_flags = any(item.flags for item in items)
    header = (
        (label_header, value_header)
        + (("95% low", "95% high") if with_interval else ())
        + (("flags",) if with_flags else ())
    )
    rows = tuple(
        (item.label, value)
        + ((low, high) if with_interval else ())
        + ((", ".join(item.flags),) if with_flags else ())
        for item, value, low, high in plotted
    )
    if all(value is None for _, value, _, _ in plotted):
        return _no_data(chart_id, title, header, rows)

    texts = [_bar_words(item, value, low, high) for item, value, low, high in plotted]
    longest = max(len(text) for text in texts)
    value_width = min(BAR_VALUE_WIDTH_MAX, longest * FONT_SIZE * CHAR_WIDTH_EM + PAD)
    left, right = float(PAD + BAR_LABEL_WIDTH), WIDTH - PAD - value_width
    values = [v for _, *numbers_ in plotted for v in numbers_ if v is not None]
    ticks = _ticks(*(domain or _domain(values, floor=0.0, ceiling=1.0)))
    shown = [reference for reference in references if ticks[0] <= reference.value <= ticks[-1]]
    top = 8.0 + len(shown) * REFERENCE_ROW  # a row each, so reference labels never overlap
    bottom = top + len(items) * BAR_ROW
    height = bottom + 28
    x = _scale((ticks[0], ticks[-1]), (left, right))
    baseline = x(max(ticks[0], min(0.0, ticks[-1])))

    flag_id = f"{chart_id}-flag"
    body = [_tag("defs", _hatch(flag_id, FLAG_COLOR, background=FLAG_BACKGROUND))]
    for tick in ticks:
        body.append(_tag("line", x1=x(tick), x2=x(tick), y1=top, y2=bottom, stroke=GRID_COLOR))
        body.append(_small(_round_text(tick), x=x(tick), y=bottom + 16, text_anchor="middle"))
    if ticks[0] <= 0 <= ticks[-1]:
        body.append(_tag("line", x1=x(0), x2=x(0), y1=top, y2=bottom, stroke=AXIS_COLOR))
    for row, reference in enumerate(shown, start=1):
        at, level = x(reference.value), row * REFERENCE_ROW
        body.append(_reference(at, level + 2, at, bottom))
        body.append(_small(_reference_label(reference), x=at, y=level, text_anchor="middle"))

    for index, ((item, value, low, high), text) in enumerate(zip(plotted, texts, strict=True)):
        centre = top + (index + 0.5) * BAR_ROW
        flagged = bool(item.flags)
        marked = {"fill": FLAG_COLOR, "font_weight": "bold"} if flagged else {}
        label = f"{FLAG_MARK} {_clean(item.label)}" if flagged else item.label
        shapes = [
            _tag("title", _text(f"{_clean(item.label)}: {text}")),
            _label(
                label,
                BAR_LABEL_WIDTH - 8,
                FONT_SIZE,
                x=left - 8,
                y=centre,
                text_anchor="end",
                dominant_baseline="middle",
                **marked,
            ),
        ]
        if value is not None:
            start, end = sorted((baseline, x(value)))
            shapes.append(
                _tag(
                    "rect",
                    x=start,
                    y=centre - BAR_THICKNESS / 2,
                    width=max(end - start, 1.0),
                    height=BAR_THICKNESS,
                    fill=f"url(#{flag_id})" if flagged else ACCENT,
                    stroke=FLAG_COLOR if flagged else None,
                    stroke_width=2 if flagged else None,
                    class_="chart-bar chart-flagged" if flagged else "chart-bar",
                )
            )
        if low is not None and high is not None:
            shapes.append(_whisker(x(low), x(high), centre))
        group = _tag("g", *shapes)
        body.append(_tag("a", group, href=item.href, class_="chart-link") if item.href else group)
        body.append(
            _tag("text", _text(text), x=right + 8, y=centre, dominant_baseline="middle", **marked)
        )

    desc = f"{len(items)} bars of {_clean(value_header)} by {_clean(label_header)}"
    flagged_labels = [_clean(item.label) for item in items if item.flags]
    if flagged_labels:
        desc += f"; flagged: {', '.join(flagged_labels)}"
    return Chart(svg=_svg(chart_id, title, desc + ".", height, *body), header=header, rows=rows)


def _interval(low: float | None, high: float | None) -> tuple[float | None, float | None]:
    """Both ends of an interval, or neither."""
    low, high = _finite(low), _finite(high)
    return (low, high) if low is not None and high is not None else (None, None)


def _bar_words(item: Bar, value: float | None, low: float | None, high: float | None) -> str:
    """A bar's value as printed beside it: the number, its interval, its flags."""
    text = _fmt(value)
    if low is not None and high is not None:
        text += f" [{_fmt(low)}, {_fmt(high)}]"
    if item.flags:
        text += f" {FLAG_MARK} " + ", ".join(_clean(flag) for flag in item.flags)
    return text


def _whisker(start: float, end: float, centre: float) -> SafeString:
    cap = BAR_THICKNESS / 2 + 2
    top = _n(centre - cap / 2)
    return _tag(
        "path",
        d=f"M{_n(start)} {top}v{_n(cap)}M{_n(start)} {_n(centre)}H{_n(end)}"
        f"M{_n(end)} {top}v{_n(cap)}",
        stroke=TEXT_COLOR,
        stroke_width=1.5,
        fill="none",
        class_="chart-whisker",
    )


def _check_href(href: str | None) -> None:
    if href is None:
        return
    if urlsplit(href).scheme.lower() not in LINK_SCHEMES or _UNPRINTABLE.search(href):
        raise ValueError(f"href: {href!r} is not a web link (a path or an http(s) URL)")


# ---- Counts: histogram and stacked bar ---------------------------------------------------


def _count_table(
    counts: Mapping[str, int | None], label_header: str, count_header: str
) -> tuple[int, tuple[str, ...], tuple[tuple[Cell, ...], ...]]:
    """The total, header and rows (label, count, share) of ``counts``; ``None`` is unknown."""
    for label, count in counts.items():
        if count is not None and (not math.isfinite(count) or count < 0):
            raise ValueError(f"counts: {label!r} has {count!r}, not a count (0 or more)")
    total = sum(count or 0 for count in counts.values())
    rows = tuple(
        (label, count, None if count is None else _share(count, total))
        for label, count in counts.items()
    )
    return total, (label_header, count_header, "share"), rows


def _count_words(label: str, count: int | None, total: int) -> str:
    share = None if count is None else _share(count, total)
    return f"{_clean(label)}: {_fmt(count)} ({_percent(share)})"


def _counts_desc(
    counts: Mapping[str, int | None], total: int, label_header: str, count_header: str
) -> str:
    parts = ", ".join(f"{_clean(label)}: {_fmt(count)}" for label, count in counts.items())
    return f"{_fmt(total)} {_clean(count_header)} by {_clean(label_header)}; {parts}."


def histogram(
    counts: Mapping[str, int | None],
    *,
    title: str,
    value_header: str = "value",
    count_header: str = "votes",
    chart_id: str | None = None,
) -> Chart:
    """Categorical bars: how many votes each scale value got, in the order given."""
    chart_id = _chart_id(chart_id, title)
    total, header, rows = _count_table(counts, value_header, count_header)
    if not total:
        return _no_data(chart_id, title, header, rows)

    left, right, top, bottom = 56.0, float(WIDTH - PAD), 24.0, HISTOGRAM_HEIGHT - 44.0
    ticks = _ticks(0, max(count or 0 for count in counts.values()), integer=True)
    y = _scale((ticks[0], ticks[-1]), (bottom, top))
    slot = (right - left) / len(counts)
    thickness = min(slot * 0.7, HISTOGRAM_BAR_MAX)
    char = SMALL_FONT_SIZE * CHAR_WIDTH_EM
    every = math.ceil(HISTOGRAM_LABEL_CHARS_MIN * char / slot)  # labels thin out below this

    body = [*_y_axis(ticks, y, left, right)]
    body.append(_tag("line", x1=left, x2=right, y1=bottom, y2=bottom, stroke=AXIS_COLOR))
    for index, (label, count) in enumerate(counts.items()):
        centre = left + (index + 0.5) * slot
        shapes = [
            _tag("title", _text(f"{_count_words(label, count, total)} {_clean(count_header)}"))
        ]
        if count:
            shapes.append(
                _tag(
                    "rect",
                    x=centre - thickness / 2,
                    y=y(count),
                    width=thickness,
                    height=bottom - y(count),
                    fill=ACCENT,
                    class_="chart-bar",
                )
            )
        if slot >= len(_fmt(count)) * char + 4:
            shapes.append(
                _tag(
                    "text",
                    _text(_fmt(count)),
                    x=centre,
                    y=y(count or 0) - 5,
                    text_anchor="middle",
                    font_size=SMALL_FONT_SIZE,
                )
            )
        if index % every == 0:
            shapes.append(
                _label(
                    label,
                    slot * every - 4,
                    SMALL_FONT_SIZE,
                    x=centre,
                    y=bottom + 16,
                    text_anchor="middle",
                )
            )
        body.append(_tag("g", *shapes))
    body.extend(
        _axis_titles(value_header, count_header, left, right, top, bottom, HISTOGRAM_HEIGHT)
    )
    desc = _counts_desc(counts, total, value_header, count_header)
    return Chart(svg=_svg(chart_id, title, desc, HISTOGRAM_HEIGHT, *body), header=header, rows=rows)


def stacked_bar(
    counts: Mapping[str, int | None],
    *,
    title: str,
    label_header: str = "status",
    count_header: str = "pairs",
    chart_id: str | None = None,
) -> Chart:
    """One bar split by share (pairs by status), with a legend giving each part in words."""
    chart_id = _chart_id(chart_id, title)
    total, header, rows = _count_table(counts, label_header, count_header)
    if not total:
        return _no_data(chart_id, title, header, rows)

    left, right, top = float(PAD), float(WIDTH - PAD), 8.0
    x = _scale((0, total), (left, right))
    per_row = int((right - left) // LEGEND_COLUMN)
    legend_top = top + STACK_HEIGHT + 16
    height = legend_top + math.ceil(len(counts) / per_row) * LEGEND_ROW + 4
    body: list[SafeString] = []
    done = 0
    for index, (label, count) in enumerate(counts.items()):
        fill, ink = PALETTE[index % len(PALETTE)]
        words = _count_words(label, count, total)
        if count:
            start, width = x(done), x(done + count) - x(done)
            done += count
            shapes = [
                _tag("title", _text(words)),
                _tag(
                    "rect",
                    x=start,
                    y=top,
                    width=width,
                    height=STACK_HEIGHT,
                    fill=fill,
                    stroke="#ffffff",
                    class_="chart-segment",
                ),
            ]
            name = _clean(label)
            if _fit(name, width - 8, SMALL_FONT_SIZE) == name:  # named inside when it fits whole
                shapes.append(
                    _tag(
                        "text",
                        _text(name),
                        x=start + width / 2,
                        y=top + STACK_HEIGHT / 2,
                        text_anchor="middle",
                        dominant_baseline="middle",
                        fill=ink,
                        font_size=SMALL_FONT_SIZE,
                    )
                )
            body.append(_tag("g", *shapes))
        at_x = left + (index % per_row) * LEGEND_COLUMN
        at_y = legend_top + (index // per_row) * LEGEND_ROW
        swatch = _swatch(at_x, at_y, fill)
        legend = _label(
            words,
            LEGEND_COLUMN - 24,
            SMALL_FONT_SIZE,
            x=at_x + 18,
            y=at_y + 6,
            dominant_baseline="middle",
        )
        body.append(_tag("g", swatch, legend))
    desc = _counts_desc(counts, total, label_header, count_header)
    return Chart(svg=_svg(chart_id, title, desc, height, *body), header=header, rows=rows)


# ---- Heatmap -----------------------------------------------------------------------------


def heatmap(
    labels: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
    *,
    title: str,
    value_header: str = "Cohen's kappa",
    missing_note: str = f"fewer than {MIN_SHARED_PAIRS_FOR_KAPPA} shared pairs, or undefined",
    chart_id: str | None = None,
    value_range: tuple[float, float] = (-1.0, 1.0),
    subject: str = "annotator",
) -> Chart:
    """A square matrix of values in ``value_range`` (Cohen's kappa between raters in -1..1, a
    win rate between models in 0..1) on a diverging scale with its legend, the range's middle
    white; missing cells are hatched. Cells shrink and labels thin out as ``subject``s (the
    rows and columns) grow in number."""
    chart_id = _chart_id(chart_id, title)
    low_end, high_end = value_range
    if not low_end < high_end:
        raise ValueError(f"value_range: {value_range} is empty")
    count = len(labels)
    if len(matrix) != count:
        raise ValueError(f"matrix: {len(matrix)} rows for {count} labels")
    for index, row in enumerate(matrix):
        if len(row) != count:
            raise ValueError(f"matrix: row {index} has {len(row)} values for {count} labels")
    values = [[_finite(value) for value in row] for row in matrix]
    # Colours are picked on -1..1: each value is placed there by the range.
    placed = [
        [None if v is None else 2 * (v - low_end) / (high_end - low_end) - 1 for v in row]
        for row in values
    ]
    header = (subject, "other", value_header)
    rows = tuple(
        (labels[i], labels[j], values[i][j]) for i in range(count) for j in range(count) if i != j
    )
    missing = sum(value is None for row in values for value in row)
    if missing == count * count:
        return _no_data(chart_id, title, header, rows)

    cell = min(HEATMAP_CELL_MAX, HEATMAP_SIZE / count)
    font_size = max(HEATMAP_FONT_MIN, min(SMALL_FONT_SIZE, cell * 0.85))
    every = math.ceil((font_size + 1) / cell)  # label every n-th rater so labels never overlap
    chars = min(HEATMAP_LABEL_CHARS, max(len(_clean(label)) for label in labels))
    label_width = chars * font_size * CHAR_WIDTH_EM
    left = top = PAD + label_width + 8
    side = cell * count
    titled = count <= HEATMAP_TITLED_MAX
    hatch = f"{chart_id}-missing"
    gradient = f"{chart_id}-scale"
    stops = (
        _tag("stop", offset=f"{(at + 1) / 2:.0%}", stop_color=color) for at, color in DIVERGING
    )
    body = [
        _tag("defs", _hatch(hatch, MISSING_COLOR), _tag("linearGradient", *stops, id=gradient)),
        # Missing cells show this hatched ground; only raters few enough get a cell each.
        _tag("rect", x=left, y=top, width=side, height=side, fill=f"url(#{hatch})"),
    ]
    if titled:
        cells = _titled_cells(
            labels, values, placed, left, top, cell, hatch, value_header, missing_note
        )
    else:
        cells = _painted_cells(placed, left, top, cell)
    body.append(_tag("g", *cells, class_="chart-cells"))
    for index, label in enumerate(labels[::every]):
        middle = (index * every + 0.5) * cell
        common = {"dominant_baseline": "middle"}
        body.append(
            _label(
                label,
                label_width,
                font_size,
                x=left - 6,
                y=top + middle,
                text_anchor="end",
                **common,
            )
        )
        turned = f"translate({_n(left + middle)} {_n(top - 6)}) rotate(-90)"
        body.append(_label(label, label_width, font_size, x=0, y=0, transform=turned, **common))

    legend_top = top + side + 20
    body.extend(_heatmap_legend(left, legend_top, gradient, hatch, missing_note, value_range))
    middle = (low_end + high_end) / 2
    desc = (
        f"{_clean(value_header)} between {count} {subject}s, from {_round_text(low_end)} (red) "
        f"through {_round_text(middle)} (white) to {_round_text(high_end)} (blue); {missing} of "
        f"{count * count} cells {NOT_AVAILABLE} ({_clean(missing_note)})"
    )
    if not titled:
        desc += f"; above {HEATMAP_TITLED_MAX} {subject}s cells have no tooltip, the table has them"
    return Chart(
        svg=_svg(chart_id, title, desc + ".", legend_top + 36, *body), header=header, rows=rows
    )


def _titled_cells(
    labels: Sequence[str],
    values: list[list[float | None]],
    placed: list[list[float | None]],
    left: float,
    top: float,
    cell: float,
    hatch: str,
    value_header: str,
    missing_note: str,
) -> list[SafeString]:
    """A rect per cell with its tooltip, missing cells hatched; ``placed`` holds each value
    moved to -1..1 for its colour."""
    cells = []
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            words = f"{_clean(labels[i])} \u00d7 {_clean(labels[j])}: {_clean(value_header)} "
            words += (
                _fmt(value) if value is not None else f"{NOT_AVAILABLE} ({_clean(missing_note)})"
            )
            tip = _tag("title", _text(words))
            at = (left + j * cell, top + i * cell)
            cells.append(_heatmap_cell(tip, value, placed[i][j], *at, cell, hatch))
    return cells


def _painted_cells(
    values: list[list[float | None]], left: float, top: float, cell: float
) -> list[SafeString]:
    """Too many cells for one element each: one path per colour, the value rounded to
    1/HEATMAP_COLOR_STEPS; missing cells leave the hatched ground showing."""
    squares: dict[str, list[str]] = {}
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            if value is not None:
                color = _diverging(round(value * HEATMAP_COLOR_STEPS) / HEATMAP_COLOR_STEPS)
                at = f"M{_n(left + j * cell)} {_n(top + i * cell)}"
                squares.setdefault(color, []).append(f"{at}h{_n(cell)}v{_n(cell)}h{_n(-cell)}z")
    return [_tag("path", d="".join(parts), fill=color) for color, parts in sorted(squares.items())]


def _heatmap_cell(
    tip: SafeString,
    value: float | None,
    placed: float | None,
    x: float,
    y: float,
    cell: float,
    hatch: str,
) -> SafeString:
    """One cell: its colour (hatched when missing) from its value ``placed`` on -1..1, its
    value printed when the cell is large enough."""
    fill = f"url(#{hatch})" if placed is None else _diverging(placed)
    grid = {"stroke": "#ffffff", "stroke_width": 0.5} if cell >= HEATMAP_GRID_CELL_MIN else {}
    shapes = [tip, _tag("rect", x=x, y=y, width=cell, height=cell, fill=fill, **grid)]
    if cell >= HEATMAP_VALUE_CELL_MIN:
        ink = "#ffffff" if placed is not None and abs(placed) > DARK_CELL else TEXT_COLOR
        shapes.append(
            _tag(
                "text",
                _text(NOT_AVAILABLE if value is None else f"{value:.2f}"),
                x=x + cell / 2,
                y=y + cell / 2,
                text_anchor="middle",
                dominant_baseline="middle",
                fill=ink,
                font_size=SMALL_FONT_SIZE - 1,
            )
        )
    return _tag("g", *shapes)


def _heatmap_legend(
    left: float,
    top: float,
    gradient: str,
    hatch: str,
    missing_note: str,
    value_range: tuple[float, float],
) -> list[SafeString]:
    """The colour scale over ``value_range`` with its ticks, and the hatch that marks n/a."""
    low_end, high_end = value_range
    shapes = [_swatch(left, top, f"url(#{gradient})", width=LEGEND_BAR_WIDTH, height=10)]
    for at, _ in DIVERGING:
        tick = left + (at + 1) / 2 * LEGEND_BAR_WIDTH
        value = low_end + (at + 1) / 2 * (high_end - low_end)
        shapes.append(_tag("line", x1=tick, x2=tick, y1=top + 10, y2=top + 14, stroke=AXIS_COLOR))
        shapes.append(_small(_round_text(value), x=tick, y=top + 25, text_anchor="middle"))
    note = left + LEGEND_BAR_WIDTH + 24
    shapes.append(_swatch(note, top - 1, f"url(#{hatch})"))
    shapes.append(
        _label(
            f"{NOT_AVAILABLE}: {missing_note}",
            WIDTH - PAD - note - 18,
            SMALL_FONT_SIZE,
            x=note + 18,
            y=top + 5,
            dominant_baseline="middle",
            fill=MUTED_COLOR,
        )
    )
    return shapes


def _swatch(x: float, y: float, fill: str, *, width: float = 12, height: float = 12) -> SafeString:
    """A legend's sample of a colour or pattern."""
    return _tag(
        "rect", x=x, y=y, width=width, height=height, fill=fill, stroke=AXIS_COLOR, stroke_width=0.5
    )


def _diverging(value: float) -> str:
    """The colour of ``value`` (clamped to -1..1) between the DIVERGING stops."""
    value = max(-1.0, min(1.0, value))
    for (low, low_color), (high, high_color) in itertools.pairwise(DIVERGING):
        if value <= high:
            t = (value - low) / (high - low)
            channels = (
                round(int(low_color[k : k + 2], 16) * (1 - t) + int(high_color[k : k + 2], 16) * t)
                for k in (1, 3, 5)
            )
            return "#" + "".join(f"{channel:02x}" for channel in channels)
    return DIVERGING[-1][1]
