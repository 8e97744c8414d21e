from django.db import migrations
from django.db.migrations.exceptions import IrreversibleError

# The audit log's trigger (docs/audit.md, "Append-only"), tightened: TRUNCATE only in a
# superuser's session that sets arbiter.audit_truncate to on (``manage.py flush`` on a test or
# scratch database). Before, any role that could TRUNCATE the table could set it.
APPEND_ONLY_SQL = """
CREATE OR REPLACE FUNCTION arbiter_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE'
        AND current_setting('arbiter.audit_truncate', true) = 'on'
        AND coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)
    THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: % refused on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
"""
# 0033's function, which going back restores (on a scratch database only, see below).
PREVIOUS_SQL = """
CREATE OR REPLACE FUNCTION arbiter_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' AND current_setting('arbiter.audit_truncate', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: % refused on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
"""

REFUSED = (
    "Migrating annotation back past 0034 would drop the audit log (annotation_auditevent) "
    "with every event in it. It is refused unless a superuser's session sets "
    "arbiter.audit_truncate to on, which only a test or scratch database should do "
    "(docs/audit.md, 'Append-only')."
)


def scratch_only(apps, schema_editor) -> None:
    """Going back is refused unless the session may empty the log anyway: a superuser's,
    with arbiter.audit_truncate on."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('arbiter.audit_truncate', true) = 'on' AND coalesce("
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)"
        )
        (allowed,) = cursor.fetchone()
    if not allowed:
        raise IrreversibleError(REFUSED)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0033_audit_events"),
    ]

    # Going back runs these last to first: the refusal before anything else.
    operations = [
        migrations.RunSQL(APPEND_ONLY_SQL, PREVIOUS_SQL),
        migrations.RunPython(migrations.RunPython.noop, scratch_only),
    ]
