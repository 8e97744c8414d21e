"""A release a trainer can learn from (docs/releases.md, "Data files"): a text-to-image
release loaded with ``datasets`` and TRL has its images as ``datasets.Image`` features, each
response's text and images in order, and the image-preference layout (Pick-a-Pic,
Diffusion-DPO); ties are in a config of their own, never a preference."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from annotation.core.content import image_part, text_part
from annotation.models import PairStatus
from tests.annotation.queue.conftest import make_image
from tests.annotation.releases.conftest import TIE_ID, built_release, releasable_project
from tests.factories import PairFactory, make_prompt, make_response

pytestmark = pytest.mark.django_db

datasets = pytest.importorskip("datasets")
trl_data = pytest.importorskip("trl.data_utils")

RED, GREEN, BLUE, GREY = (220, 20, 20), (20, 200, 20), (20, 20, 220), (90, 90, 90)


def _t2i_pair(project, external_id: str, caption: str, colours, label: str, *, extra=None):
    """A text-to-image pair: each response is one image of its colour (``extra``: content
    parts put before response B's image, a response of text and an image)."""
    image_a, image_b = (make_image(project, colour) for colour in colours)
    return PairFactory(
        project=project,
        external_id=external_id,
        task="t2i",
        prompt=make_prompt(project, caption),
        response_a=make_response(project, "painter-a", "", [image_part(image_a)]),
        response_b=make_response(project, "painter-b", "", [*(extra or []), image_part(image_b)]),
        status=PairStatus.CONSENSUS,
        consensus_label=label,
    )


@pytest.fixture
def t2i(project):
    _t2i_pair(project, "t2i-1", "A red square", (RED, GREEN), "A")
    _t2i_pair(project, "t2i-2", "A blue square", (GREY, BLUE), "B")
    _t2i_pair(project, "t2i-3", "Say and draw", (RED, BLUE), "B", extra=[text_part("Here:")])
    _t2i_pair(project, "t2i-tie", "Anything", (GREY, GREEN), "tie")
    return project


def _tokenizer():
    """A tokenizer with a chat template, built here (no download): an image part is
    "<image>", as in real templates."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    template = (
        "{% for m in messages %}<{{ m.role }}>"
        "{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}"
        "{% if p.type == 'image' %}<image>{% else %}{{ p.text }}{% endif %}"
        "{% endfor %}{% endif %}\n{% endfor %}"
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")),
        chat_template=template,
    )


def _pixel(image) -> tuple[int, int, int]:
    return image.convert("RGB").getpixel((0, 0))


def _close(pixel, colour) -> bool:
    return all(abs(a - b) <= 8 for a, b in zip(pixel, colour, strict=True))


def test_a_t2i_release_loads_with_datasets_and_trl_with_two_different_images(t2i, dave, tmp_path):
    release = built_release(t2i, dave, include_ties=True)
    cache = str(tmp_path / "cache")
    pairs = datasets.load_dataset(str(release.folder), cache_dir=cache)["test"]
    assert pairs.features["chosen_images"] == datasets.List(datasets.Image())
    assert pairs.features["rejected_images"] == datasets.List(datasets.Image())
    rows = {row["id"]: row for row in pairs}
    assert set(rows) == {"t2i-1", "t2i-2", "t2i-3"}  # the tie is not a preference
    red_won = rows["t2i-1"]
    (chosen,), (rejected,) = red_won["chosen_images"], red_won["rejected_images"]
    assert _close(_pixel(chosen), RED)
    assert _close(_pixel(rejected), GREEN)
    assert rows["t2i-2"]["chosen_model"] == "painter-b"
    assert _close(_pixel(rows["t2i-2"]["chosen_images"][0]), BLUE)

    # TRL: the text of each side (an image is "<image>" to a text template) ...
    text = trl_data.maybe_apply_chat_template(red_won, _tokenizer())
    assert text["prompt"].startswith("<user>A red square")
    assert "<assistant><image>" in text["chosen"]
    assert text["chosen"] == text["rejected"]
    # ... and the images each side's placeholders stand for, in order with its text
    said = rows["t2i-3"]
    messages = trl_data.prepare_multimodal_messages(said["chosen"], said["chosen_images"])
    parts = messages[0]["content"]
    assert [part["type"] for part in parts] == ["text", "image"]
    assert parts[0]["text"] == "Here:"
    assert _close(_pixel(parts[1]["image"]), BLUE)
    other = trl_data.prepare_multimodal_messages(said["rejected"], said["rejected_images"])
    assert _close(_pixel(other[0]["content"][0]["image"]), RED)


def test_image_output_pairs_are_also_in_the_pick_a_pic_layout(t2i, dave, tmp_path):
    release = built_release(t2i, dave, include_ties=True)
    loaded = datasets.load_dataset(
        str(release.folder), "image_preference", cache_dir=str(tmp_path / "cache")
    )["test"]
    assert loaded.features["jpg_0"] == datasets.Image()
    assert loaded.features["jpg_1"] == datasets.Image()
    rows = {row["id"]: row for row in loaded}
    # one image a side only (t2i-3's B has text too), never a tie
    assert set(rows) == {"t2i-1", "t2i-2"}
    first, second = rows["t2i-1"], rows["t2i-2"]
    assert first["caption"] == "A red square"
    assert (first["label_0"], first["label_1"]) == (1.0, 0.0)
    assert _close(_pixel(first["jpg_0"]), RED)
    assert _close(_pixel(first["jpg_1"]), GREEN)
    assert (second["label_0"], second["label_1"]) == (0.0, 1.0)
    assert _close(_pixel(second["jpg_1"]), BLUE)
    # Diffusion-DPO reads the raw bytes
    raw = loaded.cast_column("jpg_0", datasets.Image(decode=False))[0]["jpg_0"]
    assert raw["bytes"] == (release.folder / raw["path"]).read_bytes()
    card = (release.folder / "README.md").read_text()
    assert "config_name: image_preference" in card
    assert "label_0" in card
    assert "prepare_multimodal_messages" in card
    assert "maybe_apply_chat_template" in card


@pytest.fixture
def filled(project, alice, bob, carol):
    releasable_project(project, alice, bob, carol)
    return project


def test_ties_are_in_their_own_config_never_a_preference(filled, dave, tmp_path):
    release = built_release(filled, dave, include_ties=True)
    data = pq.read_table(release.folder / "data" / "test.parquet").to_pylist()
    assert TIE_ID not in {row["id"] for row in data}
    assert {row["preferred_side"] for row in data} <= {"A", "B"}
    ties = pq.read_table(release.folder / "ties" / "test.parquet")
    assert "chosen" not in ties.column_names
    assert "rejected" not in ties.column_names
    (tie,) = ties.to_pylist()
    assert (tie["id"], tie["preferred_side"], tie["model_a"], tie["model_b"]) == (
        TIE_ID,
        "tie",
        "model-alpha",
        "model-beta",
    )
    cache = str(tmp_path / "cache")
    default = datasets.load_dataset(str(release.folder), cache_dir=cache)["test"]
    assert TIE_ID not in default["id"]
    assert "tie" not in default["preferred_side"]
    assert datasets.load_dataset(str(release.folder), "ties", cache_dir=cache)["test"]["id"] == [
        TIE_ID
    ]
    card = (release.folder / "README.md").read_text()
    assert "config_name: ties" in card
    assert "Ties are never in the default config" in card
    assert release.statistics["configs"]["ties"]["test"][0] == 1
    # without ties there is no ties config at all
    plain = built_release(filled, dave, "1.1.0")
    assert not (plain.folder / "ties").exists()
    assert "config_name: ties" not in plain.card
