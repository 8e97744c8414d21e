"""A release version's parts have at most 9 digits (docs/releases.md, "Versions"): the path
converter never took more, so a stored ``1.1000000000.0`` had no URL and broke its project's
release list for good. Such a release is renamed to the project's first free ``0.0.N`` (its
folder and archive moved along, so nothing is left behind), and, unless published, marked
failed with the reason: it can be reached again, built again under its new name, or deleted."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.db import migrations, models

# A frozen copy of annotation.models' RELEASE_VERSION_PATTERN as of this migration.
PART = r"(?:0|[1-9][0-9]{0,8})"
NEW_PATTERN = rf"^{PART}\.{PART}\.{PART}$"


def _move(source: Path, target: Path) -> None:
    if source.exists() and not target.exists():
        source.rename(target)


def rename_unreachable(apps, schema_editor):
    Release = apps.get_model("annotation", "Release")
    valid = re.compile(NEW_PATTERN)
    root = Path(settings.ARBITER_RELEASE_ROOT)
    bad = [
        release for release in Release.objects.order_by("pk") if not valid.match(release.version)
    ]
    for release in bad:
        slug = release.project.slug
        taken = set(
            Release.objects.filter(project_id=release.project_id).values_list("version", flat=True)
        )
        number = 1
        while f"0.0.{number}" in taken:
            number += 1
        old, new = release.version, f"0.0.{number}"
        _move(root / slug / old, root / slug / new)
        _move(root / slug / f"{slug}-{old}.tar.gz", root / slug / f"{slug}-{new}.tar.gz")
        fields = {"version": new}
        if release.status != "published":
            fields.update(
                status="failed",
                stage="failed",
                error=(
                    f"Renamed from version {old[:40]}, whose parts had more than 9 digits (no "
                    "URL could name it); build it again under its new name."
                ),
            )
        Release.objects.filter(pk=release.pk).update(**fields)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0013_pair_claim_blocks"),
    ]

    operations = [
        migrations.RunPython(rename_unreachable, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="release", name="release_version_semver"),
        migrations.AddConstraint(
            model_name="release",
            constraint=models.CheckConstraint(
                condition=models.Q(("version__regex", NEW_PATTERN)),
                name="release_version_semver",
            ),
        ),
    ]
