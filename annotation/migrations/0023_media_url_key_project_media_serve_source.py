"""Media get an opaque id for their URLs (``url_key``, an HMAC of the original's sha256) and
the served video's own frame rate; projects get ``media_serve_source``. Existing rows get
their ids, and the videos with a served copy its frame rate (a remuxed or transcoded copy
keeps the original's), before the id becomes required and unique."""

from django.db import migrations, models

import annotation.models.content
from annotation.core.media_keys import media_url_key

_BATCH = 2000


def fill(apps, schema_editor):
    Media = apps.get_model("annotation", "Media")
    rows = Media.objects.only("sha256", "kind", "frame_rate", "served_sha256").order_by("pk")
    batch = []
    for media in rows.iterator(chunk_size=_BATCH):
        media.url_key = media_url_key(media.sha256)
        if media.kind == "video" and media.served_sha256 is not None:
            media.served_frame_rate = media.frame_rate
        batch.append(media)
        if len(batch) == _BATCH:
            Media.objects.bulk_update(batch, ["url_key", "served_frame_rate"])
            batch = []
    Media.objects.bulk_update(batch, ["url_key", "served_frame_rate"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0022_media_served_format"),
    ]

    operations = [
        migrations.AddField(
            model_name="media",
            name="served_frame_rate",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="media",
            name="url_key",
            field=models.CharField(max_length=32, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="media",
            name="url_key",
            field=annotation.models.content.UrlKeyField(max_length=32, unique=True),
        ),
        migrations.AddField(
            model_name="project",
            name="media_serve_source",
            field=models.BooleanField(
                default=False,
                help_text="Annotators receive each media file as it came (its format, metadata "
                "and all) instead of the copy rebuilt without them: this weakens the blinding.",
            ),
        ),
    ]
