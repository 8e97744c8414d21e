"""A project with something of every kind to release: consensus pairs (A, B and a tie),
an adjudicated pair, pairs the ensemble filtered as easy, a disputed pair, a gold pair and a
queued one; text on two tasks, with a few images carrying EXIF metadata; two prompts with two
pairs each. Shared by the release tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.utils import timezone
from PIL import Image

from annotation.core.content import image_part, text_part
from annotation.models import Adjudication, PairStatus, PriorAnnotation
from annotation.releases.services import release_build, release_create
from annotation.releases.stored_archive import archive_index, archive_source, archive_write_out
from tests.annotation.agreement.conftest import vote
from tests.annotation.queue.conftest import annotator, make_image
from tests.factories import PairFactory, make_prompt, make_response

SECRET_EXIF = "Secret camera serial 4242"
# canonical ternary values of each consensus pair's three votes
CONSENSUS_VOTES = {
    "rel-00": (3, 3, 1),
    "rel-01": (1, 1, 1),
    "rel-02": (3, 3, 3),
    "rel-03": (1, 3, 1),
    "rel-04": (3, 3, 2),
    "rel-05": (1, 1, 3),
    "rel-06": (3, 1, 3),
    "rel-07": (1, 1, 2),
}
TIE_ID = "rel-tie"
ADJUDICATED_ID = "rel-adjudicated"
EASY_ID = "rel-easy"
IMAGE_ID = "rel-image"
LEFT_OUT = ("rel-disputed", "rel-gold", "rel-queued")


def image_with_exif(project, colour: tuple[int, int, int]) -> str:
    """A JPEG with an EXIF description, stored as an import stores an original (no served
    copy yet); returns its sha256."""
    exif = Image.Exif()
    exif[0x010E] = SECRET_EXIF  # ImageDescription
    return make_image(project, colour, image_format="JPEG", exif=exif.tobytes(), quality=90)


def _pair(project, external_id: str, *, prompt: str, task: str = "text", **fields):
    return PairFactory(
        project=project,
        external_id=external_id,
        task=task,
        prompt=make_prompt(project, prompt),
        response_a=make_response(project, "model-alpha", f"alpha answers {external_id}"),
        response_b=make_response(project, "model-beta", f"beta answers {external_id}"),
        **fields,
    )


def releasable_project(project, alice, bob, carol):
    """Fills ``project`` (ternary); returns the third annotator."""
    quick = annotator(project, "quick")
    raters = (alice, bob, quick)
    majority = {1: "B", 2: "tie", 3: "A"}
    for n, (external_id, values) in enumerate(CONSENSUS_VOTES.items()):
        label = max(set(values), key=values.count)
        pair = _pair(
            project,
            external_id,
            # rel-00/rel-01 share a prompt, as do rel-02/rel-03: a prompt's pairs split together
            prompt=f"Prompt {n // 2}" if n < 4 else f"Prompt {n}",
            task="text" if n % 2 else "code",
            criterion="correctness" if n < 6 else "",
            status=PairStatus.CONSENSUS,
            consensus_label=majority[label],
            vote_count=3,
        )
        for user, value in zip(raters, values, strict=True):
            vote(pair, user, value, seconds=5)
    tie = _pair(
        project,
        TIE_ID,
        prompt="A tie",
        status=PairStatus.CONSENSUS,
        consensus_label="tie",
        vote_count=3,
    )
    for user, value in zip(raters, (2, 2, 3), strict=True):
        vote(tie, user, value, seconds=5)
    adjudicated = _pair(
        project,
        ADJUDICATED_ID,
        prompt="Adjudicated",
        vote_count=3,
        status=PairStatus.CONSENSUS,
        consensus_label="B",
    )
    for user, value in zip(raters, (3, 1, 2), strict=True):
        vote(adjudicated, user, value, seconds=5)
    Adjudication.objects.create(pair=adjudicated, curator=carol, label="B", note="B is right")
    _pair(
        project,
        EASY_ID,
        prompt="Easy one",
        status=PairStatus.EASY,
        ensemble_label="A",
        ensemble_agreement=17 / 18,
        ensemble_summary={"votes": {"A": 17, "B": 1}, "run": 1},
    )
    _pair(project, "rel-disputed", prompt="Disputed", status=PairStatus.DISPUTED, vote_count=3)
    _pair(
        project,
        "rel-gold",
        prompt="Gold",
        status=PairStatus.CONSENSUS,
        consensus_label="A",
        is_gold=True,
        gold_label="A",
    )
    _pair(project, "rel-queued", prompt="Queued", status=PairStatus.QUEUED)
    image = PairFactory(
        project=project,
        external_id=IMAGE_ID,
        task="t2i",
        prompt=make_prompt(
            project,
            "",
            [text_part("Draw this again"), image_part(image_with_exif(project, (9, 9, 200)))],
        ),
        response_a=make_response(
            project, "painter-a", "", [image_part(image_with_exif(project, (200, 9, 9)))]
        ),
        response_b=make_response(
            project,
            "painter-b",
            "",
            [text_part("I cannot draw"), image_part(image_with_exif(project, (9, 200, 9)))],
        ),
        status=PairStatus.CONSENSUS,
        consensus_label="B",
        vote_count=1,
        decided_at=timezone.now(),
    )
    vote(image, alice, 1, seconds=5)
    PriorAnnotation.objects.create(pair=image, position=0, value=1, label="B")
    return quick


def built_release(project, user, version: str = "1.0.0", **selection):
    release = release_create(project=project, version=version, selection=selection, user=user)
    return release_build(release=release)


def archive_file(release, folder: Path) -> Path:
    """The release's .tar.gz as its downloads give it, written into ``folder``."""
    target = folder / release.archive_name
    archive_write_out(release, target)
    return target


def archive_sha256(release) -> str:
    """The sha256 of the release's .tar.gz as its downloads give it (a built release records
    it only once published)."""
    index = archive_index(release)
    digest = hashlib.sha256()
    for piece in index.pieces(archive_source(release)):
        digest.update(piece)
    return digest.hexdigest()
