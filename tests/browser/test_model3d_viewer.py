"""3D models in Chromium (WebGL through SwiftShader): on the comparison page and the pair
page both models are drawn and seen through one camera (orbit one, with the mouse or a key,
and the other follows), reset, wireframe and turntable act on both; where WebGL is missing
the page says so and shows the rendered views; two responses given as rendered views are
stepped together, view k beside view k (docs/import-format.md, "3D models")."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from annotation.imports.importer import pairs_import
from annotation.models import Pair
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import mesh_glb, sphere_glb, textured_glb
from tests.browser.conftest import log_in, page_errors, wait_for_keys

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READY = "[data-model3d][data-model3d-state=ready]"
NO_WEBGL = """
    HTMLCanvasElement.prototype.getContext = function () { return null; };
"""


def _pair(project, tmp_path, left: list, right: list, *, task: str) -> Pair:
    pair = text_pair("m-1", task=task)
    pair["response_a"]["response_content"] = left
    pair["response_b"]["response_content"] = right
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", [pair]), media_root=tmp_path
    )
    pair = Pair.objects.get(project=project)
    Pair.objects.filter(pk=pair.pk).update(status="queued")
    return pair


@pytest.fixture
def models_pair(project, tmp_path) -> Pair:
    (tmp_path / "red.glb").write_bytes(mesh_glb(base_colour=[1, 0, 0, 1]))
    (tmp_path / "blue.glb").write_bytes(sphere_glb(24, base_colour=[0, 0, 1, 1]))
    return _pair(project, tmp_path, [["model3d", "red.glb"]], [["model3d", "blue.glb"]],
                 task="t23d")  # fmt: skip


def cameras(page) -> list[list[float]]:
    return page.evaluate("window.arbiterModel3d.cameras()")


def assert_linked(page) -> list[float]:
    first, second = cameras(page)
    assert first == pytest.approx(second, abs=1e-9)
    targets = page.evaluate("window.arbiterModel3d.targets()")
    assert targets[0] == pytest.approx(targets[1], abs=1e-9)
    return first


def drag(page, selector: str, dx: int, dy: int) -> None:
    box = page.locator(selector).bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    for step in range(1, 6):
        page.mouse.move(x + dx * step / 5, y + dy * step / 5)
    page.mouse.up()


def stage_pixels(page, index: int) -> np.ndarray:
    """What the page shows of a model's canvas (cut from a screenshot of the whole page)."""
    box = page.locator("[data-model3d-stage]").nth(index).bounding_box()
    shot = np.asarray(Image.open(io.BytesIO(page.screenshot())).convert("RGB")).astype(int)
    top, left = int(box["y"]), int(box["x"])
    return shot[top : top + int(box["height"]), left : left + int(box["width"])]


def coloured(pixels: np.ndarray, channel: int) -> int:
    others = [c for c in range(3) if c != channel]
    return int(
        ((pixels[..., channel] > 100) & (pixels[..., others[0]] < 60)
         & (pixels[..., others[1]] < 60)).sum()
    )  # fmt: skip


def _check_viewers(page) -> None:
    page.wait_for_selector(f"{READY} >> nth=1")
    page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    # WebGL drew each model in its own colour: the red cube on one side, the blue sphere on
    # the other (which side is the assignment's draw).
    shown = [stage_pixels(page, index) for index in (0, 1)]
    reds, blues = [coloured(pixels, 0) for pixels in shown], [coloured(p, 2) for p in shown]
    assert sorted(reds)[0] == 0
    assert sorted(reds)[1] > 2000
    assert sorted(blues)[0] == 0
    assert sorted(blues)[1] > 2000
    assert reds.index(max(reds)) != blues.index(max(blues))
    home = assert_linked(page)
    # Orbit the left one with the mouse: the right one follows.
    drag(page, "[data-model3d-stage] >> nth=0", 120, 30)
    dragged = assert_linked(page)
    assert dragged != pytest.approx(home, abs=1e-3)
    # Orbit the right one: the left one follows.
    drag(page, "[data-model3d-stage] >> nth=1", -60, 0)
    assert assert_linked(page) != pytest.approx(dragged, abs=1e-3)
    # A key orbits both; c resets both to where they started.
    page.keyboard.press("l")
    keyed = assert_linked(page)
    page.keyboard.press("c")
    assert assert_linked(page) == pytest.approx(home, abs=1e-6)
    assert keyed != pytest.approx(home, abs=1e-3)
    # Wireframe on and off, on both models, the buttons saying which.
    page.keyboard.press("w")
    assert all(all(flags) for flags in page.evaluate("window.arbiterModel3d.wireframes()"))
    pressed = page.locator("[data-model3d-action=wireframe][aria-pressed=true]")
    assert pressed.count() == 2
    page.locator("[data-model3d-action=wireframe]").first.click()
    assert not any(any(flags) for flags in page.evaluate("window.arbiterModel3d.wireframes()"))
    # The turntable turns both cameras together until stopped.
    page.locator("[data-model3d-action=turntable]").nth(1).click()
    page.wait_for_timeout(400)
    turning = assert_linked(page)
    assert turning != pytest.approx(home, abs=1e-3)
    page.keyboard.press("t")
    stopped = assert_linked(page)
    page.wait_for_timeout(200)
    assert assert_linked(page) == pytest.approx(stopped, abs=1e-9)


def test_the_comparison_page_links_the_two_cameras(page, live_server, project, alice, models_pair):
    errors = page_errors(page)
    log_in(page, live_server, "alice", f"/p/{project.slug}/annotate/")
    wait_for_keys(page)
    _check_viewers(page)
    # The keys are listed under "?".
    page.keyboard.press("?")
    shortcuts = page.locator("#shortcuts-modal")
    for words in ("Reset the 3D view", "Wireframe", "Turntable", "Orbit", "Previous and next view"):
        assert words in shortcuts.inner_text()
    assert errors == []


@pytest.mark.parametrize("where", ["pairs", "adjudication"])
def test_the_pair_and_adjudication_pages_link_the_two_cameras(
    page, live_server, project, carol, models_pair, where
):
    errors = page_errors(page)
    log_in(page, live_server, "carol", f"/p/{project.slug}/{where}/{models_pair.pk}/")
    _check_viewers(page)
    assert errors == []


def test_an_embedded_texture_is_drawn_within_the_csp(page, live_server, project, carol, tmp_path):
    # three.js would read it through a blob: URL, which connect-src 'self' refuses.
    (tmp_path / "t.glb").write_bytes(textured_glb((0, 255, 0)))
    pair = _pair(project, tmp_path, [["model3d", "t.glb"]], [["model3d", "t.glb"]], task="t23d")
    errors = page_errors(page)
    log_in(page, live_server, "carol", f"/p/{project.slug}/pairs/{pair.pk}/")
    page.wait_for_selector(f"{READY} >> nth=1")
    page.wait_for_function("() => new Promise((done) => requestAnimationFrame(() => done(true)))")
    page.wait_for_timeout(300)
    assert coloured(stage_pixels(page, 0), 1) > 2000  # green, from the texture only
    assert errors == []


def test_without_webgl_the_page_says_so_and_shows_the_rendered_views(
    page, live_server, project, alice, models_pair
):
    page.add_init_script(NO_WEBGL)
    log_in(page, live_server, "alice", f"/p/{project.slug}/annotate/")
    page.wait_for_selector("[data-model3d][data-model3d-state=no-webgl] >> nth=1")
    status = page.locator("[data-model3d-status]").first.inner_text()
    assert "WebGL is unavailable" in status
    assert "rendered at import" in status
    views = page.locator("[data-model3d-views][open] img")
    assert views.count() == 12
    # Visible is not loaded: wait for the first view's pixels (fails on timeout if never decoded).
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=views.first.element_handle()
    )


def _visible_views(page) -> dict[str, list[str]]:
    return page.evaluate("""() => Object.fromEntries(["left", "right"].map((side) => [side,
        Array.from(document.querySelectorAll(`.wb-${side} .wb-figure`))
            .filter((figure) => figure.offsetParent !== null)
            .map((figure) => figure.querySelector("img").alt)]))""")


def test_rendered_views_are_stepped_together_view_by_view(
    page, live_server, project, alice, tmp_path
):
    for side in ("a", "b"):
        for number in range(3):
            shade = (40 + 60 * number, 0 if side == "a" else 200, 90)
            Image.new("RGB", (24, 24), shade).save(tmp_path / f"{side}{number}.png")
    left = [["image", f"a{n}.png"] for n in range(3)]
    right = [["image", f"b{n}.png"] for n in range(3)]
    _pair(project, tmp_path, left, right, task="t23d")
    errors = page_errors(page)
    log_in(page, live_server, "alice", f"/p/{project.slug}/annotate/")
    wait_for_keys(page)
    page.wait_for_selector("[data-views-step]")
    label = page.locator("[data-views-label]")

    def shown(number: int) -> None:
        assert label.inner_text() == f"View {number} of 3"
        assert _visible_views(page) == {
            "left": [f"Image {number} of the left"],
            "right": [f"Image {number} of the right"],
        }

    shown(1)
    page.keyboard.press("]")
    shown(2)
    page.locator("[data-views-action=next]").click()
    shown(3)
    page.keyboard.press("]")
    shown(1)  # round again
    page.keyboard.press("[")
    shown(3)
    page.locator("[data-views-action=previous]").click()
    shown(2)
    assert errors == []
