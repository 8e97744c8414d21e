from __future__ import annotations

from django.core.management.base import BaseCommand

from annotation.media.url_keys import media_url_keys_refresh


class Command(BaseCommand):
    help = (
        "Store every media file's URL id again under the current DJANGO_SECRET_KEY. Run it "
        "after changing the key: until then, media URLs answer 404. Safe to run again."
    )

    def handle(self, *args, **options):
        changed = media_url_keys_refresh()
        self.stdout.write(f"Media URL ids stored anew: {changed}")
