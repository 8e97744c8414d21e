from __future__ import annotations

from typing import cast

from django import forms
from django.core.exceptions import ValidationError

from annotation.models import Project, Release
from judges.evaluation import DEFAULT_SEED
from judges.models import Judge, JudgeEvaluation
from judges.selectors import judges_for_project
from judges.services.ensemble import DEFAULT_EASY_THRESHOLD, easy_votes
from judges.training.trainer import DEVICES, LIMITS, TrainingOptions


def add_service_errors(form: forms.Form, exc: ValidationError) -> None:
    """A service's ``ValidationError`` on the form: on the field it names when the form has
    one, else above the fields."""
    for field, errors in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errors)


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
    target (the current consensus, a published release, or the imported reference labels
    when the project has any)."""

    judge = forms.ModelChoiceField(queryset=Judge.objects.none(), to_field_name="name")
    release = forms.ChoiceField(label="Target", required=False)
    seed = forms.IntegerField(
        min_value=0, initial=DEFAULT_SEED, help_text="Seed of the bootstrap intervals."
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


_DEFAULTS = TrainingOptions()


def _limits(name: str) -> dict:
    low, high = LIMITS[name]
    return {"min_value": low, "max_value": high, "initial": getattr(_DEFAULTS, name)}


class TrainingForm(forms.Form):
    """A reward-model training's source and options; the ranges are the trainer's
    (``LIMITS``)."""

    source = forms.ChoiceField(
        required=False,
        label="Train on",
        help_text="The current consensus (pairs with a side; ties are left out), or a built "
        "release's rows (its train split when it has one).",
    )
    features = forms.ChoiceField(
        choices=[
            ("hashed", "Hashed words (fast)"),
            ("minilm", "MiniLM sentence embeddings"),
        ],
        initial=_DEFAULTS.features,
        help_text="How texts become features: hashed word unigrams and bigrams learned from "
        "scratch, or frozen all-MiniLM-L6-v2 embeddings (offline weights).",
    )
    epochs = forms.IntegerField(**_limits("epochs"))
    lr = forms.FloatField(label="Learning rate", **_limits("lr"))
    batch_size = forms.IntegerField(label="Batch size", **_limits("batch_size"))
    seed = forms.IntegerField(
        help_text="The same seed on the same data gives the same weights.", **_limits("seed")
    )
    patience = forms.IntegerField(
        help_text="Stop after this many epochs without a better held-out accuracy.",
        **_limits("patience"),
    )
    holdout = forms.FloatField(
        label="Held-out share",
        help_text="Share of the prompts held out (each prompt's pairs stay on one side).",
        **_limits("holdout"),
    )
    device = forms.ChoiceField(
        choices=[(d, d) for d in DEVICES],
        initial=_DEFAULTS.device,
        help_text="cuda needs a GPU worker on the judges_gpu queue.",
    )
    register = forms.SlugField(
        required=False,
        max_length=80,
        label="Register as judge",
        help_text="Optional: a judge name; the trained model becomes a reward_model judge of "
        "this project, for the next filter run.",
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        releases = Release.objects.filter(
            project=project, status__in=[Release.Status.BUILT, Release.Status.PUBLISHED]
        ).order_by("-created_at")
        cast(forms.ChoiceField, self.fields["source"]).choices = [
            ("", "Current consensus"),
            *(
                (r.version, f"Release {r.version} ({r.get_status_display().lower()})")
                for r in releases
            ),
        ]

    def options(self) -> TrainingOptions:
        data = self.cleaned_data
        return TrainingOptions(**{name: data[name] for name in _DEFAULTS.as_dict()})
