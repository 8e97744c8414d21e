"""The form that starts a judge evaluation on the leaderboard page."""

from __future__ import annotations

from typing import cast

from django import forms

from judges.evaluation.scoring import DEFAULT_SEED, MAX_SEED
from judges.models import Judge, JudgeEvaluation
from judges.roster.selectors import judges_for_project


class EvaluationForm(forms.Form):
    """Starts a judge evaluation on the leaderboard page: a judge the project may use and a
    target (the current consensus, a published release, or the imported reference labels
    when the project has any)."""

    judge = forms.ModelChoiceField(queryset=Judge.objects.none(), to_field_name="name")
    release = forms.ChoiceField(label="Target", required=False)
    seed = forms.IntegerField(
        min_value=0,
        max_value=MAX_SEED,
        initial=DEFAULT_SEED,
        help_text="Seed of the bootstrap intervals.",
    )

    def __init__(self, *args, project, releases: list[str], reference: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        judge_field = cast(forms.ModelChoiceField, self.fields["judge"])
        judge_field.queryset = judges_for_project(project).filter(enabled=True)
        release_field = cast(forms.ChoiceField, self.fields["release"])
        choices = [("", "Current consensus")] + [
            (version, f"Release {version}") for version in releases
        ]
        if reference:
            choices.append((JudgeEvaluation.REFERENCE, "Reference labels"))
        release_field.choices = choices
