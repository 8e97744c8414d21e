"""Runs numbered per project: existing runs get 1, 2, 3 ... in the order they were created."""

from django.db import migrations, models


def number_existing_runs(apps, schema_editor):
    FilterRun = apps.get_model("judges", "FilterRun")
    numbers: dict[int, int] = {}
    for run in FilterRun.objects.order_by("project_id", "created_at", "pk").only("project_id"):
        numbers[run.project_id] = numbers.get(run.project_id, 0) + 1
        FilterRun.objects.filter(pk=run.pk).update(number=numbers[run.project_id])


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0006_filter_run_resumed_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="filterrun",
            name="number",
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunPython(number_existing_runs, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="filterrun",
            name="number",
            field=models.PositiveIntegerField(),
        ),
        migrations.AddConstraint(
            model_name="filterrun",
            constraint=models.UniqueConstraint(
                fields=("project", "number"), name="filter_run_number_unique_per_project"
            ),
        ),
    ]
