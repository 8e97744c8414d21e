"""A binary glTF model's views rendered at import by the numpy rasteriser, checked on
hand-worked cases, stored as image media, and the models it cannot draw refused as line
errors (docs/import-format.md, "3D models")."""

from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from PIL import Image

from annotation.core.media_keys import media_path
from annotation.imports.errors import ImportFailed
from annotation.media.glb import GlbError, glb_inspect
from annotation.media.glb_render import (
    AMBIENT,
    BACKGROUND,
    FILL,
    LIGHT_OFFSET,
    VIEWS,
    glb_render_views,
)
from annotation.media.services import served_copy_make
from annotation.models import Media, Pair, ProjectMedia
from tests.annotation.imports.conftest import assert_nothing_imported
from tests.annotation.media.conftest import CUBE_POSITIONS, glb_bytes, mesh_glb
from tests.annotation.media.test_import_av import import_media, media_pair, original_path

SIZE = 64


def _views(data: bytes) -> list[np.ndarray]:
    return [
        np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        for png in glb_render_views(glb_inspect(data), size=SIZE)
    ]


def _drawn(image: np.ndarray) -> np.ndarray:
    return (image != BACKGROUND).any(axis=2)


def _srgb8(linear: float) -> int:
    return round(255 * (1.055 * linear ** (1 / 2.4) - 0.055))


def test_a_unit_cube_seen_from_the_front_covers_the_pixels_worked_out_by_hand():
    front = _views(mesh_glb(base_colour=[1.0, 0.0, 0.0, 1.0]))[0]
    # The box's half-diagonal (sqrt(3) / 2) fills FILL of half the image: a face 1 wide
    # spans 32 * 0.9 / 0.866 = 33.26 pixels, from 32 - 16.63 to 32 + 16.63, so the centres
    # of pixels 15 to 48 lie inside it.
    scale = SIZE / 2 * FILL / (math.sqrt(3) / 2)
    first, last = math.ceil(SIZE / 2 - scale / 2 - 0.5), math.floor(SIZE / 2 + scale / 2 - 0.5)
    assert (first, last) == (15, 48)
    expected = np.zeros((SIZE, SIZE), bool)
    expected[first : last + 1, first : last + 1] = True
    assert (_drawn(front) == expected).all()
    # The face turned to the camera, lit from the camera moved up and to the left: Lambert's
    # cosine between its normal (0, 0, 1) and the light (0.3, 0.5, 1) / |...|.
    light = np.array([-LIGHT_OFFSET[0], LIGHT_OFFSET[1], 1.0])
    shade = AMBIENT + (1 - AMBIENT) * light[2] / np.linalg.norm(light)
    assert tuple(front[32, 32]) == (_srgb8(shade), 0, 0)
    assert tuple(front[0, 0]) == BACKGROUND


def test_the_nearest_face_hides_the_others_and_vertex_colours_are_drawn():
    # The front corners (z = +0.5) green, the back ones blue: the +z face is green, -z blue.
    colours = np.where(CUBE_POSITIONS[:, 2:] > 0, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0])
    views = dict(
        zip([name for name, _, _ in VIEWS], _views(mesh_glb(colours=colours)), strict=True)
    )
    front, back = views["front"][32, 32], views["back"][32, 32]
    assert front[1] > 100
    assert front[0] == front[2] == 0
    assert back[2] > 100
    assert back[0] == back[1] == 0
    # From the side, each of the face's two triangles has the mean colour of its corners:
    # two green and one blue, or one green and two blue.
    side = views["right"]
    colours_drawn = {tuple(int(v) for v in pixel) for pixel in side[_drawn(side)]}
    assert len(colours_drawn) == 2
    (r1, g1, b1), (r2, g2, b2) = sorted(colours_drawn)
    assert r1 == r2 == 0
    assert (g1, b1) == (b2, g2)
    assert g1 != b1


def test_node_transforms_are_applied():
    # Scaled twice as wide: from the front, a box twice as wide as it is high.
    front, top = _views(mesh_glb(node={"scale": [2, 1, 1]}))[0:5:4]
    rows, columns = np.nonzero(_drawn(front))
    width, height = columns.max() - columns.min() + 1, rows.max() - rows.min() + 1
    assert width == pytest.approx(2 * height, abs=2)
    # Turned a quarter round y (quaternion), the long side runs front to back: from above it
    # is tall, not wide.
    turned = _views(mesh_glb(node={"scale": [2, 1, 1], "rotation": [0, 0.7071068, 0, 0.7071068]}))
    rows, columns = np.nonzero(_drawn(turned[4]))
    assert rows.max() - rows.min() == pytest.approx(2 * (columns.max() - columns.min()), abs=3)
    assert _drawn(top).sum() == pytest.approx(_drawn(turned[4]).sum(), rel=0.05)


def test_a_strip_and_a_fan_are_drawn_like_the_list_of_their_triangles():
    square = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32)
    listed = _views(mesh_glb(square, np.array([0, 1, 2, 2, 1, 3], np.uint16)))[0]
    strip = _views(mesh_glb(square, np.array([0, 1, 2, 3], np.uint16), mode=5))[0]
    fan = _views(mesh_glb(square, np.array([0, 1, 3, 2], np.uint16), mode=6))[0]
    assert (_drawn(listed) == _drawn(strip)).all()
    assert (_drawn(listed) == _drawn(fan)).all()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (mesh_glb(mode=0), "its scene has no triangles"),
        (mesh_glb(document_extra={"nodes": [{}]}), "its scene has no triangles"),
        (
            mesh_glb(document_extra={"extensionsRequired": ["KHR_draco_mesh_compression"],
                                     "extensionsUsed": ["KHR_draco_mesh_compression"]}),
            "compressed with Draco",
        ),
        (mesh_glb(document_extra={"extensionsUsed": ["EXT_meshopt_compression"]}), "meshopt"),
        (mesh_glb(np.zeros((3, 3), np.float32), None), "all its vertices are at one point"),
        (mesh_glb(np.array([[0, 0, 0], [1, 0, 0], [np.nan, 1, 0]], np.float32), None),
         "not a finite number"),
        (mesh_glb(CUBE_POSITIONS, np.array([0, 1, 9], np.uint16)), "an index past its vertices"),
        (mesh_glb(document_extra={"nodes": [{"mesh": 0, "children": [0]}]}), "its own parent"),
    ],
)  # fmt: skip
def test_models_that_cannot_be_drawn_are_refused_naming_the_reason(data, reason):
    with pytest.raises(GlbError, match=reason):
        glb_render_views(glb_inspect(data))


def test_the_renderer_walks_each_node_once_whatever_it_is_given():
    # glb_inspect lets no DAG through; the renderer still refuses a node met twice (or before
    # its parent) instead of walking every path to it.
    info = glb_inspect(mesh_glb())
    for scene_nodes in (((0, -1), (0, -1)), ((0, 5),)):
        with pytest.raises(GlbError, match=r"nodes\[0\] is not in a tree"):
            glb_render_views(dataclasses.replace(info, scene_nodes=scene_nodes), size=SIZE)


def test_a_mesh_shown_by_several_nodes_is_drawn_at_each():
    nodes = [{"mesh": 0, "translation": [2.0 * i, 0, 0]} for i in range(3)]
    scene = {"nodes": nodes, "scenes": [{"nodes": [0, 1, 2]}]}
    front = _views(mesh_glb(document_extra=scene))[0]
    # Three unit cubes a cube apart: three runs of drawn pixels across the middle row.
    row = _drawn(front)[SIZE // 2].astype(int)
    assert np.count_nonzero(np.diff(row) == 1) == 3


@pytest.mark.django_db
def test_views_are_rendered_at_import_and_stored_as_image_media(project, tmp_path, settings):
    (tmp_path / "a.glb").write_bytes(mesh_glb(base_colour=[1, 0, 0, 1]))
    (tmp_path / "b.glb").write_bytes(glb_bytes())
    import_media(project, tmp_path, [media_pair("m1", "model3d", "a.glb", "b.glb")])
    pair = Pair.objects.get(project=project)
    model = Media.objects.get(sha256=pair.response_a.content[0]["media"])
    assert len(model.rendered_views) == len(VIEWS)
    views = Media.objects.in_bulk(model.rendered_views)
    for sha in model.rendered_views:
        view = views[sha]
        assert (view.kind, view.format, view.width, view.height) == ("image", "PNG", 512, 512)
        # Rebuilt as every image is, and a second rebuild gives the same bytes.
        assert (view.strip_result, view.served_format) == ("rebuilt", "PNG")
        served = (Path(settings.MEDIA_ROOT) / view.served_relative_path).read_bytes()
        assert served_copy_make(data=served).data == served
        assert ProjectMedia.objects.filter(project=project, media=view).exists()
        with Image.open(original_path(view, settings)) as image:
            assert not image.info.get("text")
            assert set(image.info) <= {"dpi", "gamma"}
    front = np.asarray(Image.open(original_path(views[model.rendered_views[0]], settings)))
    assert front[256, 256, 0] > 200
    assert front[256, 256, 1] == front[256, 256, 2] == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (mesh_glb(mode=1), "cannot be rendered: its scene has no triangles"),
        (mesh_glb(document_extra={"extensionsRequired": ["KHR_draco_mesh_compression"]}),
         "compressed with Draco (KHR_draco_mesh_compression)"),
        (mesh_glb(document_extra={"extensionsRequired": ["EXT_made_up"]}),
         "it requires EXT_made_up"),
        (None, "more than the limit of 11 triangles"),
    ],
)  # fmt: skip
def test_a_model_that_cannot_be_rendered_is_a_line_error(project, tmp_path, settings, data, reason):
    settings.ARBITER_MAX_MODEL3D_TRIANGLES = 11  # a cube has 12
    (tmp_path / "good.glb").write_bytes(glb_bytes())
    (tmp_path / "bad.glb").write_bytes(data or mesh_glb())
    pairs = [
        media_pair("ok", "model3d", "good.glb", "good.glb"),
        media_pair("bad", "model3d", "good.glb", "bad.glb"),
    ]
    with pytest.raises(ImportFailed) as refused:
        import_media(project, tmp_path, pairs)
    [issue] = refused.value.issues
    assert (issue.line, issue.field) == (2, "response_b.response_content[0]")
    assert "model3d 'bad.glb' refused" in issue.message
    assert reason in issue.message
    assert_nothing_imported(project)


@pytest.mark.django_db
def test_the_api_shows_a_model_with_its_views_served_to_members_only(
    project, alice, eve, api_for, client_for, tmp_path
):
    (tmp_path / "a.glb").write_bytes(mesh_glb(base_colour=[1, 0, 0, 1]))
    import_media(project, tmp_path, [media_pair("m1", "model3d", "a.glb", "a.glb")])
    pair = Pair.objects.get(project=project)
    Pair.objects.filter(pk=pair.pk).update(status="queued")
    claimed = api_for(alice).post(f"/api/v1/projects/{project.slug}/claim/")
    assert claimed.status_code == 200, claimed.content
    part = claimed.json()["left"][0]
    assert part["type"] == "model3d"
    assert len(part["views"]) == len(VIEWS)
    model = Media.objects.get(pk=pair.response_a.content[0]["media"])
    for url, sha in zip(part["views"], model.rendered_views, strict=True):
        assert url == f"http://testserver{media_path(slug=project.slug, sha256=sha)}"
        served = client_for(alice).get(url)
        assert served.status_code == 200
        assert served["Content-Type"] == "image/png"
        assert client_for(eve).get(url).status_code == 404


@pytest.mark.django_db
def test_models_imported_before_views_get_them_from_the_command(project, tmp_path, settings):
    (tmp_path / "a.glb").write_bytes(mesh_glb(base_colour=[1, 0, 0, 1]))
    import_media(project, tmp_path, [media_pair("m1", "model3d", "a.glb", "a.glb")])
    model = Media.objects.get(kind="model3d")
    views = model.rendered_views
    # As before views were rendered: no views, no image rows, no files.
    Media.objects.filter(pk=model.pk).update(rendered_views=None)
    ProjectMedia.objects.filter(media_id__in=views).delete()
    Media.objects.filter(pk__in=views).delete()
    for sha in set(views):  # a cube's left and right views are the same picture
        (settings.MEDIA_ROOT / Media.path_for(sha, "PNG")).unlink()
    out = io.StringIO()
    call_command("render_model_views", stdout=out)
    assert "Models rendered: 1" in out.getvalue()
    model.refresh_from_db()
    assert model.rendered_views == views  # the same pixels, so the same hashes
    linked = ProjectMedia.objects.filter(project=project, media_id__in=views).count()
    assert linked == len(set(views))
    assert all((settings.MEDIA_ROOT / Media.path_for(sha, "PNG")).is_file() for sha in views)
    call_command("render_model_views", stdout=out)  # nothing left to do
    assert "Models rendered: 0" in out.getvalue()
