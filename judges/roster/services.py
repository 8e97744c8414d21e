"""Creating and checking judges. A judge's configuration is checked per kind before it is
saved, so a filter run never starts with a judge that cannot work."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.audit.services import audit_changes, audit_record
from annotation.models import Project
from judges.core.keys import api_key_env_allowed, api_key_env_refusal
from judges.models import Judge
from judges.prompts import ANSWER_FORMATS, PLACEHOLDERS, PRESETS, TemplateError, template_fields

# The fields each kind reads besides ``options``; the others keep their defaults. The
# command line's flags and the judges page's form offer exactly these.
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    Judge.Kind.OPENAI: (
        "base_url",
        "model",
        "api_key_env",
        "concurrency",
        "temperature",
        "max_tokens",
        "timeout_s",
        "requests_per_minute",
        "max_image_side",
        "video_frames",
        "video_frame_side",
        "takes_audio",
    ),
    Judge.Kind.REWARD_MODEL: ("checkpoint", "device", "batch_size"),
    Judge.Kind.HEURISTIC: (),
    Judge.Kind.SCORES: (),
}

# More frames than this make one request of many megabytes for little more to see.
MAX_VIDEO_FRAMES = 64

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")

# The ``options`` keys each kind reads (see docs/judges.md), and what each must be.
OPTIONS: dict[str, dict[str, str]] = {
    Judge.Kind.OPENAI: {
        "max_retries": "an integer from 0 to 10",
        "retry_base_s": "a number of seconds above 0",
        "retry_max_s": "a number of seconds above 0",
        "rubrics": "an object mapping a task family to rubric text",
        "prompt": f"a preset: {', '.join(PRESETS)}",
        "prompt_template": "the prompt's text with placeholders (docs/judges.md)",
        "answer_format": f"one of {', '.join(ANSWER_FORMATS)}",
    },
    Judge.Kind.REWARD_MODEL: {"tie_margin": "a number from 0 to 0.5"},
    Judge.Kind.HEURISTIC: {"confidence": "a number from 0.5 to 1"},
    Judge.Kind.SCORES: {
        "scores_key": "the key under metadata.scores (default: the judge's name)",
        "tie_margin": "a number from 0 to 0.5",
    },
}
OPTIONS_HELP = (
    "Kind-specific settings as JSON. openai: max_retries, retry_base_s, retry_max_s, "
    'rubrics ({"t2i"|"edit"|"interleaved"|"reasoning"|"text": "rubric text"}), '
    f"prompt (a preset: {', '.join(PRESETS)}), prompt_template (own text with placeholders "
    f"{', '.join('{' + name + '}' for name in PLACEHOLDERS)}), answer_format "
    f"({', '.join(ANSWER_FORMATS)}). "
    "reward_model: tie_margin. heuristic: confidence. scores: scores_key, tie_margin. "
    'A scores judge reads each pair\'s metadata {"scores": {KEY: {"A": 0.7, "B": 0.2}}} '
    '(higher is better) or per-order verdicts {"scores": {KEY: {"AB": "A", "BA": "tie"}}} '
    '(a side or {"side": "A", "confidence": 0.8}); KEY is scores_key or the judge\'s name.'
)


def base_url_ok(url: str) -> bool:
    """An http(s) URL with a host; cluster-internal hosts without dots
    (``http://vllm:8000/v1``) are fine."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.query


def _number(value, low: float, high: float, *, low_open: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return (value > low if low_open else value >= low) and value <= high


_OPTION_CHECKS = {
    "max_retries": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10,
    "retry_base_s": lambda v: _number(v, 0, 600, low_open=True),
    "retry_max_s": lambda v: _number(v, 0, 3600, low_open=True),
    "rubrics": lambda v: (
        isinstance(v, dict)
        and all(k in ("t2i", "edit", "interleaved", "reasoning", "text") for k in v)
        and all(isinstance(text, str) and text.strip() for text in v.values())
    ),
    "tie_margin": lambda v: _number(v, 0, 0.5),
    "confidence": lambda v: _number(v, 0.5, 1),
    "scores_key": lambda v: isinstance(v, str) and v.strip() != "",
    "prompt": lambda v: v in PRESETS,
    "prompt_template": lambda v: isinstance(v, str) and v.strip() != "",
    "answer_format": lambda v: v in ANSWER_FORMATS,
}


def judge_check(judge: Judge) -> None:
    """Raises ``ValidationError`` naming each field that does not suit the judge's kind."""
    errors: dict[str, str] = {}
    kind = judge.kind
    if kind == Judge.Kind.OPENAI:
        if not judge.base_url:
            errors["base_url"] = "An openai judge needs a base URL (e.g. http://host:8000/v1)."
        elif not base_url_ok(judge.base_url):
            errors["base_url"] = "The base URL must be http(s)://host[:port][/path]."
        if not judge.model:
            errors["model"] = "An openai judge needs a model name."
        # The value is never echoed: someone may have pasted the key itself here.
        if judge.api_key_env and not (
            ENV_VAR_NAME.match(judge.api_key_env) and api_key_env_allowed(judge.api_key_env)
        ):
            errors["api_key_env"] = api_key_env_refusal()
        if judge.concurrency < 1:
            errors["concurrency"] = "At least 1 request must be allowed in flight."
        if not judge.timeout_s > 0:
            errors["timeout_s"] = "The timeout must be above 0 seconds."
        if not 0 <= judge.temperature <= 2:
            errors["temperature"] = "The temperature must be from 0 to 2."
        if judge.max_tokens < 1:
            errors["max_tokens"] = "Allow at least 1 token."
        if judge.max_image_side < 16:
            errors["max_image_side"] = "The maximum image side must be at least 16 pixels."
        # None: a blank field, which full_clean reports
        if judge.video_frames is not None and not 1 <= judge.video_frames <= MAX_VIDEO_FRAMES:
            errors["video_frames"] = f"Send from 1 to {MAX_VIDEO_FRAMES} frames of a video."
        if judge.video_frame_side is not None and judge.video_frame_side < 16:
            errors["video_frame_side"] = "The largest video frame side must be at least 16 pixels."
    elif kind == Judge.Kind.REWARD_MODEL:
        if not DEVICE.match(judge.device or ""):
            errors["device"] = "The device must be cpu, cuda or cuda:N."
        if judge.batch_size < 1:
            errors["batch_size"] = "The batch size must be at least 1."
        if not judge.checkpoint:
            errors["checkpoint"] = "A reward_model judge needs a checkpoint path."
        else:
            # Here, not at the top: only checking a reward-model judge loads torch.
            from judges.reward_model.model import CheckpointError, checkpoint_local, load_checkpoint

            # Loaded on the CPU here: the machine checking may not be the GPU worker.
            try:
                with checkpoint_local(judge.checkpoint) as path:
                    load_checkpoint(path, "cpu")
            except CheckpointError as exc:
                errors["checkpoint"] = str(exc)
    elif kind not in Judge.Kind.values:
        errors["kind"] = f"Unknown kind; choose one of {', '.join(Judge.Kind.values)}."
    options_error = _options_error(kind, judge.options)
    if options_error:
        errors["options"] = options_error
    if errors:
        raise ValidationError(errors)


def _options_error(kind: str, options) -> str:
    if not isinstance(options, dict):
        return "Options must be a JSON object."
    known = OPTIONS.get(kind, {})
    unknown = sorted(set(options) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        return f"Unknown option(s) {', '.join(unknown)} for kind {kind} (allowed: {allowed})."
    for key, value in options.items():
        if not _OPTION_CHECKS[key](value):
            return f"Option {key} must be {known[key]}."
    if "prompt_template" in options:
        try:
            template_fields(options["prompt_template"])
        except TemplateError as exc:
            return f"Option prompt_template: {exc}."
    return ""


def _check_all(judge: Judge) -> None:
    """The model's own checks and the kind's, every error at once."""
    errors: dict[str, list[str]] = {}
    try:
        judge.full_clean()
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        judge_check(judge)
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def judge_create(
    *, name: str, kind: str, projects: Iterable[Project] = (), actor=None, **fields
) -> Judge:
    """Creates a judge after checking its fields and its kind's requirements. ``projects``:
    the projects that may run it; none means every project (docs/judges.md). Recorded in the
    audit log, site-wide, as ``actor``'s (None: the command line or a training run)."""
    judge = Judge(name=name, kind=kind, **fields)
    _check_all(judge)
    judge.save()
    judge.projects.set(projects)
    after = {"name": name, "kind": kind, **_audited(judge, fields)}
    audit_record(actor=actor, project=None, action="judge.created", target=judge, after=after)
    return judge


def _audited(judge: Judge, fields) -> dict:
    """A judge's settings as the audit log records them (an API key's variable name, never
    a key: judges read keys from the environment)."""
    values = {field: getattr(judge, field) for field in fields}
    values["enabled"] = judge.enabled
    values["projects"] = sorted(judge.projects.values_list("slug", flat=True))
    return values


@transaction.atomic
def judge_update(
    *, judge: Judge, projects: Iterable[Project], enabled: bool, actor=None, **fields
) -> Judge:
    """Changes a judge's settings (its kind's ``KIND_FIELDS`` and ``options``), whether it is
    enabled and which projects may run it, checked as ``judge_create`` checks a new one. The
    name and kind stay: runs, evaluations and the command line refer to them."""
    locked = Judge.objects.select_for_update().get(pk=judge.pk)
    allowed = {*KIND_FIELDS[locked.kind], "options"}
    if unknown := sorted(set(fields) - allowed):
        raise ValidationError(f"Not settings of a {locked.kind} judge: {', '.join(unknown)}.")
    old = _audited(locked, fields)
    for field, value in fields.items():
        setattr(locked, field, value)
    locked.enabled = enabled
    _check_all(locked)
    locked.save(update_fields=[*fields, "enabled"])
    locked.projects.set(projects)
    before, after = audit_changes(old, _audited(locked, fields))
    if after:
        audit_record(
            actor=actor,
            project=None,
            action="judge.changed",
            target=locked,
            before=before,
            after=after,
        )
    return locked


def disabled_judges_message(judges: Iterable[Judge]) -> str | None:
    """What refuses work for disabled judges, or None when every one is enabled: a disabled
    judge is never called, whatever asks (docs/judges.md, "Disabling a judge")."""
    if disabled := [judge.name for judge in judges if not judge.enabled]:
        return f"Disabled judges cannot run: {', '.join(disabled)}."
    return None


def check_judge_enabled(judge: Judge) -> None:
    """ValidationError on ``judge`` when it is disabled: nothing may call it."""
    if (message := disabled_judges_message([judge])) is not None:
        raise ValidationError({"judge": message})
