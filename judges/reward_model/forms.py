"""The form that starts a reward-model training on its page."""

from __future__ import annotations

from typing import cast

from django import forms

from annotation.models import Project, Release
from judges.reward_model.options import DEVICES, LIMITS, TrainingOptions

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
        help_text="cuda needs a GPU worker on the training queue.",
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
