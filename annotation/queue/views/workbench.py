"""The comparison page annotators work on all day.

Everything it shows about a pair comes from the blinded payload
(``annotation.queue.presentation.assignment_payload``), so no template can reveal model names
or which side is A. Votes, skips and undo are plain form posts: htmx gets the next ``#workbench``
fragment back, a browser without JavaScript is redirected to the page (post/redirect/get, so a
reload never repeats an undo).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotation.core.access import get_project_for_user
from annotation.core.errors import DomainError, NotAllowed
from annotation.core.limits import (
    MAX_FLAG_NOTE_CHARS,
    MAX_RATIONALE_CHARS,
    MAX_SKIP_NOTE_CHARS,
    MAX_TIME_ON_TASK_MS,
    UNDO_SECONDS,
)
from annotation.core.scales import option_label, options_for
from annotation.flags.selectors import answered_flag_count
from annotation.models import Assignment, Flag, Membership, Project, Role, Skip
from annotation.queue.presentation import assignment_payload, undone_answer
from annotation.queue.selectors import (
    annotator_progress,
    assignment_for_annotator,
    upcoming_media_urls,
)
from annotation.queue.services.claim import assignment_claim, assignment_claim_ahead
from annotation.queue.services.flags import assignment_flag
from annotation.queue.services.leases import ahead_leases_release
from annotation.queue.services.skips import assignment_skip
from annotation.queue.services.undo import NOTHING_TO_UNDO, Undone, last_action_undo
from annotation.queue.services.votes import vote_submit, vote_submit_and_claim

ANNOTATORS = (Role.ANNOTATOR,)
TEMPLATE = "annotation/workbench.html"
# Pairs with these parts have the pair after them claimed and prepared ahead.
AHEAD_PART_TYPES = ("video", "audio", "model3d")
_ARROWS = {"left": ("ArrowLeft", "←"), "right": ("ArrowRight", "→"), "down": ("ArrowDown", "↓")}


class VoteForm(forms.Form):
    choice = forms.ChoiceField(choices=[(c, c) for c in ("left", "right", "tie")], required=False)
    value = forms.IntegerField(min_value=1, max_value=6, required=False)
    rationale = forms.CharField(required=False, max_length=MAX_RATIONALE_CHARS, strip=True)
    time_on_task_ms = forms.IntegerField(min_value=0, max_value=MAX_TIME_ON_TASK_MS, required=False)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not data.get("choice") and data.get("value") is None and not self.errors:
            raise forms.ValidationError("Pick one of the options.")
        return data


class SkipForm(forms.Form):
    reason = forms.ChoiceField(choices=Skip.Reason.choices)
    note = forms.CharField(required=False, max_length=MAX_SKIP_NOTE_CHARS, strip=True)


class FlagForm(forms.Form):
    kind = forms.ChoiceField(choices=Flag.Kind.choices)
    note = forms.CharField(required=False, max_length=MAX_FLAG_NOTE_CHARS, strip=True)
    then = forms.ChoiceField(choices=[("", "keep the pair"), ("skip", "skip it")], required=False)


def _form_error(form: forms.Form) -> str:
    """One readable line naming the field that was wrong."""
    field, errors = next(iter(form.errors.items()))
    message = str(errors[0])  # an ErrorList item reads as its message
    return message if field == "__all__" else f"{field}: {message}"


def _options(options: list[dict]) -> list[dict]:
    """A scale's options in on-screen order, with the key name and glyph of each one's arrow."""
    return [
        {**option, "arrow_key": _ARROWS.get(option.get("arrow") or "", ("", ""))}
        for option in options
    ]


def _option_label(scale: str, *, choice: str | None, value: int | None) -> str:
    """What an on-screen choice says, as a phrase: "left is better", "right much better"."""
    label = option_label(scale, choice=choice, value=value)
    return label[0].lower() + label[1:]


def _restored(undone: Undone, scale: str) -> dict:
    """The earlier answer on the pair an undo gave back (``undone_answer``), with the option
    (``field``, ``value``) the page pre-selects and the phrase its notice quotes."""
    answer = undone_answer(undone, scale=scale)
    restored = {**answer, "assignment_id": undone.assignment.pk}
    if answer["action"] == "vote":
        choice = answer["choice"]
        restored["option"] = ("value", answer["value"]) if choice is None else ("choice", choice)
        restored["phrase"] = _option_label(scale, choice=choice, value=answer["value"])
    else:
        restored["phrase"] = answer["label"]
    return restored


_CLAIM = object()  # _workbench_context's default: claim the pair to show


def _workbench_context(
    request,
    project: Project,
    *,
    notice: str = "",
    error: str = "",
    restored: dict | None = None,
    claimed: Any = _CLAIM,
) -> dict:
    """The page's state: the pair leased to this annotator (claimed now if none is held, or
    ``claimed``, the lease a vote claimed in its own transaction, None for none), their
    progress, what to prefetch for the pair after it, and ``restored``, the earlier answer
    when an undo brought this pair back."""
    if claimed is not _CLAIM:
        assignment = claimed
    else:
        try:
            assignment = (
                None
                if project.paused
                else assignment_claim(project=project, annotator=request.user)
            )
        except NotAllowed as exc:  # a superuser who is not an annotator here
            raise PermissionDenied(str(exc)) from None
    # After the claim, so "left for you" counts the pair on screen exactly once.
    progress = annotator_progress(project=project, annotator=request.user)
    context = {
        "project": project,
        "notice": notice,
        "error": error,
        "progress": progress,
        "progress_max": max(1, progress["done_today"] + progress["left"]),
        "skip_reasons": Skip.Reason.choices,
        "flag_kinds": Flag.Kind.choices,
        "flag_draft": {},
        "answered_flags": answered_flag_count(project=project, annotator=request.user),
        "shortcut_options": _options(options_for(project.scale)),
        "assignment": None,
        "annotator_paused": False,
        "restored": None,
        "undo_seconds": UNDO_SECONDS,
    }
    if assignment is None:
        # Nothing served: say so when the curators paused this annotator (never why).
        context["annotator_paused"] = Membership.objects.filter(
            project=project, user=request.user, paused=True
        ).exists()
        return context
    payload = assignment_payload(assignment, request=request)
    context.update(_card(payload))
    if restored is not None and restored["assignment_id"] == assignment.pk:
        context["restored"] = restored
    earlier = (restored or {}).get("option")
    context["options"] = [
        {**option, "chosen": (option["field"], option["value"]) == earlier}
        for option in context["options"]
    ]
    context["next_card"] = None
    context["prefetch_urls"] = {}
    if _plays_media(payload):
        # The pair after it claimed now, so the page prepares its players while this one is
        # answered (docs/curators.md, "The next pair, prepared ahead").
        ahead = assignment_claim_ahead(project=project, annotator=request.user)
        if ahead is not None:
            context["next_card"] = _card(assignment_payload(ahead, request=request))
    if context["next_card"] is None:
        context["prefetch_urls"] = upcoming_media_urls(
            project=project, annotator=request.user, after_pair_id=assignment.pair_id
        )
    return context


def _card(payload: dict) -> dict:
    """What the pair card shows of an assignment's payload besides the payload itself."""
    return {
        "assignment": payload,
        # A prompt with an image (an edit's input) is laid out beside the two responses.
        "beside_input": any(part["type"] == "image" for part in payload["prompt"]),
        "options": _options(payload["options"]),
    }


def _plays_media(payload: dict) -> bool:
    """Whether the pair has video, audio or a 3D model, which take long enough to load that
    the page prepares the next pair ahead."""
    parts = (*payload["prompt"], *payload["left"], *payload["right"])
    return any(part["type"] in AHEAD_PART_TYPES for part in parts)


def _respond(
    request, project: Project, *, notice: str = "", error: str = "", **state
) -> HttpResponse:
    """The next pair: the ``#workbench`` fragment for htmx (``state``: the rest of
    ``_workbench_context``'s keywords), else a redirect to the page."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif notice:
            messages.success(request, notice)
        return redirect("annotate", slug=project.slug)
    context = _workbench_context(request, project, notice=notice, error=error, **state)
    return render(request, f"{TEMPLATE}#workbench", context)


def _flag_refused(request, project: Project, error: str, draft: dict) -> HttpResponse:
    """A flag the page could not take: the same pair again with the error and the flag form
    open as it was sent, so nothing typed is lost (a 400; htmx swaps it in all the same)."""
    context = _workbench_context(request, project, error=error)
    context["flag_draft"] = draft
    template = f"{TEMPLATE}#workbench" if request.htmx else TEMPLATE
    return render(request, template, context, status=400)


def _annotated_assignment(request, slug: str, assignment_id: int) -> tuple[Project, Assignment]:
    """The project and the annotator's own assignment in it, with its pair, read in one
    prepared statement (``assignment_for_annotator``). Anything else answers as the project's
    page would, then 404 for the assignment: outsiders 404, members who do not annotate 403,
    anyone else's assignment (or one in another project) 404."""
    try:
        assignment = assignment_for_annotator(user=request.user, assignment_id=assignment_id)
    except (Http404, PermissionDenied):
        assignment = None
    if assignment is None or assignment.pair.project.slug != slug:
        get_project_for_user(request.user, slug, roles=ANNOTATORS)
        raise Http404("No such assignment")
    return assignment.pair.project, assignment


@require_GET
@never_cache
@login_required
def annotate(request, slug: str):
    project, _ = get_project_for_user(request.user, slug, roles=ANNOTATORS)
    template = f"{TEMPLATE}#workbench" if request.htmx else TEMPLATE
    return render(request, template, _workbench_context(request, project))


@require_POST
@never_cache
@login_required
def vote(request, slug: str, assignment_id: int):
    project, assignment = _annotated_assignment(request, slug, assignment_id)
    form = VoteForm(request.POST)
    if not form.is_valid():
        return _respond(request, project, error=_form_error(form))
    data = form.cleaned_data
    answer = {
        "assignment": assignment,
        "annotator": request.user,
        "choice": data["choice"] or None,
        "value": data["value"],
        "rationale": data["rationale"],
        "time_on_task_ms": data["time_on_task_ms"],
    }
    claimed: Any = _CLAIM
    try:
        if request.htmx:  # the next pair is shown in this answer: claimed in the vote's transaction
            claimed = vote_submit_and_claim(**answer)[2]
        else:  # the redirect's page claims it
            vote_submit(**answer)
    except DomainError as exc:
        return _respond(request, project, error=str(exc))
    label = _option_label(project.scale, choice=data["choice"] or None, value=data["value"])
    return _respond(
        request,
        project,
        notice=f"Saved: {label}. Press u within a minute to undo.",
        claimed=claimed,
    )


@require_POST
@never_cache
@login_required
def skip(request, slug: str, assignment_id: int):
    project, assignment = _annotated_assignment(request, slug, assignment_id)
    form = SkipForm(request.POST)
    if not form.is_valid():
        return _respond(request, project, error=_form_error(form))
    try:
        assignment_skip(
            assignment=assignment,
            annotator=request.user,
            reason=form.cleaned_data["reason"],
            note=form.cleaned_data["note"],
        )
    except DomainError as exc:
        return _respond(request, project, error=str(exc))
    reason = Skip.Reason(form.cleaned_data["reason"]).label
    return _respond(
        request, project, notice=f"Skipped: {reason}. The curators will have a look; u undoes it."
    )


@require_POST
@never_cache
@login_required
def flag(request, slug: str, assignment_id: int):
    """Flags the pair on screen; the pair stays to vote on, unless "then" asks to skip it."""
    project, assignment = _annotated_assignment(request, slug, assignment_id)
    form = FlagForm(request.POST)
    draft = {"kind": request.POST.get("kind", ""), "note": request.POST.get("note", "")}
    if not form.is_valid():
        return _flag_refused(request, project, _form_error(form), draft)
    data = form.cleaned_data
    try:
        raised, _, skipped = assignment_flag(
            assignment=assignment,
            annotator=request.user,
            kind=data["kind"],
            note=data["note"],
            skip=data["then"] == "skip",
        )
    except DomainError as exc:
        return _flag_refused(request, project, str(exc), draft)
    kind = raised.get_kind_display()
    if skipped is not None:
        notice = f"Flagged ({kind}) and skipped. The curators' answer appears in My flags."
    else:
        notice = (
            f"Flagged: {kind}. Vote on the pair or skip it; the curators' answer appears in "
            "My flags."
        )
    return _respond(request, project, notice=notice)


@require_POST
@never_cache
@login_required
def undo(request, slug: str):
    project, _ = get_project_for_user(request.user, slug, roles=ANNOTATORS)
    undone = last_action_undo(annotator=request.user, project=project)
    if undone is None:
        return _respond(request, project, error=NOTHING_TO_UNDO)
    restored = _restored(undone, project.scale)
    what = "vote" if undone.vote is not None else "skip"
    return _respond(
        request,
        project,
        notice=f"Your last {what} was undone (you had chosen: {restored['phrase']}).",
        restored=restored,
    )


@require_POST
@never_cache
@login_required
def leave(request, slug: str):
    """The comparison page is left (closed, reloaded, navigated away: the page sends this
    beacon): the pair claimed ahead for it is freed for others."""
    project, _ = get_project_for_user(request.user, slug, roles=ANNOTATORS)
    ahead_leases_release(project=project, annotator=request.user)
    return HttpResponse(status=204)
