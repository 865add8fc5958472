"""A clock a test moves by hand: pass it where code takes a `clock` callable."""

from __future__ import annotations


class Clock:
    """Returns `now`, which the test sets."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
