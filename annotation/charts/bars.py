"""Horizontal bars with intervals and flags, and the counts charts: a histogram and a stacked
bar."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from django.utils.safestring import SafeString

from annotation.charts.markup import (
    _UNPRINTABLE,
    ACCENT,
    AXIS_COLOR,
    BAR_LABEL_WIDTH,
    BAR_ROW,
    BAR_THICKNESS,
    BAR_VALUE_WIDTH_MAX,
    CHAR_WIDTH_EM,
    FLAG_BACKGROUND,
    FLAG_COLOR,
    FLAG_MARK,
    FONT_SIZE,
    GRID_COLOR,
    HISTOGRAM_BAR_MAX,
    HISTOGRAM_HEIGHT,
    HISTOGRAM_LABEL_CHARS_MIN,
    LEGEND_COLUMN,
    LEGEND_ROW,
    LINK_SCHEMES,
    PAD,
    PALETTE,
    REFERENCE_ROW,
    SMALL_FONT_SIZE,
    STACK_HEIGHT,
    TEXT_COLOR,
    WIDTH,
    Bar,
    Cell,
    Chart,
    Reference,
    _axis_titles,
    _chart_id,
    _clean,
    _domain,
    _finite,
    _fit,
    _fmt,
    _hatch,
    _label,
    _n,
    _no_data,
    _percent,
    _reference,
    _reference_label,
    _round_text,
    _scale,
    _share,
    _small,
    _svg,
    _swatch,
    _tag,
    _text,
    _ticks,
    _y_axis,
)


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
