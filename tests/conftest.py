"""Shared test configuration: tiers by folder; missing services skip locally, fail in CI."""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, what: str) -> None:
    """Skip when `what` is missing locally; fail in CI, where everything must be present."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{what} is required in CI but missing")
    pytest.skip(f"{what} is not available here")
