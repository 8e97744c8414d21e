"""A flag raised from the annotator's path: beside a vote (the lease stays hers, the vote still
to give or already given) or while skipping the pair."""

from __future__ import annotations

from django.db import transaction

from annotation.flags.services import flag_raise
from annotation.models import Assignment, Flag, Skip
from annotation.queue.services.skips import assignment_skip

# The skip a flag-and-skip records: broken media is broken content, anything else a pair the
# annotator cannot judge.
SKIP_REASON_OF_FLAG: dict[str, str] = {Flag.Kind.BROKEN_MEDIA: Skip.Reason.BROKEN}


@transaction.atomic
def assignment_flag(
    *, assignment: Assignment, annotator, kind: str, note: str = "", skip: bool = False
) -> tuple[Flag, bool, Skip | None]:
    """Flags the assignment's pair (``flag_raise``); with ``skip`` also skips it, with the
    reason the flag's kind maps to and the flag's note. Returns the flag, whether it is new,
    and the skip (None without ``skip``). Flagging alone never uses up the vote."""
    flag, created = flag_raise(assignment=assignment, annotator=annotator, kind=kind, note=note)
    skipped = None
    if skip:
        reason = SKIP_REASON_OF_FLAG.get(flag.kind, Skip.Reason.CANNOT_JUDGE)
        skipped = assignment_skip(
            assignment=assignment, annotator=annotator, reason=reason, note=flag.note
        )
    return flag, created, skipped
