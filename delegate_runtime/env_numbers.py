"""Whole numbers read from the environment: a host's settings (queue depth, failure streak,
disk bounds), each refused in one line naming its variable when it is not one."""

from __future__ import annotations

import os

from .errors import UsageError


def whole_number(name: str, default: int, low: int, high: int | None = None) -> int:
    """$`name` as a whole number from `low` to `high` (no upper bound where None), else
    `default` where it is unset or empty; UsageError naming it otherwise."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name}={raw[:40]!r} is not a whole number") from None
    if high is None and value < low:
        raise UsageError(f"{name} must be at least {low}, not {value}")
    if high is not None and not low <= value <= high:
        raise UsageError(f"{name} must be from {low} to {high}, not {value}")
    return value
