"""Writing flags: raised by an annotator on a pair she was served, answered and resolved by
the project's curators. None of it touches votes, skips or leases."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.core.errors import Conflict, InvalidInput, NotFound
from annotation.core.limits import MAX_FLAG_NOTE_CHARS, MAX_FLAG_REPLY_CHARS
from annotation.core.webhook_events import webhook_event_record
from annotation.models import Assignment, Flag, FlagComment, WebhookEventKind


def check_flag_input(*, kind: str, note: str) -> str:
    """The note, stripped, when ``kind`` and ``note`` make a flag; else InvalidInput naming
    the field."""
    if kind not in Flag.Kind.values:
        raise InvalidInput(f"kind: must be one of {', '.join(Flag.Kind.values)}.")
    note = (note or "").strip()
    if len(note) > MAX_FLAG_NOTE_CHARS:
        raise InvalidInput(f"note: at most {MAX_FLAG_NOTE_CHARS} characters.")
    if kind == Flag.Kind.OTHER and not note:
        raise InvalidInput('note: say what is wrong (required with the kind "other").')
    return note


@transaction.atomic
def flag_raise(
    *, assignment: Assignment, annotator, kind: str, note: str = ""
) -> tuple[Flag, bool]:
    """Flags the pair of the annotator's own ``assignment`` (live, voted or skipped alike), and
    returns the flag and whether it is new. One open flag per annotator and pair: the same
    flag sent again returns the first; another one while it is open is refused. A new flag
    is a ``pair.flagged`` webhook event (docs/webhooks.md), written in this transaction."""
    if assignment.annotator_id != annotator.pk:
        raise NotFound("No such assignment.")
    note = check_flag_input(kind=kind, note=note)
    pair_id = assignment.pair_id
    try:
        with transaction.atomic():
            flag = Flag.objects.create(pair_id=pair_id, annotator=annotator, kind=kind, note=note)
    except IntegrityError:  # an open flag of hers on the pair (perhaps sent a moment ago)
        flag = Flag.objects.get(pair_id=pair_id, annotator=annotator, resolved_at__isnull=True)
        if (flag.kind, flag.note) != (kind, note):
            raise Conflict(
                f"kind: you flagged this pair already ({flag.get_kind_display()}); it stays "
                "open until a curator resolves it, and their answer appears in My flags."
            ) from None
        return flag, False
    pair = assignment.pair
    webhook_event_record(
        project=pair.project,
        kind=WebhookEventKind.PAIR_FLAGGED,
        data={
            "project": pair.project.slug,
            "pair": {"id": pair.external_id, "task": pair.task},
            "flag": {"id": flag.pk, "kind": flag.kind, "note": flag.note},
        },
    )
    return flag, True


def _audit_flag(*, flag: Flag, actor, action: str, before: dict, after: dict) -> None:
    """A curator's action on ``flag`` in the audit log, named by the flag's and the pair's ids
    only: never its author, nor anyone's vote (docs/audit.md)."""
    pair = flag.pair
    audit_record(
        actor=actor,
        project=pair.project,
        action=action,
        target=flag,
        target_label=f"flag {flag.pk} on pair {pair.external_id}",
        before=before,
        after=after,
    )


@transaction.atomic
def flag_resolve(*, flag: Flag, by) -> bool:
    """Marks ``flag`` resolved by the curator ``by`` (recorded as ``flag.resolved``); False when
    it was resolved already, which records nothing."""
    now = timezone.now()
    changed = Flag.objects.filter(pk=flag.pk, resolved_at__isnull=True).update(
        resolved_at=now, resolved_by=by
    )
    if changed:
        flag.resolved_at, flag.resolved_by = now, by
        _audit_flag(
            flag=flag,
            actor=by,
            action="flag.resolved",
            before={"resolved": False},
            after={"resolved": True},
        )
    return bool(changed)


@transaction.atomic
def flag_reply(*, flag: Flag, author, text: str, resolve: bool = False) -> FlagComment:
    """A curator's reply to ``flag``, which its author reads in My flags (recorded as
    ``flag.replied``, with the reply); ``resolve`` also resolves the flag."""
    text = (text or "").strip()
    if not text:
        raise InvalidInput("text: write a reply.")
    if len(text) > MAX_FLAG_REPLY_CHARS:
        raise InvalidInput(f"text: at most {MAX_FLAG_REPLY_CHARS} characters.")
    comment = FlagComment.objects.create(flag=flag, author=author, text=text)
    _audit_flag(
        flag=flag,
        actor=author,
        action="flag.replied",
        before={},
        after={"reply": text, "comment": comment.pk},
    )
    if resolve:
        flag_resolve(flag=flag, by=author)
    return comment
