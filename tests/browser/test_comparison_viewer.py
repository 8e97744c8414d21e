"""The comparison page in Chromium at 1440 x 900: an edit pair (input | left | right) fits
without scrolling and the vote bar covers no response; the viewer zooms and pans the left,
right and input images together, flickers left and right in place and switches to natural
size, and on a touch screen pinches with two fingers and pans with one; keys pressed right
after a pair appears are ignored; an undone skip brings the pair back with the earlier reason
marked."""

from __future__ import annotations

import pytest

from annotation.models import Assignment, Skip, Vote
from tests.annotation.queue.conftest import secret_pair
from tests.browser.conftest import wait_for_keys
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VOTE_FORM = "[data-vote-form]"
# Where each pane's image sits inside its pane, and how large it is drawn.
PANE_GEOMETRY = """() => Array.from(document.querySelectorAll("[data-pane]")).map((pane) => {
    const box = pane.getBoundingClientRect();
    const image = pane.querySelector("img").getBoundingClientRect();
    return {side: pane.dataset.pane, x: image.left - box.left, y: image.top - box.top,
            width: image.width, height: image.height,
            src: pane.querySelector("img").getAttribute("src"),
            label: pane.querySelector(".wb-pane-label").textContent,
            pixelated: pane.querySelector("img").classList.contains("wb-pixelated")};
})"""


def log_in(page, live_server, project) -> None:
    page.goto(f"{live_server.url}/login/?next=/p/{project.slug}/annotate/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector(VOTE_FORM)
    page.wait_for_load_state("load")


def shown_id(page) -> int:
    return int(page.get_attribute(VOTE_FORM, "action").split("/annotate/")[1].split("/")[0])


def geometry(page) -> dict[str, dict]:
    return {pane["side"]: pane for pane in page.evaluate(PANE_GEOMETRY)}


def assert_together(panes: dict[str, dict]) -> None:
    """The three images (all 24 x 16) drawn at one size and one offset in their panes."""
    first = panes["left"]
    for pane in panes.values():
        for field in ("x", "y", "width", "height"):
            assert pane[field] == pytest.approx(first[field], abs=0.5), (pane, first)


def _wide_page(browser, **options):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, **options)
    context.set_default_timeout(15_000)
    return context, context.new_page()


@pytest.fixture
def wide_page(browser):
    context, page = _wide_page(browser)
    yield page
    context.close()


@pytest.fixture
def touch_page(browser):
    """A wide page on a touch screen: touch events, as a tablet's, reach the page."""
    context, page = _wide_page(browser, has_touch=True)
    yield page
    context.close()


def open_viewer(page) -> dict[str, dict]:
    """Opens the viewer with z and waits for its images; returns their geometry."""
    page.keyboard.press("z")
    page.wait_for_selector("#viewer[open] [data-pane='right'] img")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-pane] img')).every(i => i.complete)"
    )
    return geometry(page)


def test_edit_pair_fits_zooms_pans_flickers_and_undoes_a_skip(
    live_server, wide_page, project, alice, screenshot
):
    page = wide_page
    for n in range(3):
        secret_pair(project, n, with_images=True)  # a prompt with an input image: an edit
    log_in(page, live_server, project)

    # input | left | right in one row, the whole pair in the window, the vote bar below it all.
    assert page.locator(".wb-beside-input").count() == 1
    wait_for_keys(page)
    layout = page.evaluate("""() => {
        const box = (selector) => document.querySelector(selector).getBoundingClientRect();
        return {scroll: document.documentElement.scrollHeight, height: innerHeight,
                prompt: box(".wb-prompt"), left: box(".wb-left"), right: box(".wb-right"),
                decide: box(".wb-decide"), image: box(".wb-left img")};
    }""")
    assert layout["scroll"] <= layout["height"]
    assert layout["prompt"]["right"] <= layout["left"]["left"] < layout["right"]["left"]
    assert layout["prompt"]["top"] == pytest.approx(layout["left"]["top"], abs=1)
    assert layout["decide"]["top"] >= max(layout["left"]["bottom"], layout["right"]["bottom"])
    # Scaled up to fill the card (24 x 16 pixels at import), with hard pixel edges.
    assert layout["image"]["width"] > 200
    assert page.locator(".wb-left img.wb-pixelated").count() == 1
    screenshot(page, "comparison-edit")

    # The viewer: input, left and right, zoomed and panned together.
    fit = open_viewer(page)
    assert set(fit) == {"input", "left", "right"}
    assert_together(fit)
    page.keyboard.press("+")
    page.keyboard.press("+")
    zoomed = geometry(page)
    assert zoomed["left"]["width"] == pytest.approx(fit["left"]["width"] * 1.5625, rel=0.01)
    assert_together(zoomed)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    panned = geometry(page)
    assert panned["left"]["x"] < zoomed["left"]["x"]
    assert panned["left"]["y"] < zoomed["left"]["y"]
    assert_together(panned)
    # Dragging one pane moves all three.
    right = page.locator("[data-pane='right']").bounding_box()
    page.mouse.move(right["x"] + 200, right["y"] + 200)
    page.mouse.down()
    page.mouse.move(right["x"] + 260, right["y"] + 230, steps=4)
    page.mouse.up()
    dragged = geometry(page)
    assert dragged["input"]["x"] == pytest.approx(panned["input"]["x"] + 60, abs=1)
    assert dragged["input"]["y"] == pytest.approx(panned["input"]["y"] + 30, abs=1)
    assert_together(dragged)
    # The wheel zooms all of them too.
    page.mouse.move(right["x"] + 100, right["y"] + 100)
    page.mouse.wheel(0, -200)
    page.wait_for_function(
        "width => document.querySelector('[data-pane=input] img')"
        ".getBoundingClientRect().width > width + 1",
        arg=dragged["input"]["width"],
    )
    assert_together(geometry(page))
    screenshot(page, "comparison-viewer")

    # Flicker: the left pane shows the right image in place, and back.
    before = geometry(page)
    page.keyboard.press("f")
    flickered = geometry(page)
    assert flickered["left"]["src"] == before["right"]["src"]
    assert flickered["right"]["src"] == before["left"]["src"]
    assert flickered["left"]["label"].startswith("Right")
    assert_together(flickered)
    page.keyboard.press("f")
    assert geometry(page)["left"]["src"] == before["left"]["src"]

    # 0: natural size (one image pixel to one screen pixel), again: fit.
    page.keyboard.press("0")
    natural = geometry(page)
    assert natural["left"]["width"] == pytest.approx(24, abs=0.5)
    assert not natural["left"]["pixelated"]
    page.keyboard.press("0")
    assert geometry(page)["left"]["width"] == pytest.approx(fit["left"]["width"], abs=0.5)
    page.keyboard.press("Escape")
    assert not page.locator("dialog[open]").count()

    # Skip, then undo: the pair comes back with the reason given marked.
    skipped = shown_id(page)
    page.keyboard.press("s")
    page.keyboard.press("2")  # broken content
    page.wait_for_function(
        "previous => !document.querySelector('[data-vote-form]').action.includes(`/${previous}/`)",
        arg=skipped,
    )
    # A key pressed as the next pair appears was meant for the last one: it is ignored.
    page.keyboard.press("1")
    page.wait_for_timeout(400)
    assert not Vote.objects.filter(annotator=alice).exists()
    assert Skip.objects.get(annotator=alice).reason == "broken"
    wait_for_keys(page)
    page.keyboard.press("u")
    page.wait_for_selector("text=Your last skip was undone (you had chosen: Broken content)")
    assert shown_id(page) == skipped
    assert page.locator("[data-skip-key='2'].wb-chosen").count() == 1
    assert not Skip.objects.filter(annotator=alice).exists()
    assert Assignment.objects.get(pk=skipped).status == Assignment.Status.LIVE
    screenshot(page, "comparison-undone-skip")

    # Voting now works, and the confirmation says what was saved.
    wait_for_keys(page)
    page.keyboard.press("1")
    page.wait_for_selector("text=Saved: left is better")
    assert Vote.objects.get(annotator=alice).pair_id == Assignment.objects.get(pk=skipped).pair_id


def test_two_fingers_pinch_zoom_every_image_around_the_pinch_and_one_finger_pans(
    live_server, touch_page, project, alice
):
    """Touch points sent through Chromium's input pipeline (CDP Input.dispatchTouchEvent),
    as a touch screen sends them: two fingers spreading apart zoom all three images together,
    keeping the image point between the fingers under them as they move; one finger pans."""
    page = touch_page
    secret_pair(project, 0, with_images=True)
    log_in(page, live_server, project)
    wait_for_keys(page)
    fit = open_viewer(page)
    cdp = page.context.new_cdp_session(page)

    def touch(kind: str, *points: tuple[float, float]) -> None:
        touch_points = [{"x": x, "y": y, "id": n} for n, (x, y) in enumerate(points)]
        cdp.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": touch_points})

    pane = page.locator("[data-pane='right']").bounding_box()
    # The pinch starts a little off the pane's centre, on the image, and drifts right and down.
    start_x, start_y = pane["x"] + pane["width"] / 2 + 40, pane["y"] + pane["height"] / 2 + 20
    end_x, end_y = start_x + 40, start_y + 20
    right = fit["right"]
    share_x = (start_x - pane["x"] - right["x"]) / right["width"]
    share_y = (start_y - pane["y"] - right["y"]) / right["height"]
    touch("touchStart", (start_x - 30, start_y), (start_x + 30, start_y))
    steps = 6
    for step in range(1, steps + 1):
        x, y = (
            start_x + (end_x - start_x) * step / steps,
            start_y + (end_y - start_y) * step / steps,
        )
        half = 30 + 60 * step / steps  # the fingers end three times as far apart
        touch("touchMove", (x - half, y), (x + half, y))
    touch("touchEnd")
    pinched = geometry(page)
    assert pinched["right"]["width"] == pytest.approx(fit["right"]["width"] * 3, rel=0.01)
    assert_together(pinched)
    # The image point that was between the fingers is between them still, where they ended.
    right = pinched["right"]
    assert (end_x - pane["x"] - right["x"]) / right["width"] == pytest.approx(share_x, abs=0.005)
    assert (end_y - pane["y"] - right["y"]) / right["height"] == pytest.approx(share_y, abs=0.005)

    # One finger drags every image with it, at the same zoom.
    touch("touchStart", (start_x, start_y))
    for step in range(1, 5):
        touch("touchMove", (start_x - 15 * step, start_y - 10 * step))
    touch("touchEnd")
    dragged = geometry(page)
    assert dragged["input"]["x"] == pytest.approx(pinched["input"]["x"] - 60, abs=1)
    assert dragged["input"]["y"] == pytest.approx(pinched["input"]["y"] - 40, abs=1)
    assert dragged["input"]["width"] == pytest.approx(pinched["input"]["width"], abs=0.5)
    assert_together(dragged)
    assert page.locator("#viewer[open]").count() == 1
