"""Preference pairs to train on, and a record of where they came from.

From a project: every pair whose consensus picked a side (``Pair.consensus_label`` A or B);
ties say nothing about which response is better and are left out, and gold pairs are the
annotators' test, not data. From a release: its rows labelled A or B, read from its files.
The criterion goes with each response, as the judge will see it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from annotation.core import storage
from annotation.models import Pair, PairStatus, Project, Release, Side
from annotation.releases.read import release_splits
from annotation.releases.selectors import release_rows
from annotation.releases.stored import AREA, StoredReleaseFiles, file_name
from judges.backends.base import content_images, content_text
from judges.backends.media_stats import media_hashes, media_stats_cached
from judges.core.images import ImageStats, copied_image_stats, image_stats_cached
from judges.reward_model.checkpoint import ScoringInput

TRAIN_SPLIT = "train"


class TrainingDataError(ValueError):
    """There is nothing (or too little) to train on."""


@dataclass(frozen=True)
class PreferencePair:
    key: str  # the pair's id in its source
    group: str  # its prompt: pairs of one prompt stay on one side of the split
    chosen: ScoringInput
    rejected: ScoringInput


@dataclass(frozen=True)
class TrainingData:
    pairs: list[PreferencePair]
    # What the pairs are: kind, label, counts and a sha256 over the pairs and their labels.
    source: dict = field(default_factory=dict)


def _digest(lines: list[str]) -> str:
    sha = hashlib.sha256()
    for line in sorted(lines):
        sha.update(line.encode())
        sha.update(b"\n")
    return sha.hexdigest()


def consensus_pairs(project: Project) -> TrainingData:
    """The project's current consensus pairs with a side, A or B."""
    decided = Pair.objects.filter(project=project, status=PairStatus.CONSENSUS, is_gold=False)
    ties = decided.filter(consensus_label=Side.TIE).count()
    rows = list(
        decided.filter(consensus_label__in=[Side.A, Side.B])
        .select_related("prompt", "response_a", "response_b")
        .order_by("pk")
    )
    stats: dict[str, ImageStats | None] = {}
    image_stats_cached(
        (
            sha
            for pair in rows
            for r in (pair.response_a, pair.response_b)
            for sha in content_images(r.content)
        ),
        stats,
    )
    av_stats: dict = {}
    media_stats_cached(
        (
            sha
            for pair in rows
            for r in (pair.response_a, pair.response_b)
            for kind in ("video", "audio")
            for sha in media_hashes(r.content, kind)
        ),
        av_stats,
    )
    pairs, lines = [], []
    for pair in rows:
        prompt_text = content_text(pair.prompt.content)
        inputs = {
            side: ScoringInput(
                prompt_text,
                content_text(response.content),
                tuple(stats[sha] for sha in content_images(response.content)),
                criterion=pair.criterion,
                videos=tuple(av_stats[sha] for sha in media_hashes(response.content, "video")),
                audios=tuple(av_stats[sha] for sha in media_hashes(response.content, "audio")),
            )
            for side, response in ((Side.A, pair.response_a), (Side.B, pair.response_b))
        }
        other = Side.B if pair.consensus_label == Side.A else Side.A
        pairs.append(
            PreferencePair(
                key=pair.external_id,
                group=str(pair.prompt_id),
                chosen=inputs[Side(pair.consensus_label)],
                rejected=inputs[other],
            )
        )
        lines.append(
            f"{pair.external_id}\t{pair.consensus_label}\t{pair.prompt_id}\t"
            f"{pair.response_a_id}\t{pair.response_b_id}\t{pair.criterion}"
        )
    source = {
        "kind": "project",
        "label": project.slug,
        "project": project.slug,
        "pairs": len(pairs),
        "ties_left_out": ties,
        "sha256": _digest(lines),
    }
    return TrainingData(pairs=pairs, source=source)


def _message_text(messages: list[dict]) -> str:
    """The text of a release's messages (TRL's conversational form): a string, or parts of
    which the text ones count."""
    texts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(p.get("text") or "" for p in content or [] if p.get("type") == "text")
    return "\n\n".join(t for t in texts if t)


def release_pairs(release: Release) -> TrainingData:
    """The rows of a built or published release with a side (A or B), read back from its
    files (never the database); of its ``train`` split when it has one, else of every split,
    so a release's test split stays unseen."""
    splits = release_splits(StoredReleaseFiles(release))
    used = [TRAIN_SPLIT] if TRAIN_SPLIT in splits else splits
    rows = [row for row in release_rows(release) if row["split"] in used]
    # On the bucket each image is a temporary copy, removed once measured.
    paths = (
        path
        for row in rows
        for column in ("chosen", "rejected")
        for path in row[f"{column}_images"]
    )
    stats = copied_image_stats(
        paths, lambda path: storage.local_copy(AREA, file_name(release, path))
    )

    def images(paths: list[str]) -> tuple[ImageStats | None, ...]:
        return tuple(stats[path] for path in paths)

    pairs, lines, ties = [], [], 0
    for row in rows:
        if row["label"] not in (Side.A, Side.B):
            ties += 1
            continue
        prompt_text = _message_text(row["prompt"])
        chosen, rejected = (
            ScoringInput(
                prompt_text,
                _message_text(row[column]),
                images(row[f"{column}_images"]),
                criterion=row["criterion"],
            )
            for column in ("chosen", "rejected")
        )
        group = hashlib.sha256(
            json.dumps([row["prompt"], row["images"]], sort_keys=True).encode()
        ).hexdigest()
        pairs.append(PreferencePair(key=row["id"], group=group, chosen=chosen, rejected=rejected))
        lines.append(f"{row['id']}\t{row['label']}\t{row['split']}")
    source = {
        "kind": "release",
        "label": str(release),
        "project": release.project.slug,
        "release": release.pk,
        "version": release.version,
        "manifest_sha256": release.manifest_sha256,
        "splits": used,
        "pairs": len(pairs),
        "ties_left_out": ties,
        "sha256": _digest(lines),
    }
    return TrainingData(pairs=pairs, source=source)
