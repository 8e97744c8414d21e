from __future__ import annotations

from typing import cast

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput
from django.http import QueryDict

from annotation.models import Project, Release
from judges.evaluation import DEFAULT_SEED, MAX_SEED
from judges.keys import api_key_env_refusal
from judges.models import Judge, JudgeEvaluation
from judges.selectors import judges_for_project
from judges.services.best_of_n import METHODS
from judges.services.ensemble import DEFAULT_EASY_THRESHOLD, easy_votes
from judges.services.judges import KIND_FIELDS, OPTIONS_HELP
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


class _OptionsField(forms.JSONField):
    """The judge's ``options``: JSON whose nesting the parser could not follow is refused
    like any other invalid JSON."""

    def to_python(self, value):
        try:
            return super().to_python(value)
        except RecursionError:
            raise ValidationError("Nested too deeply.", code="invalid") from None

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except RecursionError:
            return InvalidJSONInput(data)


# Labels where the field's name does not read well.
_LABELS = {
    "base_url": "Base URL",
    "api_key_env": "API key variable",
    "timeout_s": "Timeout (seconds)",
    "max_image_side": "Largest image side (pixels)",
    "video_frames": "Frames per video",
    "video_frame_side": "Largest video frame side (pixels)",
    "takes_audio": "Takes audio (input_audio parts)",
}

# The judges page's fields besides name, kind and projects, in the order shown.
JUDGE_SETTINGS = (
    "enabled",
    *dict.fromkeys(field for fields in KIND_FIELDS.values() for field in fields),
    "options",
)


class JudgeForm(forms.Form):
    """A judge's settings on the judges page, for ``judge_create`` (name and kind too) or
    ``judge_update``; each field applies to the kinds its label names, the service checks the
    rest (the same checks as ``add_judge``)."""

    name = forms.SlugField(max_length=Judge._meta.get_field("name").max_length)
    kind = forms.ChoiceField(choices=Judge.Kind.choices)
    projects = forms.ModelMultipleChoiceField(
        queryset=Project.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Projects whose curators may run this judge; none: every project.",
    )

    def __init__(self, *args, judge: Judge | None = None, **kwargs) -> None:
        if judge is not None:
            kwargs["initial"] = {
                "name": judge.name,
                "kind": judge.kind,
                "projects": list(judge.projects.all()),
                **{field: getattr(judge, field) for field in JUDGE_SETTINGS},
            }
        super().__init__(*args, **kwargs)
        self.judge = judge
        for field, form_field in forms.fields_for_model(Judge, fields=JUDGE_SETTINGS).items():
            form_field.required = False
            form_field.label = _LABELS.get(field, form_field.label)
            kinds = [kind for kind, fields in KIND_FIELDS.items() if field in fields]
            if kinds:
                form_field.label = f"{form_field.label} ({', '.join(kinds)})"
            self.fields[field] = form_field
        self.fields["options"] = _OptionsField(
            required=False,
            initial=dict,
            help_text=OPTIONS_HELP,
            widget=forms.Textarea(attrs={"rows": 3}),
        )
        self.fields[
            "api_key_env"
        ].help_text = f"{api_key_env_refusal()} The key itself is read at call time, never stored."
        self.fields["checkpoint"].help_text = "A path under ARBITER_CHECKPOINT_ROOT."
        if judge is not None:
            # Runs, evaluations and the command line know a judge by its name and kind.
            for field in ("name", "kind"):
                self.fields[field].disabled = True
            for field in set(JUDGE_SETTINGS) - {"enabled", "options", *KIND_FIELDS[judge.kind]}:
                del self.fields[field]

    def service_kwargs(self) -> dict:
        """The cleaned values as ``judge_create``'s or ``judge_update``'s arguments: the
        settings of the judge's kind; a new judge leaves blank ones at their defaults."""
        data = self.cleaned_data
        kind = self.judge.kind if self.judge else data["kind"]
        values = {"projects": data["projects"], "enabled": bool(data["enabled"])}
        for field in (*KIND_FIELDS[kind], "options"):
            value = data.get(field)
            if field == "options":
                value = value or {}
            if self.judge is not None or value not in (None, ""):
                values[field] = value
        if self.judge is None:
            values.update(name=data["name"], kind=kind)
        return values

    def forget_api_key_env(self) -> None:
        """A refused ``api_key_env`` is not shown again: someone may have pasted the key."""
        if "api_key_env" in self.errors and "api_key_env" in self.data:
            data = cast(QueryDict, self.data).copy()
            data["api_key_env"] = ""
            self.data = data


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
