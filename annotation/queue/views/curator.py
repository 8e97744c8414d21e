"""The curator's queue page: where the queue stands, which disputes wait for whom (an extra
annotator, or a curator: the link to adjudication), who is annotating how fast, what was
skipped, how annotators do on gold pairs, and the levers (pause, priorities, stuck leases,
restrictions, enqueueing, gold pairs, unpausing an annotator)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.actions import action_apply
from annotation.core.json_input import text_refusal
from annotation.core.limits import MAX_LEASE_AGE_MINUTES, MAX_PAIR_IDS, MAX_PRIORITY, MIN_PRIORITY
from annotation.models import GOLD_MIN_VOTES, Pair, PairStatus, Project, Role
from annotation.pairs import actions as pair_actions
from annotation.pairs.selectors import pair_pks_by_external_id, project_tasks
from annotation.queue.selectors import (
    annotator_throughput,
    disputes_waiting,
    flagged_skips,
    gold_quality,
    queue_overview,
)
from annotation.queue.services import levers as queue

_ID_SEPARATORS = re.compile(r"[\s,]+")


class PairIdsField(forms.Field):
    """Pair ids as curators know them (the import's ``id``), separated by commas or whitespace."""

    widget = forms.Textarea(attrs={"rows": 2, "placeholder": "pair-001, pair-002 …"})

    def to_python(self, value) -> list[str]:
        text = "" if value in self.empty_values else str(value)
        if (problem := text_refusal(text)) is not None:  # forms.CharField's own check, here
            raise ValidationError(f"Pair ids: {problem}.")
        ids = list(dict.fromkeys(part for part in _ID_SEPARATORS.split(text) if part))
        if len(ids) > MAX_PAIR_IDS:
            raise ValidationError(f"At most {MAX_PAIR_IDS} pair ids at a time (got {len(ids)}).")
        return ids


class ProjectForm(forms.Form):
    """A form whose choices and checks depend on the project."""

    def __init__(self, *args, project: Project, **kwargs):
        self.project = project
        super().__init__(*args, **kwargs)

    def pair_pks(self, external_ids: list[str]) -> list[int]:
        """The pairs' primary keys; an unknown id is an error that names it."""
        found = pair_pks_by_external_id(project=self.project, external_ids=external_ids)
        unknown = [pair_id for pair_id in external_ids if pair_id not in found]
        if unknown:
            shown = ", ".join(unknown[:10]) + (" …" if len(unknown) > 10 else "")
            raise ValidationError(f"No pair with id {shown} in this project.", code="unknown_pairs")
        return [found[pair_id] for pair_id in external_ids]


class PauseForm(ProjectForm):
    paused = forms.TypedChoiceField(
        choices=[("1", "Pause"), ("0", "Resume")], coerce=lambda value: value == "1"
    )


class PriorityForm(ProjectForm):
    pair_ids = PairIdsField(required=False, label="Pair ids")
    task = forms.ChoiceField(required=False, label="or every pair of task")
    priority = forms.IntegerField(
        min_value=MIN_PRIORITY,
        max_value=MAX_PRIORITY,
        help_text="Higher is served first; 0 is normal.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The declared fields, by name: the mapping's type cannot say which class each one is.
        task_field = cast(forms.ChoiceField, self.fields["task"])
        task_field.choices = [("", "—")] + [
            (task, task) for task in project_tasks(project=self.project)
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        ids, task = data.get("pair_ids"), data.get("task")
        if ids and task:
            raise ValidationError("Give pair ids or a task, not both.")
        if ids:
            data["pks"] = self.pair_pks(ids)
        elif task:
            data["pks"] = list(
                Pair.objects.filter(project=self.project, task=task).values_list("pk", flat=True)
            )
        elif "pair_ids" in data and "task" in data:
            raise ValidationError("Give pair ids or choose a task.")
        return data


class ReleaseForm(ProjectForm):
    older_than_minutes = forms.IntegerField(
        min_value=0,
        max_value=MAX_LEASE_AGE_MINUTES,
        initial=30,
        label="Leases older than (minutes)",
    )


class RestrictForm(ProjectForm):
    pair_ids = PairIdsField(label="Pair ids")
    annotators = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Only these annotators may claim the pairs.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        annotators_field = cast(forms.ModelMultipleChoiceField, self.fields["annotators"])
        annotators_field.queryset = (
            get_user_model()
            .objects.filter(memberships__project=self.project, memberships__role=Role.ANNOTATOR)
            .order_by("username")
        )

    def clean_pair_ids(self):
        return self.pair_pks(self.cleaned_data["pair_ids"])


class EnqueueForm(ProjectForm):
    pair_ids = PairIdsField(required=False, label="Pair ids (empty: every imported pair)")

    def clean_pair_ids(self):
        ids = self.cleaned_data["pair_ids"]
        return self.pair_pks(ids) if ids else None


class GoldForm(ProjectForm):
    pair_ids = PairIdsField(label="Pair ids")
    label = forms.ChoiceField(label="Known answer", help_text="Annotators never see it.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        label_field = cast(forms.ChoiceField, self.fields["label"])
        label_field.choices = pair_actions.gold_label_choices(self.project)

    def clean_pair_ids(self):
        return self.pair_pks(self.cleaned_data["pair_ids"])


class UnpauseForm(ProjectForm):
    annotator = forms.ModelChoiceField(queryset=get_user_model().objects.none())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        annotator_field = cast(forms.ModelChoiceField, self.fields["annotator"])
        annotator_field.queryset = get_user_model().objects.filter(
            memberships__project=self.project,
            memberships__role=Role.ANNOTATOR,
            memberships__paused=True,
        )


def _apply_pause(project: Project, data: dict, actor) -> str:
    queue.project_pause(actor=actor, project=project, paused=data["paused"])
    if data["paused"]:
        return "Project paused: annotators get no new pairs until you resume it."
    return "Project resumed: annotators get pairs again."


def _apply_priority(project: Project, data: dict, actor) -> str:
    return pair_actions.set_priority(
        actor=actor, project=project, pair_ids=data["pks"], priority=data["priority"]
    )


def _apply_release(project: Project, data: dict, actor) -> str:
    count = queue.leases_release(
        actor=actor, project=project, older_than_minutes=data["older_than_minutes"]
    )
    leases = pair_actions.plural(count, "lease")
    return f"Released {leases}; their slots are free for other annotators."


def _apply_restrict(project: Project, data: dict, actor) -> str:
    return pair_actions.restrict(
        actor=actor, project=project, pair_ids=data["pair_ids"], annotators=data["annotators"]
    )


def _apply_enqueue(project: Project, data: dict, actor) -> str:
    return pair_actions.enqueue(project=project, pair_ids=data["pair_ids"])


def _apply_gold(project: Project, data: dict, actor) -> str:
    return pair_actions.set_gold(
        actor=actor, project=project, pair_ids=data["pair_ids"], label=data["label"]
    )


def _apply_unpause(project: Project, data: dict, actor) -> str:
    queue.membership_unpause(actor=actor, project=project, annotator=data["annotator"])
    return (
        f"{data['annotator'].get_username()} can annotate again; their gold accuracy is"
        " judged afresh from now on."
    )


ACTIONS: dict[str, tuple[type[ProjectForm], Callable[[Project, dict, Any], str]]] = {
    "pause": (PauseForm, _apply_pause),
    "priority": (PriorityForm, _apply_priority),
    "release": (ReleaseForm, _apply_release),
    "restrict": (RestrictForm, _apply_restrict),
    "enqueue": (EnqueueForm, _apply_enqueue),
    "gold": (GoldForm, _apply_gold),
    "unpause": (UnpauseForm, _apply_unpause),
}


def _render_page(request, project: Project, bound: dict | None = None, status: int = 200):
    forms_by_action = {
        name: form_class(project=project, prefix=name) for name, (form_class, _) in ACTIONS.items()
    }
    forms_by_action.update(bound or {})
    overview = queue_overview(project=project)
    context = {
        "project": project,
        "role": Role.CURATOR,
        "overview": overview,
        "disputes": disputes_waiting(project=project) if overview["disputes_waiting"] else [],
        "throughput": annotator_throughput(project=project),
        "skips": flagged_skips(project=project),
        "gold": gold_quality(project=project),
        "gold_min_votes": GOLD_MIN_VOTES,
        "forms": forms_by_action,
        "imported": PairStatus.IMPORTED,
    }
    return render(request, "annotation/curator_queue.html", context, status=status)


@require_GET
@login_required
def curator_queue(request, slug: str):
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    return _render_page(request, project)


@require_POST
@login_required
def curator_queue_action(request, slug: str, action: str):
    """One lever of the queue page: validate its form, call its service, come back."""
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    form, applied = action_apply(
        request, project, ACTIONS, action, unknown="No such queue action", prefix=action
    )
    if applied:
        return redirect("curator-queue", slug=project.slug)
    return _render_page(request, project, bound={action: form}, status=400)
