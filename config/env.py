"""Settings read from the environment: each helper returns the default when the variable is
unset or empty, and refuses a value it cannot read with ImproperlyConfigured naming it."""

from __future__ import annotations

import os
from typing import overload

from django.core.exceptions import ImproperlyConfigured


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true or false)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(
            f"{name}={os.environ.get(name)!r}: use one of {', '.join(choices)}"
        )
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_rate(name: str, default: str | None) -> str | None:
    """A request rate as DRF writes it (``600/min``: a count per s, min, hour or day), or
    None for ``off``."""
    value = env_str(name, default or "off").strip().lower()
    if value in {"off", "none"}:
        return None
    count, _, period = value.partition("/")
    if not count.isdigit() or int(count) < 1 or period not in {"s", "sec", "min", "hour", "day"}:
        raise ImproperlyConfigured(
            f"{name}={value!r}: use a count per s, min, hour or day (600/min), or off"
        )
    return value
