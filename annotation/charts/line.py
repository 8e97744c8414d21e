"""A line with a band (an estimate and its interval over time or over a count), with reference
lines."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from annotation.charts.markup import (
    _T,
    ACCENT,
    ALPHA_REFERENCES,
    AXIS_COLOR,
    BAND_OPACITY,
    BAND_POINT_WIDTH,
    LINE_HEIGHT,
    LINE_LABELS_WIDTH,
    LINE_MARKERS_MAX,
    WIDTH,
    BandPoint,
    Cell,
    Chart,
    Reference,
    _axis_titles,
    _chart_id,
    _clean,
    _domain,
    _finite,
    _fmt,
    _n,
    _no_data,
    _reference,
    _reference_label,
    _round_text,
    _scale,
    _small,
    _svg,
    _tag,
    _text,
    _ticks,
    _y_axis,
)


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
