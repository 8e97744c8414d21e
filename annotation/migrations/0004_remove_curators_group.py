"""Curators no longer use the Django admin (it is for superusers only): the "Curators" group
goes, and the members it had who are not superusers lose the staff flag it came with."""

from __future__ import annotations

from django.conf import settings
from django.db import migrations

CURATORS_GROUP = "Curators"


def remove_curators_group(apps, schema_editor) -> None:
    group_model = apps.get_model("auth", "Group")
    user_model = apps.get_model(settings.AUTH_USER_MODEL)
    group = group_model.objects.filter(name=CURATORS_GROUP).first()
    if group is None:
        return
    user_model.objects.filter(groups=group, is_superuser=False).update(is_staff=False)
    group.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0003_fewer_pair_indexes"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Nothing to restore on the way back: the group was only ever the admin's.
        migrations.RunPython(remove_curators_group, migrations.RunPython.noop),
    ]
