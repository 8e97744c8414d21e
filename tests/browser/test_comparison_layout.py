"""The comparison page's one layout in Chromium at 1440 x 900, for a text-to-image, an edit,
an interleaved and a text pair: the vote buttons inside the window without scrolling, below
the responses; every response image centred in its card and, for single-image responses,
scaled to fit above the vote bar; the ``?`` dialog opening at its top."""

from __future__ import annotations

import pytest

from annotation.core.content import image_part, text_part
from annotation.models import PairStatus
from tests.annotation.queue.conftest import make_image
from tests.browser.conftest import log_in, wait_for_keys
from tests.factories import PairFactory, make_prompt, make_response

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PARAGRAPH = (
    "The answer walks through the problem one step at a time, naming each quantity before "
    "it is used and checking the units at the end, so a reader can follow every line. "
)


def _image(project, shade: int, size: tuple[int, int] = (512, 512)) -> dict:
    return image_part(make_image(project, (shade, 90, 200 - shade), size=size))


def _contents(project, task: str) -> tuple[list[dict], list[dict], list[dict]]:
    """(prompt, response a, response b) as the demo's tasks have them."""
    if task == "t2i":
        prompt = [text_part("A red circle above a blue square, on a white background")]
        return prompt, [_image(project, 10)], [_image(project, 60)]
    if task == "edit":
        prompt = [text_part("Make the circle green"), _image(project, 110)]
        return prompt, [_image(project, 10)], [_image(project, 60)]
    if task == "interleaved":

        def steps(shade: int) -> list[dict]:
            return [
                text_part("1. Draw the walls."),
                _image(project, shade, (320, 240)),
                text_part("2. Add the roof."),
                _image(project, shade + 20, (320, 240)),
                text_part("3. Paint the door."),
            ]

        return [text_part("Show how to draw a house in three steps")], steps(10), steps(60)
    prompt = [text_part("What is 17 times 23? Explain.")]
    return prompt, [text_part(PARAGRAPH * 12)], [text_part(PARAGRAPH * 9)]


def _pair(project, task: str):
    prompt, a, b = _contents(project, task)
    return PairFactory(
        project=project,
        task=task,
        status=PairStatus.QUEUED,
        prompt=make_prompt(project, "", prompt),
        response_a=make_response(project, "model-one", "", a),
        response_b=make_response(project, "model-two", "", b),
    )


LAYOUT = """() => {
    const box = (element) => {
        const r = element.getBoundingClientRect();
        return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
                centre: (r.left + r.right) / 2};
    };
    const card = (side) => document.querySelector(`.wb-${side}`);
    // A card's padding is the same on both sides: its centre is its box's.
    const images = Array.from(document.querySelectorAll(".wb-response img")).map(
        (image) => ({image: box(image), card: box(image.closest(".wb-response"))}));
    return {scrollY: scrollY, width: innerWidth, height: innerHeight,
            options: Array.from(document.querySelectorAll(".wb-option")).map(box),
            decide: box(document.querySelector(".wb-decide")),
            left: box(card("left")), right: box(card("right")), images: images};
}"""


@pytest.mark.parametrize("task", ["t2i", "edit", "interleaved", "text"])
def test_the_choices_are_in_the_window_and_images_centred_for_every_task(
    live_server, browser, project, alice, task, screenshot
):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        _pair(project, task)
        log_in(page, live_server, "alice", f"/p/{project.slug}/annotate/")
        wait_for_keys(page)
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('.wb-response img'))"
            ".every(i => i.complete && i.style.width)"
        )
        layout = page.evaluate(LAYOUT)
        screenshot(page, f"comparison-layout-{task}")

        assert layout["scrollY"] == 0
        assert len(layout["options"]) == 3
        for option in layout["options"]:
            assert option["top"] >= 0, (task, option)
            assert option["bottom"] <= layout["height"], (task, option)
            assert option["left"] >= 0, (task, option)
            assert option["right"] <= layout["width"], (task, option)
        # The same order on every task: the responses side by side, the choices under them.
        assert layout["left"]["right"] < layout["right"]["left"]
        assert layout["decide"]["top"] >= max(layout["left"]["top"], layout["right"]["top"])
        images = layout["images"]
        assert len(images) == (4 if task == "interleaved" else 0 if task == "text" else 2)
        for shown in images:
            assert shown["image"]["centre"] == pytest.approx(shown["card"]["centre"], abs=1.5)
        if task in ("t2i", "edit"):
            # Each response is one image: scaled to fit in full above the vote bar.
            for shown in images:
                assert shown["image"]["bottom"] <= layout["decide"]["top"], (task, shown)
                assert shown["image"]["bottom"] - shown["image"]["top"] > 250

        # The shortcuts dialog opens at its top: its heading in view, nothing scrolled.
        page.keyboard.press("?")
        page.wait_for_selector("#shortcuts-modal[open]")
        dialog = page.evaluate("""() => {
            const dialog = document.querySelector("#shortcuts-modal");
            const heading = dialog.querySelector("h2").getBoundingClientRect();
            const scrolled = [dialog, ...dialog.querySelectorAll("*")].map((e) => e.scrollTop);
            return {scrolled: Math.max(...scrolled), top: heading.top,
                    visible: dialog.getBoundingClientRect().top};
        }""")
        assert dialog["scrolled"] == 0
        assert dialog["top"] >= dialog["visible"] >= 0
    finally:
        context.close()
