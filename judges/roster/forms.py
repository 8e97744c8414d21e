"""The form that adds or edits a judge on the judges page."""

from __future__ import annotations

from typing import cast

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput
from django.http import QueryDict

from annotation.models import Project
from judges.core.keys import api_key_env_refusal
from judges.models import Judge
from judges.roster.services import KIND_FIELDS, OPTIONS_HELP


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
