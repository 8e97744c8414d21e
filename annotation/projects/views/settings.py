"""A project's settings page for its curators: the members (add, change a role, remove) and
the project's own settings, with a live preview of the guidelines."""

from __future__ import annotations

from typing import TypedDict

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.markdown import render_markdown
from annotation.models import (
    GOLD_MIN_VOTES,
    ConsensusRule,
    Invitation,
    Membership,
    Project,
    Role,
    Scale,
)
from annotation.pairs import actions as pair_actions
from annotation.projects.services import (
    MAX_GUIDELINES_CHARS,
    SETTING_RANGES,
    ProjectUpdated,
    SettingLimits,
    member_add,
    member_remove,
    member_role_change,
    project_setting_limits,
    project_update,
)

PAGE = "annotation/settings.html"


def _bounded(field: str, form_class=forms.IntegerField, **kwargs) -> forms.Field:
    low, high = SETTING_RANGES[field]
    return form_class(min_value=low, max_value=high, **kwargs)


class Identity(TypedDict, total=False):
    """Who ``member_add`` adds: a username or an email."""

    username: str
    email: str


class ProjectSettingsForm(forms.Form):
    name = forms.CharField(max_length=Project._meta.get_field("name").max_length)
    guidelines = forms.CharField(
        required=False,
        max_length=MAX_GUIDELINES_CHARS,
        widget=forms.Textarea(attrs={"rows": 12}),
        help_text="Markdown; annotators see it on the comparison page.",
    )
    scale = forms.ChoiceField(choices=Scale.choices)
    # Not required: a client that leaves it out keeps the project's rule.
    consensus_rule = forms.ChoiceField(
        choices=ConsensusRule.choices,
        required=False,
        help_text="How a pair's votes become its label (docs/agreement.md). Saving a new rule"
        " re-applies it to the decided pairs: no vote changes, adjudicated pairs keep theirs.",
    )
    overlap = _bounded("overlap", help_text="Independent votes each pair gets.")
    min_agree = _bounded("min_agree", help_text="Votes on one side for a majority consensus.")
    max_extra_votes = _bounded(
        "max_extra_votes", help_text="Extra annotators a disputed pair may get."
    )
    lease_minutes = _bounded("lease_minutes", help_text="How long an annotator holds a pair.")
    require_rationale = forms.BooleanField(required=False, help_text="Ask for a reason per vote.")
    gold_rate = _bounded(
        "gold_rate", forms.FloatField, help_text="Share of claims that serve a gold pair."
    )
    gold_min_accuracy = _bounded(
        "gold_min_accuracy",
        forms.FloatField,
        help_text=f"Share of gold pairs an annotator must get right, judged after {GOLD_MIN_VOTES}"
        " gold votes.",
    )
    gold_pause = forms.BooleanField(
        required=False, help_text="Pause an annotator whose gold accuracy falls below it."
    )
    min_seconds_per_vote = _bounded(
        "min_seconds_per_vote",
        help_text="Seconds an annotator must look at a pair before a vote is taken (0: off).",
    )
    play_to_end = forms.BooleanField(
        required=False,
        label="Play each response to the end before voting",
        help_text="A vote is refused until the longer response's video and audio could have"
        " played to the end at normal speed since the pair was served.",
    )
    media_serve_source = forms.BooleanField(
        required=False,
        label="Serve the original media files (weakens the blinding)",
        help_text="Annotators' browsers receive each image, video, audio clip and 3D model as"
        " it came: its format, size, metadata and all, which can tell one model's files from"
        " another's. Off (the default), they receive a copy rebuilt without any of that.",
    )
    history_shows_consensus = forms.BooleanField(
        required=False,
        label="Show annotators whether their vote matched the consensus (reveals a summary of"
        " others' votes)",
        help_text="On each annotator's own history (My votes), for decided pairs only: matched,"
        " differed or tie. It tells them something of the other annotators' votes; pairs still"
        " collecting votes never say anything. Off by default.",
    )
    paused = forms.BooleanField(required=False, help_text="Annotators get no new pairs.")

    def __init__(self, *args, project: Project, limits: SettingLimits, **kwargs):
        kwargs["initial"] = {name: getattr(project, name) for name in self.base_fields}
        super().__init__(*args, **kwargs)
        self.fields["guidelines"].widget.attrs.update(
            {
                "hx-post": reverse("project-guidelines-preview", args=[project.slug]),
                "hx-trigger": "input changed delay:400ms",
                "hx-target": "#guidelines-preview",
            }
        )
        if limits.scale_locked_because:
            self.fields["scale"].disabled = True
            self.fields["scale"].help_text = f"Locked: {limits.scale_locked_because}"
        if limits.overlap_floor_because:
            self.fields["overlap"].help_text = limits.overlap_floor_because
            self.fields["overlap"].widget.attrs["min"] = limits.overlap_floor


class MemberAddForm(forms.Form):
    user = forms.CharField(
        label="Username or email",
        max_length=254,
        help_text="A new account is created when there is none, with a one-time password.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANNOTATOR)

    def identity(self) -> Identity:
        """``member_add``'s username or email argument."""
        value = self.cleaned_data["user"].strip()
        return {"email": value} if "@" in value else {"username": value}


class InviteForm(forms.Form):
    email = forms.EmailField(max_length=254, help_text="The link in the mail works once.")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANNOTATOR)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


def add_errors(form: forms.Form, exc: ValidationError, aliases: dict[str, str]) -> None:
    """A service's errors on the form fields they name (``aliases`` maps service names)."""
    for field, field_messages in exc.message_dict.items():
        target = aliases.get(field, field)
        form.add_error(target if target in form.fields else None, field_messages)


def render_settings(request, project: Project, *, status: int = 200, **context):
    limits = project_setting_limits(project=project)
    context.setdefault("project_form", ProjectSettingsForm(project=project, limits=limits))
    context.setdefault("add_form", MemberAddForm())
    context.setdefault("invite_form", InviteForm())
    members = (
        Membership.objects.filter(project=project)
        .select_related("user")
        .order_by("role", "user__username")
    )
    context.update(
        invitations=Invitation.objects.filter(
            project=project, accepted_at=None, revoked_at=None
        ).order_by("email"),
        project=project,
        role=Role.CURATOR,
        members=members,
        roles=Role.choices,
        preview=render_markdown(project.guidelines),
    )
    return render(request, PAGE, context, status=status)


def _curated(request, slug: str) -> Project:
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    return project


def _curated_membership(request, slug: str, membership_id: int) -> tuple[Project, Membership]:
    """The project its curator changes a member of, and that membership (404 in another)."""
    project = _curated(request, slug)
    membership = get_object_or_404(
        Membership.objects.select_related("user", "project"), pk=membership_id, project=project
    )
    return project, membership


@require_GET
@never_cache
@login_required
def settings_page(request, slug: str):
    return render_settings(request, _curated(request, slug))


@require_POST
@never_cache
@login_required
def settings_project(request, slug: str):
    project = _curated(request, slug)
    form = ProjectSettingsForm(
        request.POST, project=project, limits=project_setting_limits(project=project)
    )
    if form.is_valid():
        try:
            updated = project_update(project=project, actor=request.user, **form.cleaned_data)
        except ValidationError as exc:
            add_errors(form, exc, {})
        else:
            messages.success(request, _saved_message(updated))
            return redirect("project-settings", slug=project.slug)
    return render_settings(request, project, project_form=form, status=400)


def _saved_message(updated: ProjectUpdated) -> str:
    """What saving did beyond the settings: the rule re-applied, disputes sent on."""
    text = "Project settings saved."
    if updated.reapplied is not None:
        text += f" {updated.reapplied.summary()}"
    if updated.settled:
        text += (
            f" {pair_actions.plural(updated.settled, 'dispute')} went to adjudication: nobody"
            " left could give the extra vote, or it was past the cap."
        )
    return text


@require_POST
@login_required
def guidelines_preview(request, slug: str):
    """The guidelines as annotators will see them, rendered by the safe Markdown renderer."""
    _curated(request, slug)
    text = request.POST.get("guidelines", "")[:MAX_GUIDELINES_CHARS]
    return render(request, f"{PAGE}#guidelines_preview", {"preview": render_markdown(text)})


@require_POST
@never_cache
@login_required
def settings_member_add(request, slug: str):
    """Adds a member. A new account's one-time password is in this response only."""
    project = _curated(request, slug)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            added = member_add(
                project=project,
                role=form.cleaned_data["role"],
                one_time_password=True,
                actor=request.user,
                **form.identity(),
            )
        except ValidationError as exc:
            add_errors(form, exc, {"username": "user", "email": "user"})
        else:
            user = added.membership.user
            verb = "Created the account" if added.created else "Added"
            messages.success(
                request, f"{verb} {user.get_username()} as {added.membership.get_role_display()}."
            )
            return render_settings(request, project, added=added)
    return render_settings(request, project, add_form=form, status=400)


@require_POST
@never_cache
@login_required
def settings_member_role(request, slug: str, membership_id: int):
    project, membership = _curated_membership(request, slug, membership_id)
    form = MemberRoleForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(form.errors)
        changed = member_role_change(
            membership=membership, role=form.cleaned_data["role"], actor=request.user
        )
    except ValidationError as exc:
        return render_settings(
            request, project, member_error=(membership.pk, exc.messages), status=400
        )
    messages.success(request, f"{changed.user.get_username()} is now {changed.get_role_display()}.")
    return redirect("project-settings", slug=project.slug)


@require_POST
@never_cache
@login_required
def settings_member_remove(request, slug: str, membership_id: int):
    project, membership = _curated_membership(request, slug, membership_id)
    try:
        member_remove(membership=membership, actor=request.user)
    except ValidationError as exc:
        return render_settings(
            request, project, member_error=(membership.pk, exc.messages), status=400
        )
    messages.success(request, f"Removed {membership.user.get_username()} from the project.")
    return redirect("project-settings", slug=project.slug)
