"""Judge API keys: which environment variables a judge may name, and keeping a key's value out
of everything recorded (docs/judges.md, "API key")."""

from __future__ import annotations

from fnmatch import fnmatchcase

from django.conf import settings

REDACTED = "[redacted]"
# A shorter key would match ordinary text; the key is sent but not searched for.
MIN_REDACTED_KEY_CHARS = 4


def api_key_env_allowed(name: str) -> bool:
    """Whether a judge may read the variable ``name``: it matches ARBITER_JUDGE_KEY_ENV_PATTERN."""
    return fnmatchcase(name, settings.ARBITER_JUDGE_KEY_ENV_PATTERN)


def api_key_env_refusal() -> str:
    """Why a variable is refused; names the field and the pattern, never the value given (it
    may be a pasted key)."""
    return (
        "api_key_env must be the NAME of an environment variable matching "
        f"ARBITER_JUDGE_KEY_ENV_PATTERN ({settings.ARBITER_JUDGE_KEY_ENV_PATTERN}), never the "
        "key itself."
    )


def redact(text: str, api_key: str) -> str:
    """``text`` with every occurrence of ``api_key`` replaced; call it before cutting ``text``
    to length, so no part of the key survives the cut."""
    if len(api_key) < MIN_REDACTED_KEY_CHARS or api_key not in text:
        return text
    return text.replace(api_key, REDACTED)
