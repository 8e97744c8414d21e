"""``manage.py audit_check``: whether the database role this process runs as could get past
the audit log's triggers (docs/audit.md, "Hardening"). Exits 1 when it could."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.audit.selectors import audit_table_exposure


class Command(BaseCommand):
    help = (
        "Check that the database role can only read and add audit events: not a superuser, "
        "not the table's owner, no TRUNCATE, the triggers enabled."
    )

    def handle(self, *args, **options):
        problems = audit_table_exposure()
        if problems:
            raise CommandError(
                "The audit log is not append-only for this role:\n"
                + "\n".join(f"- {problem}" for problem in problems)
            )
        self.stdout.write(
            self.style.SUCCESS("The audit log is append-only for this role: it reads and adds.")
        )
