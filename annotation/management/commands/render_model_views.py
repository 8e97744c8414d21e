from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.core.batches import in_batches
from annotation.media.bounded import BoundedError
from annotation.media.glb import GlbError
from annotation.media.services import media_render_views
from annotation.models import Media


class Command(BaseCommand):
    help = (
        "Render the views of every 3D model imported before views were rendered at import "
        "(imports render them themselves; judges are sent them). Safe to run again."
    )

    def handle(self, *args, **options):
        rendered = 0
        problems: list[str] = []
        pending = Media.objects.filter(kind=Media.Kind.MODEL3D, rendered_views__isnull=True)
        for media in in_batches(pending):
            try:
                media_render_views(media=media)
            except FileNotFoundError:
                problems.append(f"{media.sha256}: missing from storage")
                continue
            except (GlbError, BoundedError) as exc:
                problems.append(f"{media.sha256}: {exc}")
                continue
            rendered += 1
        self.stdout.write(f"Models rendered: {rendered}")
        if problems:
            raise CommandError(
                f"{len(problems)} models left without views:\n" + "\n".join(problems[:20])
            )
