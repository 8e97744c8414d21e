"""The form that starts a filter run on the runs page."""

from __future__ import annotations

from typing import cast

from django import forms

from annotation.models import Project
from judges.ensemble import DEFAULT_EASY_THRESHOLD, default_min_votes, easy_votes
from judges.models import Judge
from judges.roster.selectors import judges_for_project

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
    min_valid_votes = forms.IntegerField(
        required=False,
        min_value=1,
        label="Minimum valid votes",
        help_text=(
            "A pair is easy only with at least this many valid votes: a judge that skips a "
            "pair (it is not sent its video or audio), fails or answers unreadably gives none. "
            "Blank: one per judge, half of what every judge in both orders gives "
            f"({default_min_votes(9)} of 18 with 9 judges), so a pair every judge voted on is "
            "decided by the share alone."
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
