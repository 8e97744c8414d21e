from __future__ import annotations

from typing import cast

from django import forms

from annotation.models import Project
from judges.evaluation import DEFAULT_SEED
from judges.models import Judge
from judges.selectors import judges_for_project
from judges.services.ensemble import DEFAULT_EASY_THRESHOLD, easy_votes

_AT_DEFAULT = ", ".join(
    f"{easy_votes(threshold=DEFAULT_EASY_THRESHOLD, judges=n)} with {n} judges" for n in (9, 3)
)


class FilterRunForm(forms.Form):
    judges = forms.ModelMultipleChoiceField(
        queryset=Judge.objects.none(), widget=forms.CheckboxSelectMultiple
    )
    threshold = forms.FloatField(
        initial=DEFAULT_EASY_THRESHOLD,
        min_value=0.5,
        max_value=1.0,
        help_text=(
            "A pair is easy when one side holds at least this share of all valid votes "
            f"(both orders; at {DEFAULT_EASY_THRESHOLD:g}: {_AT_DEFAULT})."
        ),
    )
    budget_per_task = forms.IntegerField(
        required=False,
        min_value=1,
        label="Budget per task",
        help_text="Queue only the N most contested pairs per task; blank queues all of them.",
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Another project's judge is "not one of the available choices", like an unknown id.
        # Declared above as a ModelMultipleChoiceField; ``fields`` is typed by the base class.
        judges = cast(forms.ModelMultipleChoiceField, self.fields["judges"])
        judges.queryset = judges_for_project(project).filter(enabled=True).order_by("name")

    def clean_threshold(self) -> float:
        threshold = self.cleaned_data["threshold"]
        if threshold <= 0.5:
            raise forms.ValidationError("Must be above 0.5, so the easy side is a majority.")
        return threshold


class EvaluationForm(forms.Form):
    """Starts a judge evaluation on the leaderboard page: a judge the project may use and a
    target (the current consensus or a published release)."""

    judge = forms.ModelChoiceField(queryset=Judge.objects.none(), to_field_name="name")
    release = forms.ChoiceField(label="Target", required=False)
    seed = forms.IntegerField(
        min_value=0, initial=DEFAULT_SEED, help_text="Seed of the bootstrap intervals."
    )

    def __init__(self, *args, project, releases: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        judge_field = cast(forms.ModelChoiceField, self.fields["judge"])
        judge_field.queryset = judges_for_project(project).filter(enabled=True)
        release_field = cast(forms.ChoiceField, self.fields["release"])
        release_field.choices = [("", "Current consensus")] + [
            (version, f"Release {version}") for version in releases
        ]
