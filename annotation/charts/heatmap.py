"""A heatmap of a square matrix (kappa between raters), with its legend."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from django.utils.safestring import SafeString

from annotation.charts.markup import (
    AXIS_COLOR,
    CHAR_WIDTH_EM,
    DARK_CELL,
    DIVERGING,
    HEATMAP_CELL_MAX,
    HEATMAP_COLOR_STEPS,
    HEATMAP_FONT_MIN,
    HEATMAP_GRID_CELL_MIN,
    HEATMAP_LABEL_CHARS,
    HEATMAP_SIZE,
    HEATMAP_TITLED_MAX,
    HEATMAP_VALUE_CELL_MIN,
    LEGEND_BAR_WIDTH,
    MISSING_COLOR,
    MUTED_COLOR,
    NOT_AVAILABLE,
    PAD,
    SMALL_FONT_SIZE,
    TEXT_COLOR,
    WIDTH,
    Chart,
    _chart_id,
    _clean,
    _finite,
    _fmt,
    _hatch,
    _label,
    _n,
    _no_data,
    _round_text,
    _small,
    _svg,
    _swatch,
    _tag,
    _text,
)
from annotation.core.scales import MIN_SHARED_PAIRS_FOR_KAPPA


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
