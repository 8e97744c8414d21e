"""The form of a best-of-N run on its page."""

from __future__ import annotations

from typing import cast

from django import forms

from annotation.models import Project
from judges.best_of_n.services import METHODS
from judges.models import Judge
from judges.roster.selectors import judges_for_project

_METHOD_LABELS = {
    "knockout": "Knockout: a single-elimination bracket, 2(N-1) calls per prompt",
    "scores": "Scores: every candidate against every other, N(N-1) calls per prompt",
}


class BestOfNForm(forms.Form):
    """A best-of-N run on its page: the candidates file as ``best_of_n``'s command line reads
    it, a judge the project may use, and the method."""

    candidates = forms.FileField(
        help_text='JSONL, one prompt per line: {"id", "prompt", "task", "criterion", '
        '"candidates": [{"id", "content"}, ...]} (docs/judges-evaluation.md, '
        '"Best-of-N").'
    )
    judge = forms.ModelChoiceField(queryset=Judge.objects.none(), to_field_name="name")
    method = forms.ChoiceField(
        choices=[(method, _METHOD_LABELS[method]) for method in METHODS], initial="knockout"
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        judge_field = cast(forms.ModelChoiceField, self.fields["judge"])
        judge_field.queryset = judges_for_project(project).filter(enabled=True).order_by("name")
