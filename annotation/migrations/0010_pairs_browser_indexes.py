"""A trigram index on the text parts of prompts, for the pairs browser's search
(annotation.selectors._prompts_with_text; docs/curators.md). PostgreSQL only: other databases
search without an index."""

from __future__ import annotations

from django.db import migrations

# Must stay the expression annotation.selectors.PROMPT_TEXT_SQL searches on.
CREATE = """
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS prompt_text_trgm_idx ON annotation_prompt
USING gin ((jsonb_path_query_array(content, '$[*] ? (@.type == "text").text')::text) gin_trgm_ops);
"""
DROP = "DROP INDEX IF EXISTS prompt_text_trgm_idx;"


def _on_postgres(sql: str):
    def run(apps, schema_editor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("annotation", "0009_agreementreport")]

    operations = [migrations.RunPython(_on_postgres(CREATE), _on_postgres(DROP))]
