"""Builders shared by the queue tests: pairs whose model names, import ids and judge fields are
distinctive strings (so a test can prove they never reach an annotator), images, annotators."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from django.conf import settings
from PIL import Image

from annotation.core.content import image_part, text_part
from annotation.models import Media, PairStatus, ProjectMedia, Role
from tests.factories import MembershipFactory, PairFactory, UserFactory, make_prompt, make_response

SECRET_MODEL_A = "zebrafish-secret-model-a-70b"
SECRET_MODEL_B = "quokka-hidden-model-b-8x7b"
SECRET_JUDGE = "judge-verdict-marmot-0.97"
SECRET_EXTERNAL = "import-id-narwhal"


def make_image(
    project,
    color: tuple[int, int, int],
    *,
    image_format: str = "PNG",
    size: tuple[int, int] = (24, 16),
    **save_options,
) -> str:
    """A small image (24 x 16 PNG unless told; ``save_options`` go to Pillow, ``exif=...``)
    stored like an import stores its original; returns its sha256."""
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, image_format, **save_options)
    data = buffer.getvalue()
    sha256 = hashlib.sha256(data).hexdigest()
    media, _ = Media.objects.get_or_create(
        sha256=sha256,
        defaults={
            "format": image_format,
            "width": size[0],
            "height": size[1],
            "size_bytes": len(data),
        },
    )
    path = Path(settings.MEDIA_ROOT) / media.relative_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    ProjectMedia.objects.get_or_create(project=project, media=media)
    return sha256


def secret_pair(project, n: int = 0, *, with_images: bool = False, **fields):
    """A queued pair carrying every kind of thing an annotator must never see."""
    prompt_content = [text_part(f"Draw a lighthouse at dusk, variant {n}")]
    a_content = [text_part(f"First rendering {n}")]
    b_content = [text_part(f"Second rendering {n}")]
    if with_images:
        prompt_content.append(image_part(make_image(project, (10, 20, 30 + n))))
        a_content.insert(0, image_part(make_image(project, (200, 10, n))))
        b_content.insert(0, image_part(make_image(project, (10, 200, n))))
    defaults = {
        "project": project,
        "external_id": f"{SECRET_EXTERNAL}-{n}",
        "prompt": make_prompt(project, "", prompt_content),
        "response_a": make_response(project, SECRET_MODEL_A, "", a_content),
        "response_b": make_response(project, SECRET_MODEL_B, "", b_content),
        "status": PairStatus.QUEUED,
        "ensemble_label": "A",
        "ensemble_agreement": 0.97,
        "ensemble_summary": {"verdict": SECRET_JUDGE},
        "prior_label": "B",
        "metadata": {"source_model": SECRET_MODEL_A},
        "criterion": "Judge only the lighthouse",
    }
    defaults.update(fields)
    return PairFactory(**defaults)


def annotator(project, username: str):
    user = UserFactory(username=username)
    MembershipFactory(project=project, user=user, role=Role.ANNOTATOR)
    return user


# Statements the hot path runs only now and then: preparing a statement (once per database
# connection, annotation/core/prepared.py) and moving the annotator's cursor to another block
# (once a block).
OCCASIONAL_STATEMENTS = ("PREPARE ", 'UPDATE "annotation_membership" SET "claim_cursor"')


def steady_statements(captured_queries) -> list[str]:
    """The captured statements, leaving out the occasional ones."""
    return [q["sql"] for q in captured_queries if not q["sql"].startswith(OCCASIONAL_STATEMENTS)]
