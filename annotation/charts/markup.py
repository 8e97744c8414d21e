"""The charts' shared pieces: the ``Chart`` a chart function returns, its inputs (``Bar``,
``BandPoint``, ``Reference``), the sizes and colours, escaped SVG markup and number formats.

SVG markup is built only from escaped text and numbers this package formats, with no script
and no inline style (the CSP's ``style-src 'self'`` holds). What each chart shows:
``docs/agreement.md``."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

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


def _swatch(x: float, y: float, fill: str, *, width: float = 12, height: float = 12) -> SafeString:
    """A legend's sample of a colour or pattern."""
    return _tag(
        "rect", x=x, y=y, width=width, height=height, fill=fill, stroke=AXIS_COLOR, stroke_width=0.5
    )
