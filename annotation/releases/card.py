"""The dataset card (``README.md``) and the statistics it shows (docs/releases.md, "Dataset
card"): counted while the rows are written (``Statistics``), then rendered with Hugging Face
YAML front matter. Nothing in it depends on the version or the time of building."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from annotation.agreement.statistics import (
    AlphaLevel,
    Ratings,
    bootstrap_alpha_ci,
    krippendorff_alpha,
    pairwise_agreement,
)
from annotation.leaderboard.release import models_section, release_models
from annotation.models import Project
from annotation.releases.formats import (
    DEFAULT_CONFIG,
    IMAGE_PREFERENCE_CONFIG,
    MEDIA_COLUMNS,
    MEDIA_DIRS,
    TIES_CONFIG,
    ReleasePair,
)
from annotation.releases.omni import OMNI_DIR
from annotation.releases.read import JSONL_DIR
from annotation.releases.selection import Selection
from annotation.releases.writer import IMAGE_TYPE, MMRB2_DIR, Table

LICENSE = "other"
# Hugging Face's task category of each kind of output beyond images.
_AV_CATEGORIES = {"video": "text-to-video", "audio": "text-to-audio", "model3d": "text-to-3d"}
TAGS = ("preference", "reward-modeling", "human-feedback", "arbiter")


# Rows a release's statistics take before counting them (``Statistics.add``).
_COUNT_EVERY = 10_000


@dataclass
class Statistics:
    """Counts of the rows written, and their human values for the agreement figures."""

    scale: str
    # (split, task, label, source) -> rows, and (model of A, model of B, label) -> rows of the
    # pairs between two different named models; each row is noted, then counted in batches
    # (Counter's update counts in C, where a row's own four increments cost more than the
    # rest of its statistics).
    _rows: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    _comparisons: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    _noted_rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    _noted_comparisons: list[tuple[str, str, str]] = field(default_factory=list)
    _units: list[int] = field(default_factory=list)
    _raters: list[int] = field(default_factory=list)
    _values: list[int] = field(default_factory=list)

    def add(self, pair: ReleasePair, split: str) -> None:
        label = pair.label
        self._noted_rows.append((split, pair.task, label, pair.source))
        model_a, model_b = pair.response_a.model_name, pair.response_b.model_name
        if model_a and model_b and model_a != model_b:
            self._noted_comparisons.append((model_a, model_b, label))
        if votes := pair.votes:
            self._units.extend([pair.pk] * len(votes))
            self._raters.extend(pair.raters)
            self._values.extend(votes)
        if len(self._noted_rows) >= _COUNT_EVERY:
            self._count()

    def _count(self) -> None:
        self._rows.update(self._noted_rows)
        self._comparisons.update(self._noted_comparisons)
        self._noted_rows.clear()
        self._noted_comparisons.clear()

    def counts(
        self,
    ) -> tuple[Counter[str], dict[str, Counter[str]], dict[str, Counter[str]], Counter[str]]:
        """Rows by split, by task and split, by split and label, and by source."""
        self._count()
        splits: Counter[str] = Counter()
        by_task: defaultdict[str, Counter[str]] = defaultdict(Counter)
        labels: defaultdict[str, Counter[str]] = defaultdict(Counter)
        sources: Counter[str] = Counter()
        for (split, task, label, source), rows in self._rows.items():
            splits[split] += rows
            by_task[task][split] += rows
            labels[split][label] += rows
            sources[source] += rows
        return splits, by_task, labels, sources

    def agreement(self) -> dict[str, Any]:
        """Side alpha with its 95% bootstrap interval and MMRB2's pairwise agreement over the
        released pairs' human values (docs/agreement.md), with the fixed bootstrap seed."""
        raters = np.array(self._raters, dtype=np.int64)
        figures: dict[str, Any] = {
            "votes": len(self._values),
            "annotators": int(np.unique(raters[raters > 0]).size),
            "prior_raters": int(np.unique(raters[raters < 0]).size),
            "alpha_side": None,
            "alpha_side_ci95": None,
            "pairwise_agreement": None,
        }
        if not self._values:
            return figures
        ratings = Ratings.from_arrays(
            scale=self.scale,
            units=np.array(self._units, dtype=np.int64),
            raters=raters,
            values=np.array(self._values, dtype=np.int64),
        )
        ci = bootstrap_alpha_ci(ratings, AlphaLevel.SIDE)
        figures["alpha_side"] = krippendorff_alpha(ratings, AlphaLevel.SIDE)
        figures["alpha_side_ci95"] = None if ci is None else list(ci)
        figures["pairwise_agreement"] = pairwise_agreement(ratings)
        return figures

    def as_json(
        self,
        *,
        split_order: list[str],
        configs: dict[str, dict[str, list[int]]],
        media: dict[str, int],
        ensemble_removed: int,
        omni_files: int = 0,
    ) -> dict[str, Any]:
        """The figures; ``media`` counts the files of each kind (images, and the other kinds
        the release has), ``omni_files`` the Omni-RewardBench-compatible files."""
        others = {kind: count for kind, count in media.items() if kind != "image"}
        splits, by_task, labels, sources = self.counts()
        return {
            "pairs": sum(splits.values()),
            "splits": {name: splits[name] for name in split_order},
            # per config ("default", "ties", "image_preference"): split -> [rows, bytes]
            "configs": configs,
            "by_task": {
                task: {name: counts[name] for name in split_order if counts[name]}
                for task, counts in sorted(by_task.items())
            },
            "labels": {name: dict(sorted(labels[name].items())) for name in split_order},
            "sources": dict(sorted(sources.items())),
            "images": media.get("image", 0),
            # Only in releases with video, audio or 3D: earlier ones keep their figures.
            **({"media": others} if others else {}),
            **({"omni_files": omni_files} if omni_files else {}),
            "ensemble_removed": ensemble_removed,
            "scale": self.scale,
            **self.agreement(),
            "models": release_models(self._comparisons),
        }


# ---- Features in Hugging Face's YAML ----


def _yaml_string(text: str) -> str:
    """A YAML scalar for any text: a JSON string is a valid YAML double-quoted scalar."""
    return json.dumps(text, ensure_ascii=False)


def _feature_lines(
    name: str, kind: pa.DataType, indent: int, images: Collection[str] = ()
) -> list[str]:
    """``datasets``' YAML for one feature (the form ``Features._to_yaml_list`` writes); a
    file struct of one of the ``images`` columns is ``datasets.Image``."""
    pad, inner = " " * indent, " " * (indent + 2)
    lines = [f"{pad}- name: {name}"]
    if name in images and kind == IMAGE_TYPE:
        return [*lines, f"{inner}dtype: image"]
    is_list = pa.types.is_list(kind)
    if name in images and is_list and kind.value_type == IMAGE_TYPE:
        return [*lines, f"{inner}list: image"]
    if is_list and not pa.types.is_struct(kind.value_type):
        return [*lines, f"{inner}list: {_dtype(kind.value_type)}"]
    if is_list or pa.types.is_struct(kind):
        lines.append(f"{inner}{'list' if is_list else 'struct'}:")
        for child in kind.value_type if is_list else kind:
            lines.extend(_feature_lines(child.name, child.type, indent + 2))
        return lines
    return [*lines, f"{inner}dtype: {_dtype(kind)}"]


def _dtype(kind: pa.DataType) -> str:
    return {
        pa.string(): "string",
        pa.int64(): "int64",
        pa.float64(): "float64",
        pa.binary(): "binary",
    }[kind]


def features_yaml(schema: pa.Schema, indent: int = 2, images: Collection[str] = ()) -> list[str]:
    """The ``features`` of a table's ``dataset_info``; ``images``: its ``datasets.Image``
    columns."""
    lines = [" " * indent + "features:"]
    for column in schema:
        lines.extend(_feature_lines(column.name, column.type, indent, images))
    return lines


def _configs_yaml(tables: dict[str, Table], configs: dict[str, dict[str, list[int]]]) -> list[str]:
    """``configs`` (each config's files per split) and ``dataset_info`` (each config's
    features and splits) of the front matter; a config without rows is left out."""
    present = [config for config in tables if configs.get(config)]
    files = ["configs:"]
    info = ["dataset_info:"]
    for config in present:
        table, splits = tables[config], configs[config]
        files += [f"- config_name: {config}"]
        if config == DEFAULT_CONFIG:
            files += ["  default: true"]
        files += ["  data_files:"]
        for name in splits:
            files += [f"  - split: {name}", f"    path: {table.parquet_dir}/{name}.parquet"]
        info += [f"- config_name: {config}", *features_yaml(table.schema, 2, table.image_columns)]
        info += ["  splits:"]
        for name, (rows, size) in splits.items():
            info += [f"  - name: {name}", f"    num_bytes: {size}", f"    num_examples: {rows}"]
    return files + info


def _av_loading(av_kinds: Sequence[str]) -> list[str]:
    """How to read the video, audio and 3D columns: video and audio with PyAV, no
    ``torchcodec`` needed."""
    columns = ", ".join(
        f"`{MEDIA_COLUMNS[kind]}`, `chosen_{MEDIA_COLUMNS[kind]}`, `rejected_{MEDIA_COLUMNS[kind]}`"
        for kind in av_kinds
    )
    placeholders = ", ".join(f'`{{"type": "{kind}"}}`' for kind in av_kinds)
    lines = [
        f"Video, audio and 3D parts are placeholders too ({placeholders}), their files in "
        f"{columns}, in placeholder order.",
        "",
    ]
    decoded = [kind for kind in av_kinds if kind != "model3d"]
    if decoded:
        first = decoded[0]
        names = [f"{prefix}{MEDIA_COLUMNS[first]}" for prefix in ("", "chosen_", "rejected_")]
        stream = "video=0" if first == "video" else "audio=0"
        kinds = " and ".join({"video": "Video", "audio": "audio"}[kind] for kind in decoded)
        lines += [
            f"{kinds.capitalize()} columns hold paths in this folder "
            f'(`"{MEDIA_DIRS[first]}/<sha256>..."`), in Parquet as in JSONL: each file is here '
            "once, however many pairs show it. They are not `datasets.Video` or "
            "`datasets.Audio` features, which decode with `torchcodec` (FFmpeg's libraries): "
            "the release loads with `datasets` alone; open the files with PyAV "
            "(`pip install datasets av`, nothing else):",
            "",
            "```python",
            "import os",
            "",
            "import av",
            "from datasets import load_dataset",
            "",
            'folder = "<this folder>"',
            "pairs = load_dataset(folder)",
            f"columns = {names!r}".replace("'", '"'),
            "# The first one in any split; reading only these columns leaves the images",
            "# undecoded (decoding them needs Pillow).",
            "path = next(",
            "    files[0]",
            "    for split in pairs.values()",
            "    for row in split.select_columns(columns)",
            "    for files in row.values()",
            "    if files",
            ")",
            "with av.open(os.path.join(folder, path)) as container:",
            f"    frames = [frame.to_ndarray() for frame in container.decode({stream})]",
            "```",
            "",
        ]
        if len(decoded) > 1:
            lines += [
                "Audio alike: `audios`, `chosen_audios`, `rejected_audios`, and "
                "`container.decode(audio=0)`.",
                "",
            ]
    if "model3d" in av_kinds:
        lines += [
            "3D models (binary glTF) have no `datasets` feature: `models3d` and its kin hold "
            f"their paths in this folder (`{MEDIA_DIRS['model3d']}/<sha256>.glb`), which any glTF "
            "reader opens (`trimesh.load(path)`).",
            "",
        ]
    return lines


def _loading(
    multimodal: bool, configs: dict[str, dict[str, list[int]]], av_kinds: Sequence[str] = ()
) -> list[str]:
    """How to load each config with ``datasets`` and train on it with TRL."""
    lines = [
        "## Loading",
        "",
        "Preferences (A or B) are the default config, in TRL's conversational preference "
        "format (`prompt`, `chosen`, `rejected`):",
        "",
        "```python",
        "from datasets import load_dataset",
        "from trl.data_utils import maybe_apply_chat_template",
        "",
        'pairs = load_dataset("<this folder>")  # or ("parquet", data_dir="<this folder>/data")',
        f'example = pairs["{_first_split(configs, DEFAULT_CONFIG)}"][0]',
        "text = maybe_apply_chat_template(example, tokenizer)  # prompt, chosen, rejected as text",
        "```",
        "",
    ]
    if multimodal:
        lines += [
            "Images are `datasets.Image` features holding their bytes: `images` are the "
            "prompt's, `chosen_images` and `rejected_images` each response's, in the order of "
            'the `{"type": "image"}` placeholders of its content, so text and images keep '
            "their order:",
            "",
            "```python",
            "from trl.data_utils import prepare_multimodal_messages",
            "",
            'chosen = prepare_multimodal_messages(example["chosen"], example["chosen_images"])',
            "```",
            "",
        ]
    if av_kinds:
        lines += _av_loading(av_kinds)
    if configs.get(IMAGE_PREFERENCE_CONFIG):
        lines += [
            "Pairs whose two responses are each one image (text-to-image, editing) are also "
            f"in the `{IMAGE_PREFERENCE_CONFIG}` config, in the layout image-preference "
            "trainers read (Pick-a-Pic, Diffusion-DPO): `caption`, `input_images` (the "
            "prompt's images, for editing), `jpg_0`, `jpg_1`, and `label_0` 1.0 when `jpg_0` "
            "won, 0.0 when `jpg_1` did (`label_1` the other way); ties are never in it:",
            "",
            "```python",
            "from datasets import Image",
            "",
            f'images = load_dataset("<this folder>", "{IMAGE_PREFERENCE_CONFIG}")',
            '# Diffusion-DPO reads raw bytes: images.cast_column("jpg_0", Image(decode=False))',
            "```",
            "",
        ]
    lines += [
        "Ties are never in the default config, where a trainer would take them for a "
        f"preference: they are the `{TIES_CONFIG}` config (`{TIES_DIR_NOTE}`), with the two "
        "responses as `response_a` and `response_b` (and `model_a`, `model_b`) and no "
        "`chosen` or `rejected`"
        + ("." if configs.get(TIES_CONFIG) else "; this release has none."),
        "",
    ]
    return lines


TIES_DIR_NOTE = "ties/<split>.parquet"


def _first_split(configs: dict[str, dict[str, list[int]]], config: str) -> str:
    return next(iter(configs.get(config) or ["test"]))


# ---- The card ----


def _share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.1f}%)" if total else str(count)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_card(
    *,
    project: Project,
    selection: Selection,
    statistics: dict[str, Any],
    tables: dict[str, Table],
    multimodal: bool,
    av_kinds: Sequence[str] = (),
) -> str:
    """README.md: YAML front matter (configs and splits, features, license, task categories),
    then what the release holds and how it was selected. The version is not in it
    (docs/releases.md, "Determinism")."""
    splits = [name for name, count in statistics["splits"].items() if count]
    categories = [
        "text-classification",
        *(["image-text-to-text"] if multimodal else []),
        *(_AV_CATEGORIES[kind] for kind in av_kinds),
    ]
    front = [
        "---",
        f"pretty_name: {_yaml_string(project.name)}",
        f"license: {LICENSE}",
        "task_categories:",
        *(f"- {category}" for category in categories),
        "tags:",
        *(f"- {tag}" for tag in TAGS),
        *_configs_yaml(tables, statistics["configs"]),
        "---",
    ]
    total = statistics["pairs"]
    body = [
        "",
        f"# {project.name}",
        "",
        f"Human preference pairs from the Arbiter project `{project.slug}`, on the "
        f"{project.scale} scale, labelled by the {project.consensus_rule} consensus rule.",
        "",
        'Load it with `datasets.load_dataset("<this folder>")`, '
        '`datasets.load_dataset("parquet", data_dir="<this folder>/data")` or pandas; '
        f"`{JSONL_DIR}/<split>.jsonl` holds the same rows as JSON lines, "
        f"`{MMRB2_DIR}/<split>.json` the same pairs in MMRB2's format, "
        + (
            f"`{OMNI_DIR}/<split>/<task>_preferences.json` the pairs of Omni-RewardBench's "
            "tasks in its format, "
            if statistics.get("omni_files")
            else ""
        )
        + "and `manifest.json` the sha256 of every file.",
        "",
        *_loading(multimodal, statistics["configs"], av_kinds),
        "## Pairs per task and split",
        "",
        "| Task | " + " | ".join(splits) + " | Total |",
        "|---|" + "---|" * (len(splits) + 1),
        *(
            f"| {task or '(none)'} | "
            + " | ".join(str(counts.get(name, 0)) for name in splits)
            + f" | {sum(counts.values())} |"
            for task, counts in statistics["by_task"].items()
        ),
        "| **All** | "
        + " | ".join(str(statistics["splits"][name]) for name in splits)
        + f" | {total} |",
        "",
        "## Labels",
        "",
        "| Split | A | B | tie |",
        "|---|---|---|---|",
        *(
            f"| {name} | "
            + " | ".join(
                _share(statistics["labels"][name].get(label, 0), statistics["splits"][name])
                for label in ("A", "B", "tie")
            )
            + " |"
            for name in splits
        ),
        "",
        "`label` is in the imported order (A, B); `chosen` is the preferred response. Ties "
        f"are in the `{TIES_CONFIG}` config, never in the preferences.",
        "",
        "## Sources",
        "",
        *(f"- {source}: {_share(count, total)}" for source, count in statistics["sources"].items()),
        f"- pairs of the project the judge ensemble removed as easy: "
        f"{statistics['ensemble_removed']}"
        + ("" if selection.include_ensemble else " (not included)"),
        "",
        "## Agreement",
        "",
        f"- human values: {statistics['votes']} from "
        f"{_count(statistics['annotators'], 'annotator')}"
        + (
            f" and {_count(statistics['prior_raters'], 'rater')} of the imported annotations"
            if statistics["prior_raters"]
            else ""
        ),
        f"- Krippendorff's alpha (sides): {_figure(statistics['alpha_side'])}"
        + (
            " (95% bootstrap interval {:.3f} to {:.3f})".format(*statistics["alpha_side_ci95"])
            if statistics["alpha_side_ci95"]
            else ""
        ),
        f"- pairwise agreement (MMRB2): {_figure(statistics['pairwise_agreement'])}",
        "",
        *models_section(statistics["models"]),
        "## Selection",
        "",
        "```json",
        json.dumps(selection.as_json(), indent=2, sort_keys=True),
        "```",
        "",
        *_media_lines(statistics, original=selection.original_media),
        "",
    ]
    return "\n".join(front + body)


_MEDIA_NOUNS = {"video": "videos", "audio": "audio clips", "model3d": "3D models"}


def _media_lines(statistics: dict[str, Any], *, original: bool) -> list[str]:
    """What the media folders hold: the served copies (metadata removed) or the originals."""
    if original:
        return [
            f"Images: {statistics['images']} files under `images/`, named by their sha256, as "
            "they were imported (with their metadata).",
            *(
                f"{_MEDIA_NOUNS[kind].capitalize()}: {count} files under "
                f"`{MEDIA_DIRS[kind]}/`, named by their sha256, as they were imported."
                for kind, count in statistics.get("media", {}).items()
            ),
        ]
    return [
        f"Images: {statistics['images']} files under `images/`, named by their sha256, "
        "with their metadata (EXIF, XMP, text chunks) removed.",
        *(
            f"{_MEDIA_NOUNS[kind].capitalize()}: {count} files under `{MEDIA_DIRS[kind]}/`, "
            "named by their sha256, with their metadata (container tags, chapters, "
            "attachments; a model's generator and extras) removed, frames and samples "
            "untouched."
            for kind, count in statistics.get("media", {}).items()
        ),
    ]
