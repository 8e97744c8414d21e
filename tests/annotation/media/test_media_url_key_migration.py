"""The migration that gives media their opaque URL ids fills them in for rows already stored
(and a served video's own frame rate), before the column becomes required and unique."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotation.core.media_keys import media_url_key


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_every_stored_media_its_id():
    executor = MigrationExecutor(connection)
    (adding,) = [
        key
        for key in executor.loader.graph.nodes
        if key[1].endswith("_media_url_key_project_media_serve_source")
    ]
    (previous,) = executor.loader.graph.node_map[adding].parents
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate([previous.key])
    try:
        old = executor.loader.project_state([previous.key]).apps
        media = old.get_model("annotation", "Media")
        common = {"width": 64, "height": 48, "size_bytes": 10}
        media.objects.create(sha256="a" * 64, format="PNG", **common)  # no served copy yet
        media.objects.create(
            sha256="b" * 64, kind="video", format="MP4", frame_rate=23.976,
            served_sha256="c" * 64, strip_result="stripped", **common,
        )  # fmt: skip
        project = old.get_model("annotation", "Project").objects.create(slug="old", name="Old")
        for sha256 in ("a" * 64, "b" * 64):  # rows pointing at them, as a database has
            old.get_model("annotation", "ProjectMedia").objects.create(
                project=project, media_id=sha256
            )
        executor = MigrationExecutor(connection)
        executor.migrate([adding])
        new = executor.loader.project_state([adding]).apps
        rows = {row.sha256: row for row in new.get_model("annotation", "Media").objects.all()}
        assert rows["a" * 64].url_key == media_url_key("a" * 64)
        assert rows["b" * 64].url_key == media_url_key("b" * 64)
        assert rows["a" * 64].served_frame_rate is None
        assert rows["b" * 64].served_frame_rate == 23.976
        projects = new.get_model("annotation", "Project").objects
        assert projects.get(pk=project.pk).media_serve_source is False
    finally:
        MigrationExecutor(connection).migrate(leaves)
