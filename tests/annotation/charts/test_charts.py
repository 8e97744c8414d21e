"""The Agreement page's SVG charts (annotation/charts/) and their CSV downloads: valid SVG,
escaped text, nothing the strict CSP would block, and every edge the page meets (no data yet,
missing values, negative values, long labels, hundreds of annotators)."""

from __future__ import annotations

import csv
import io
import math
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from django.utils.safestring import mark_safe

from annotation.charts.bars import bars, histogram, stacked_bar
from annotation.charts.heatmap import heatmap
from annotation.charts.line import line_with_band
from annotation.charts.markup import ALPHA_REFERENCES, FLAG_MARK, NO_DATA, BandPoint, Bar, Chart
from annotation.core.spreadsheets import csv_response

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script>"
QUOTE_BREAK = '"onload=alert(1) x="'


def parse(chart: Chart) -> ET.Element:
    root = ET.fromstring(str(chart.svg))
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    """Every visible text of the chart, as a browser shows it (entities decoded)."""
    return ["".join(node.itertext()).strip() for node in root.iter(f"{SVG}text")]


def titles(root: ET.Element) -> list[str]:
    return [node.text or "" for node in root.iter(f"{SVG}title")]


def every_chart(label: str) -> list[Chart]:
    """One chart of each kind, with ``label`` in every place a caller's text can go."""
    at = datetime(2025, 3, 1, tzinfo=UTC)
    return [
        line_with_band(
            [BandPoint(30, 0.4, 0.2, 0.6), BandPoint(60, 0.7, 0.6, 0.8)],
            title=label,
            x_label=label,
            y_label=label,
            references=[*ALPHA_REFERENCES],
        ),
        line_with_band(
            [BandPoint(at, 0.5), BandPoint(at + timedelta(days=3), 0.6)], title=label, x_label=label
        ),
        bars(
            [Bar(label, 0.5, 0.4, 0.6, flags=(label,), href="/votes/?annotator=1"), Bar("b", -0.2)],
            title=label,
            label_header=label,
            value_header=label,
        ),
        heatmap([label, "b"], [[None, 0.5], [0.5, None]], title=label, value_header=label),
        histogram({label: 3, "2": 1}, title=label, value_header=label, count_header=label),
        stacked_bar({label: 3, "queued": 1}, title=label, label_header=label, count_header=label),
    ]


def empty_charts() -> list[Chart]:
    return [
        line_with_band([], title="alpha"),
        line_with_band([BandPoint(10, None), BandPoint(20, math.nan)], title="alpha"),
        bars([], title="per task"),
        bars([Bar("alice", None)], title="per annotator"),
        heatmap([], [], title="kappa"),
        heatmap(["alice", "bob"], [[None, None], [None, None]], title="kappa"),
        histogram({}, title="values"),
        histogram({"1": 0, "2": None}, title="values"),
        stacked_bar({}, title="status"),
    ]


# ---- SVG that parses, is accessible and passes the CSP ------------------------------------


def test_every_chart_is_valid_svg_labelled_for_screen_readers():
    for chart in every_chart("Agreement") + empty_charts():
        root = parse(chart)
        assert root.get("role") == "img"
        assert root.get("width") == "100%"
        assert re.fullmatch(r"0 0 720 [\d.]+", root.get("viewBox", ""))
        title_id, desc_id = root.get("aria-labelledby"), root.get("aria-describedby")
        title, desc = root[0], root[1]
        assert (title.tag, title.get("id")) == (f"{SVG}title", title_id)
        assert (desc.tag, desc.get("id")) == (f"{SVG}desc", desc_id)
        assert title.text
        assert desc.text


def test_no_script_no_event_handler_no_inline_style_anywhere():
    """CSP style-src 'self' forbids style attributes and <style>; nothing may run script."""
    for chart in every_chart("Agreement") + empty_charts():
        markup = str(chart.svg)
        assert not re.search(r"style\s*=|<style|<script|javascript:|<foreignObject", markup, re.I)
        for node in parse(chart).iter():
            assert node.tag not in {f"{SVG}script", f"{SVG}style", f"{SVG}foreignObject"}
            assert not [name for name in node.attrib if name.lower().startswith("on")]


@pytest.mark.parametrize("label", [HOSTILE, QUOTE_BREAK, mark_safe(HOSTILE)])
def test_hostile_labels_are_escaped_everywhere(label):
    """A label that is markup, breaks out of an attribute, or comes marked safe stays text."""
    for chart in every_chart(label):
        markup = str(chart.svg)
        assert "<script" not in markup
        assert 'onload="' not in markup
        root = parse(chart)
        for node in root.iter():
            assert node.tag != f"{SVG}script"
            assert "onload" not in node.attrib
        assert label in titles(root)[0]
        assert any(str(label)[:10] in text for text in texts(root) + titles(root)[1:])


def test_control_characters_in_labels_keep_the_svg_well_formed():
    chart = bars([Bar("al\x00ice\x0b\nsmith", 0.5)], title="per\x1b annotator")
    root = parse(chart)
    assert "al ice  smith" in texts(root)


def test_chart_ids_are_unique_per_title_and_checked():
    ids = {parse(chart).get("aria-labelledby") for chart in every_chart("x")[:1]}
    ids |= {parse(chart).get("aria-labelledby") for chart in every_chart("y")[:1]}
    assert len(ids) == 2
    chart = histogram({"1": 2}, title="values", chart_id="values-chart")
    assert parse(chart).get("aria-labelledby") == "values-chart-title"
    with pytest.raises(ValueError, match="chart_id"):
        histogram({"1": 2}, title="values", chart_id='x" onload="1')


# ---- Empty data and missing values --------------------------------------------------------


def test_empty_data_says_no_data_yet():
    for chart in empty_charts():
        root = parse(chart)
        assert texts(root) == [NO_DATA]
        assert NO_DATA in root[1].text


def test_the_table_keeps_rows_whose_values_are_missing():
    chart = line_with_band([BandPoint(10, None), BandPoint(20, math.nan, 0.1, math.inf)], title="a")
    assert chart.header == ("votes", "alpha", "95% low", "95% high")
    assert chart.rows == ((10, None, None, None), (20, None, 0.1, None))
    assert bars([Bar("alice", None)], title="b").rows == (("alice", None),)


def test_a_gap_in_the_line_where_a_value_is_missing():
    points = [BandPoint(n * 10, None if n == 2 else 0.5 + n / 20) for n in range(5)]
    root = parse(line_with_band(points, title="alpha"))
    assert len(list(root.iter(f"{SVG}polyline"))) == 2
    assert len(list(root.iter(f"{SVG}circle"))) == 4


def test_a_bar_without_a_value_is_labelled_n_a_and_drawn_empty():
    root = parse(bars([Bar("alice", 0.8), Bar("bob", None)], title="per annotator"))
    assert (
        len([rect for rect in root.iter(f"{SVG}rect") if "chart-bar" in rect.get("class", "")]) == 1
    )
    assert "bob" in texts(root)
    assert "n/a" in texts(root)


def test_a_count_that_is_unknown_or_negative():
    chart = histogram({"1": 3, "2": None}, title="values")
    assert chart.rows == (("1", 3, 1.0), ("2", None, None))
    assert "n/a" in texts(parse(chart))
    with pytest.raises(ValueError, match=r"counts: '2' has -1"):
        histogram({"1": 3, "2": -1}, title="values")


# ---- Axes, negative values, intervals, references -----------------------------------------


def tick_labels(root: ET.Element) -> list[str]:
    return [node.text or "" for node in root.iter(f"{SVG}text") if node.get("font-size") == "11"]


def test_alpha_axis_runs_from_below_the_lowest_value_to_one_with_labelled_thresholds():
    points = [BandPoint(100, -0.15, -0.35, 0.05), BandPoint(200, 0.72, 0.66, 0.78)]
    root = parse(line_with_band(points, title="alpha over votes"))
    labels = tick_labels(root)
    assert "-0.4" in labels
    assert "1" in labels
    assert "0" in labels
    assert "tentative (0.667)" in labels
    assert "good (0.8)" in labels
    assert (
        len([line for line in root.iter(f"{SVG}line") if line.get("class") == "chart-reference"])
        == 2
    )
    assert len(list(root.iter(f"{SVG}polygon"))) == 1  # the band


def test_alpha_over_time_labels_dates_and_refuses_mixed_axes():
    at = datetime(2025, 3, 1, 9, tzinfo=UTC)
    points = [BandPoint(at + timedelta(days=day), 0.5 + day / 50) for day in range(10)]
    chart = line_with_band(points, title="alpha over time", x_label="time")
    assert "2025-03-01" in tick_labels(parse(chart))
    assert chart.rows[0][0] == "2025-03-01T09:00:00+00:00"
    with pytest.raises(ValueError, match="points: x must be numbers"):
        line_with_band([BandPoint(at, 0.5), BandPoint(10, 0.5)], title="alpha")


def test_negative_bars_grow_left_of_zero_with_their_whiskers():
    chart = bars(
        [Bar("reasoning", -0.4, -0.6, -0.1), Bar("editing", 0.6, 0.5, 0.7)], title="per task"
    )
    root = parse(chart)
    zero = next(
        float(line.get("x1"))
        for line in root.iter(f"{SVG}line")
        if line.get("stroke") == "#667085" and line.get("x1") == line.get("x2")
    )
    negative, positive = [
        rect for rect in root.iter(f"{SVG}rect") if rect.get("class") == "chart-bar"
    ]
    assert float(negative.get("x")) + float(negative.get("width")) == pytest.approx(zero)
    assert float(positive.get("x")) == pytest.approx(zero)
    assert len(list(root.iter(f"{SVG}path"))) == 2  # whiskers
    assert "-0.400 [-0.600, -0.100]" in texts(root)
    assert chart.header == ("label", "value", "95% low", "95% high")
    assert chart.rows[0] == ("reasoning", -0.4, -0.6, -0.1)


def test_reference_labels_of_bars_do_not_overlap():
    root = parse(bars([Bar("t2i", 0.7)], title="per task", references=ALPHA_REFERENCES))
    labels = [node for node in root.iter(f"{SVG}text") if "(0." in (node.text or "")]
    assert len(labels) == 2
    assert labels[0].get("y") != labels[1].get("y")


# ---- Highlights and links -----------------------------------------------------------------


def test_a_flagged_bar_is_hatched_and_marked_in_words_not_colour_alone():
    chart = bars(
        [Bar("alice", 0.8), Bar("bob", 0.3, flags=("low agreement", "too fast"))],
        title="per annotator",
        label_header="annotator",
    )
    root = parse(chart)
    normal, flagged = [
        rect for rect in root.iter(f"{SVG}rect") if "chart-bar" in rect.get("class", "")
    ]
    assert normal.get("fill") == "#3b5bdb"
    assert normal.get("stroke") is None
    assert flagged.get("fill", "").startswith("url(#")
    assert flagged.get("stroke")
    shown = texts(root)
    assert f"{FLAG_MARK} bob" in shown
    assert f"0.300 {FLAG_MARK} low agreement, too fast" in shown
    assert "alice" in shown
    assert "0.800" in shown
    assert "flagged: bob" in root[1].text
    assert chart.header == ("annotator", "value", "flags")
    assert chart.rows == (("alice", 0.8, ""), ("bob", 0.3, "low agreement, too fast"))


def test_bars_link_to_their_votes_with_the_href_escaped():
    href = '/projects/demo/votes/?annotator=a&b"c'
    chart = bars([Bar("alice", 0.8, href=href), Bar("bob", 0.5)], title="per annotator")
    assert 'href="/projects/demo/votes/?annotator=a&amp;b&quot;c"' in str(chart.svg)
    links = list(parse(chart).iter(f"{SVG}a"))
    assert [link.get("href") for link in links] == [href]
    assert "alice" in texts(links[0])


@pytest.mark.parametrize(
    "href", ["javascript:alert(1)", " JavaScript:alert(1)", "data:text/html,x"]
)
def test_a_link_that_is_not_a_web_link_is_refused(href):
    with pytest.raises(ValueError, match=r"href: .* is not a web link"):
        bars([Bar("alice", 0.8, href=href)], title="per annotator")


def test_a_long_label_is_cut_with_an_ellipsis_and_kept_whole_in_its_tooltip():
    long = "interleaved text and image generation across " * 4
    root = parse(bars([Bar(long, 0.5)], title="per task"))
    label = next(node for node in root.iter(f"{SVG}text") if node.find(f"{SVG}title") is not None)
    assert label.find(f"{SVG}title").text == long.strip()
    shown = "".join(label.itertext()).replace(long.strip(), "")
    assert shown.endswith("\u2026")
    assert len(shown) < 40


# ---- Heatmap ------------------------------------------------------------------------------


def test_heatmap_cells_without_kappa_are_hatched_and_say_n_a():
    chart = heatmap(
        ["alice", "bob", "carol"],
        [[None, 0.62, None], [0.62, None, -0.3], [None, -0.3, None]],
        title="Cohen's kappa",
    )
    root = parse(chart)
    cell_titles = [title for title in titles(root) if "\u00d7" in title]
    assert "alice \u00d7 bob: Cohen's kappa 0.620" in cell_titles
    assert "alice \u00d7 carol: Cohen's kappa n/a (fewer than 20 shared pairs, or undefined)" in (
        cell_titles
    )
    missing = [
        rect for rect in root.iter(f"{SVG}rect") if rect.get("fill", "").endswith("-missing)")
    ]
    assert len(missing) >= 5  # four n/a cells, the diagonal's three, the ground and the legend
    assert "n/a: fewer than 20 shared pairs, or undefined" in texts(root)
    assert ("alice", "carol", None) in chart.rows
    assert ("bob", "carol", -0.3) in chart.rows
    assert len(chart.rows) == 6


def test_heatmap_colours_diverge_from_white_at_zero():
    root = parse(heatmap(["a", "b", "c"], [[1.0, 0.0, -1.0]] * 3, title="kappa"))
    fills = [
        rect.get("fill")
        for rect in root.iter(f"{SVG}rect")
        if rect.get("fill", "").startswith("#") and rect.get("width") == "36"
    ]
    assert fills[:3] == ["#2166ac", "#f7f7f7", "#b2182b"]


def test_heatmap_of_hundreds_of_annotators_shrinks_cells_and_thins_labels():
    count = 300
    labels = [f"annotator-{index:03d}" for index in range(count)]
    matrix = [
        [None if (i + j) % 3 == 0 else ((i * j) % 21 - 10) / 10 for j in range(count)]
        for i in range(count)
    ]
    chart = heatmap(labels, matrix, title="Cohen's kappa")
    markup = str(chart.svg)
    assert len(markup) < 2_000_000
    root = parse(chart)
    row_labels = [node for node in root.iter(f"{SVG}text") if node.get("text-anchor") == "end"]
    assert 10 < len(row_labels) < count
    assert "the table has them" in root[1].text
    assert len(chart.rows) == count * (count - 1)


def test_heatmap_refuses_a_matrix_that_does_not_match_its_labels():
    with pytest.raises(ValueError, match="matrix: row 1 has 1 values for 2 labels"):
        heatmap(["a", "b"], [[None, 1.0], [1.0]], title="kappa")
    with pytest.raises(ValueError, match="matrix: 1 rows for 2 labels"):
        heatmap(["a", "b"], [[None, 1.0]], title="kappa")


# ---- Histogram and stacked bar ------------------------------------------------------------


def test_histogram_draws_each_value_in_order_with_its_count():
    chart = histogram({"1": 10, "2": 0, "3": 30}, title="likert values", value_header="value")
    root = parse(chart)
    assert len([rect for rect in root.iter(f"{SVG}rect") if rect.get("class") == "chart-bar"]) == 2
    shown = texts(root)
    assert shown.index("1") < shown.index("2") < shown.index("3")
    assert "30" in shown
    assert "0" in shown
    assert chart.rows == (("1", 10, 0.25), ("2", 0, 0.0), ("3", 30, 0.75))


def test_stacked_bar_gives_every_status_in_words_in_its_legend():
    chart = stacked_bar(
        {"queued": 300, "consensus": 600, "disputed": 100, "easy": 0}, title="pairs"
    )
    root = parse(chart)
    segments = [rect for rect in root.iter(f"{SVG}rect") if rect.get("class") == "chart-segment"]
    assert len(segments) == 3
    widths = [float(segment.get("width")) for segment in segments]
    assert widths[1] == pytest.approx(2 * widths[0])
    assert widths[0] == pytest.approx(3 * widths[2])
    shown = texts(root)
    for words in ("queued: 300 (30.0%)", "consensus: 600 (60.0%)", "easy: 0 (0.0%)"):
        assert words in shown
    assert chart.header == ("status", "pairs", "share")


# ---- CSV ----------------------------------------------------------------------------------


def read_csv(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_csv_of_a_chart_is_its_table():
    chart = bars([Bar("=cmd", -0.2, flags=("-x",)), Bar("bob", 0.7)], title="per annotator")
    assert read_csv(csv_response("per-annotator.csv", chart.header, chart.rows)) == [
        ["label", "value", "flags"],
        ["'=cmd", "-0.2", "'-x"],
        ["bob", "0.7", ""],
    ]
