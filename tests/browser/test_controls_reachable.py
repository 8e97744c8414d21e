"""Every control of the comparison page, for every task, at 1440 x 900 and at 1280 x 800:
each visible button, link, input, text box, player control, the 3D viewer's buttons and its
stage, brought into view as the browser brings a control into view (Tab, a find, a script:
the nearest edge), is the element at its own centre, never under the sticky vote bar or the
header; the 3D viewer's buttons show above the vote bar without scrolling; and the role
badge of the project's header stays on one line, the curator's thirteen tabs included
(docs/curators.md, "The comparison page")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from annotation.imports.importer import pairs_import
from annotation.models import Pair
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import audio_write, mesh_glb, sphere_glb, video_write
from tests.browser.conftest import log_in, wait_for_keys

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = [(1440, 900), (1280, 800)]
PARAGRAPH = (
    "The answer walks through the problem one step at a time, naming each quantity before "
    "it is used and checking the [units](https://example.org/units) at the end, so a reader "
    "can follow every line.\n\n"
)


def _image(folder: Path, name: str, shade: int, size: tuple[int, int] = (512, 512)) -> list:
    Image.new("RGB", size, (shade, 90, 200 - shade)).save(folder / name)
    return ["image", name]


def _video(folder: Path, name: str, frames: int) -> list:
    video_write(folder / name, frames=frames, rate=25, audio=False)
    return ["video", name]


def _audio(folder: Path, name: str, seconds: float) -> list:
    audio_write(folder / name, seconds=seconds)
    return ["audio", name]


def _contents(folder: Path, task: str) -> tuple[list, list, list]:
    """(prompt, response a, response b) of a pair of ``task`` in the import format."""
    ask = ["text", f"A prompt of the {task} task, one line long"]
    if task == "t2t":
        return [ask], [["text", PARAGRAPH * 12]], [["text", PARAGRAPH * 9]]
    if task == "t2i":
        return [ask], [_image(folder, "a.png", 10)], [_image(folder, "b.png", 60)]
    if task == "ti2i":
        prompt = [ask, _image(folder, "input.png", 110)]
        return prompt, [_image(folder, "a.png", 10)], [_image(folder, "b.png", 60)]
    if task == "interleaved":

        def steps(side: str, shade: int) -> list:
            return [
                ["text", "1. Draw the walls."],
                _image(folder, f"{side}1.png", shade, (320, 240)),
                ["text", "2. Add the roof."],
                _image(folder, f"{side}2.png", shade + 20, (320, 240)),
                ["text", "3. Paint the door."],
            ]

        return [ask], steps("a", 10), steps("b", 60)
    if task == "t2v":
        return [ask], [_video(folder, "a.mp4", 20)], [_video(folder, "b.mp4", 21)]
    if task == "t2a":
        return [ask], [_audio(folder, "a.wav", 0.5)], [_audio(folder, "b.wav", 0.52)]
    if task == "tv2t":
        prompt = [ask, _video(folder, "input.mp4", 20)]
        return prompt, [["text", PARAGRAPH * 3]], [["text", PARAGRAPH * 2]]
    if task == "ta2t":
        prompt = [ask, _audio(folder, "input.wav", 0.5)]
        return prompt, [["text", PARAGRAPH * 3]], [["text", PARAGRAPH * 2]]
    if task == "t23d":
        (folder / "a.glb").write_bytes(mesh_glb(base_colour=[1, 0, 0, 1]))
        (folder / "b.glb").write_bytes(sphere_glb(12, base_colour=[0, 0, 1, 1]))
        return [ask], [["model3d", "a.glb"]], [["model3d", "b.glb"]]
    assert task == "t23d-views"  # 3D responses given as rendered views, stepped together
    views = [[_image(folder, f"{side}{n}.png", 40 * n, (256, 256)) for n in range(3)]
             for side in "ab"]  # fmt: skip
    return [ask], views[0], views[1]


def _pair(project, folder: Path, task: str) -> None:
    prompt, a, b = _contents(folder, task)
    pair = text_pair("p-1", task=task.removesuffix("-views"))
    pair["prompt_content"] = prompt
    pair["response_a"]["response_content"] = a
    pair["response_b"]["response_content"] = b
    pairs_import(
        project=project, source=write_jsonl(folder / "pairs.jsonl", [pair]), media_root=folder
    )
    Pair.objects.filter(project=project).update(status="queued")


# Whether the card holds the vote bar's current height (--wb-decide-height, workbench.js).
BAR_HEIGHT_KEPT = """() => {
    const decide = document.querySelector("[data-pair-card] [data-decide]");
    const card = decide && decide.closest("[data-pair-card]");
    return Boolean(card)
        && card.style.getPropertyValue("--wb-decide-height") === `${decide.offsetHeight}px`;
}"""


# The page's visible controls, each brought into view at its nearest edge (as Tab brings a
# control into view), then asked what is at its centre: the control, or what covers it.
CONTROLS = """() => {
    const selector = "a[href], button, input:not([type=hidden]), textarea, select, summary, "
        + "video, audio, canvas[data-waveform], [data-model3d-stage]";
    const name = (element) => {
        const label = element.getAttribute("aria-label") || element.getAttribute("alt")
            || (element.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 40);
        return `${element.tagName.toLowerCase()}${element.className ? "." : ""}`
            + `${String(element.className).trim().replace(/\\s+/g, ".")} "${label}"`;
    };
    const seen = (control, how) => {
        const box = control.getBoundingClientRect();
        const x = (box.left + box.right) / 2, y = (box.top + box.bottom) / 2;
        const hit = document.elementFromPoint(x, y);
        return {control: name(control), how: how,
                inside: x >= 0 && x < innerWidth && y >= 0 && y < innerHeight,
                covered: hit === null || control.contains(hit) ? null : name(hit)};
    };
    const found = [];
    for (const control of document.querySelectorAll(selector)) {
        if (!control.checkVisibility({visibilityProperty: true})) continue;
        const first = control.getBoundingClientRect();
        if (first.width < 1 || first.height < 1) continue;
        control.scrollIntoView({block: "nearest", inline: "nearest", behavior: "instant"});
        found.push(seen(control, "scrolled into view"));
        if (control.tabIndex >= 0) {  // as Tab reaches it, from the top of the page
            scrollTo(0, 0);
            control.focus();
            found.push(seen(control, "focused"));
            control.blur();
        }
    }
    scrollTo(0, 0);
    return found;
}"""
# The 3D viewer's buttons (and the views' step buttons) as the page opens: in the window,
# each the element at its own centre.
AT_OPENING = """() => Array.from(document.querySelectorAll(
        ".m3d-bar button, .m3d-bar a, [data-views-step] button")).map((control) => {
    const box = control.getBoundingClientRect();
    const hit = document.elementFromPoint((box.left + box.right) / 2, (box.top + box.bottom) / 2);
    return {control: control.textContent.trim(), top: box.top, bottom: box.bottom,
            shown: hit !== null && control.contains(hit)};
})"""
# The project's header: its name and role badge, each one line of text; the badge inside the
# window, on the row of the name (not pushed under the tabs).
BADGE = """() => {
    const lines = (element) => {
        const range = document.createRange();
        range.selectNodeContents(element);
        return new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top))).size;
    };
    const badge = document.querySelector(".project-nav > .badge");
    const name = document.querySelector(".project-nav-name");
    const box = badge.getBoundingClientRect(), named = name.getBoundingClientRect();
    return {lines: lines(badge), name_lines: lines(name), left: box.left, right: box.right,
            width: innerWidth, beside_name: box.top < named.bottom && named.top < box.bottom};
}"""


def _shot(page, name: str) -> None:
    """With ARBITER_LAYOUT_SHOTS=<a folder outside the checkout>, saves the page there."""
    folder = os.environ.get("ARBITER_LAYOUT_SHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def _assert_badge_on_one_line(page, where: str) -> None:
    badge = page.evaluate(BADGE)
    assert badge["lines"] == 1, (where, badge)
    assert badge["name_lines"] == 1, (where, badge)
    assert badge["beside_name"], (where, badge)
    assert badge["left"] >= 0, (where, badge)
    assert badge["right"] <= badge["width"], (where, badge)


def _assert_reachable(page, where: str) -> None:
    controls = page.evaluate(CONTROLS)
    assert len(controls) > 10, where
    for control in controls:
        assert control["inside"], (where, control)
        assert control["covered"] is None, (where, control)


TASKS = ["t2t", "t2i", "ti2i", "interleaved", "t2v", "t2a", "tv2t", "ta2t", "t23d", "t23d-views"]


@pytest.mark.parametrize("task", TASKS)
def test_every_control_is_reachable_and_never_under_the_vote_bar(
    live_server, browser, project, alice, tmp_path, task
):
    _pair(project, tmp_path, task)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        log_in(page, live_server, "alice", f"/p/{project.slug}/annotate/")
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            page.reload()
            wait_for_keys(page)
            if task == "t23d":
                page.wait_for_selector("[data-model3d][data-model3d-state=ready] >> nth=1")
            if task in ("t2v", "t2a", "tv2t", "ta2t"):
                page.wait_for_selector("[data-deck]")
            if task == "t23d-views":
                page.wait_for_selector("[data-views-step]")
            page.wait_for_function(
                "() => Array.from(document.querySelectorAll('img[data-side]'))"
                ".every(i => i.complete)"
            )
            where = f"{task} at {width} x {height}"
            _shot(page, f"{task}-{width}x{height}")
            _assert_badge_on_one_line(page, where)

            _assert_reachable(page, where)
            if task == "t2t":
                # With the reason's box open the bar is taller: the pair stops above it still.
                page.locator("[data-reason-panel] summary").click()
                page.wait_for_selector("[data-reason-panel][open] textarea")
                # workbench.js keeps the bar's new height on the card from a ResizeObserver,
                # which a loaded machine may run a frame later: the check waits for it.
                page.wait_for_function(BAR_HEIGHT_KEPT)
                _assert_reachable(page, f"{where}, the reason's box open")
            at_opening = page.evaluate(AT_OPENING)
            assert bool(at_opening) == task.startswith("t23d"), where
            for control in at_opening:
                assert control["shown"], (where, control)
                assert control["top"] >= 0, (where, control)
                assert control["bottom"] <= height, (where, control)
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_the_curators_header_keeps_its_role_badge_on_one_line(
    live_server, browser, project, carol, size
):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        log_in(page, live_server, "carol", f"/p/{project.slug}/")
        tabs = page.locator(".project-tabs a")
        assert tabs.count() >= 13
        _shot(page, f"curator-header-{size[0]}x{size[1]}")
        _assert_badge_on_one_line(page, f"the curator's overview at {size[0]} x {size[1]}")
    finally:
        context.close()
