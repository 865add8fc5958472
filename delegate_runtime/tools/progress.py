"""Progress reporting: a tqdm bar on stderr, or a caller's callback, or nothing."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

#: A callback progress(stage, done, total); total is None when unknown.
ProgressFn = Callable[[str, int, "int | None"], None]


def want_bar(flag: bool | None) -> bool:
    """Show a bar when asked (--progress) or, by default, when stderr is a terminal."""
    return bool(flag) if flag is not None else sys.stderr.isatty()


class Reporter:
    """Wraps a progress option: `True` draws tqdm bars on stderr, a callable is called."""

    def __init__(self, progress: Any = None):
        self.progress = progress
        self._bar: Any = None
        self._stage = ""
        self._done = 0
        self._total: int | None = None

    def start(self, stage: str, total: int | None) -> None:
        self.close()
        self._stage = stage
        self._done = 0
        self._total = total
        if self.progress is True:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=stage, unit="run", file=sys.stderr, leave=False)
        elif callable(self.progress):
            self.progress(stage, 0, total)

    def update(self, n: int = 1) -> None:
        self._done += n
        if self._bar is not None:
            self._bar.update(n)
        elif callable(self.progress):
            self.progress(self._stage, self._done, self._total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
