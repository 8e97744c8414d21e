"""Serving order by blocks (docs/architecture.md, "Serving order"): ``pair_claim_idx`` now keys
pairs by their block's scrambled number (``annotation.models.ClaimKey``), and the annotators'
cursors, which named pairs of the old order, start again from the first block."""

import django.db.models.expressions
from django.db import migrations, models

import annotation.models


def reset_cursors(apps, schema_editor):
    apps.get_model("annotation", "Membership").objects.update(claim_cursor=None)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0012_pair_search_words"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="pair", name="pair_claim_idx"),
        migrations.AddIndex(
            model_name="pair",
            index=models.Index(
                models.F("project"),
                models.F("is_gold"),
                models.OrderBy(models.F("priority"), descending=True),
                annotation.models.ClaimKey(models.F("id")),
                condition=models.Q(
                    ("status__in", ["queued", "annotating"]),
                    (
                        "target_votes__gt",
                        django.db.models.expressions.CombinedExpression(
                            models.F("vote_count"), "+", models.F("lease_count")
                        ),
                    ),
                ),
                name="pair_claim_idx",
            ),
        ),
        migrations.RunPython(reset_cursors, migrations.RunPython.noop, elidable=True),
    ]
