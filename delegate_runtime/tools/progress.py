"""Progress reporting for long work: a tqdm bar on a terminal, a plain line every
LINE_INTERVAL_S when stderr is a log or a pipe, a caller's callback, or nothing.

A model on a slow device (PoCL runs OpenCL on the CPU: MobileNet takes seconds per
inference there) can run for minutes; the lines say how far it is and how fast it goes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

#: A callback progress(stage, done, total); total is None when unknown.
ProgressFn = Callable[[str, int, "int | None"], None]
#: Seconds between plain progress lines (stderr not a terminal); quicker work prints none.
LINE_INTERVAL_S = 10.0
#: The `progress` value that asks for plain lines.
LINES = "lines"


def progress_mode(flag: bool | None, stream: IO[str] | None = None) -> bool | str:
    """What `--progress` asks for: True draws a bar, False nothing; unset (None) draws a
    bar on a terminal and plain lines every LINE_INTERVAL_S elsewhere."""
    if flag is not None:
        return bool(flag)
    return True if (stream or sys.stderr).isatty() else LINES


def _figure(value: float) -> str:
    """Three significant digits, but whole numbers from 1000 up: `1020`, not `1.02e+03`."""
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def progress_line(stage: str, done: int, total: int | None, elapsed_s: float) -> str:
    """`benchmark: 12/50 runs, 3.31 s/run, 40 s` (runs per second when faster than one);
    past the planned total (a loop that also runs for a minimum time) just the count; a
    stage that counts no runs (`init`) just its time: `init: 40 s`."""
    if total is None and not done:
        return f"{stage}: {elapsed_s:.0f} s"
    count = f"{done}/{total}" if total and done <= total else f"{done}"
    if done and elapsed_s > 0:
        per_s = done / elapsed_s
        rate = f"{_figure(per_s)} runs/s" if per_s >= 1 else f"{_figure(1 / per_s)} s/run"
    else:
        rate = "no run finished yet"
    return f"{stage}: {count} runs, {rate}, {elapsed_s:.0f} s"


class Reporter:
    """Wraps a progress option: True draws tqdm bars on stderr, LINES writes a line at
    most every LINE_INTERVAL_S, a callable is called, anything else reports nothing."""

    def __init__(
        self,
        progress: Any = None,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.progress = progress
        self.stream = stream
        self.clock = clock
        self._bar: Any = None
        self._stage = ""
        self._done = 0
        self._total: int | None = None
        self._stage_start = 0.0
        self._last_line = clock()

    def start(self, stage: str, total: int | None) -> None:
        self.close()
        self._stage = stage
        self._done = 0
        self._total = total
        self._stage_start = self.clock()
        if self.progress is True:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=stage, unit="run", file=self._out(), leave=False)
        elif callable(self.progress):
            self.progress(stage, 0, total)

    def update(self, n: int = 1) -> None:
        self._done += n
        if self._bar is not None:
            self._bar.update(n)
        elif callable(self.progress):
            self.progress(self._stage, self._done, self._total)
        elif self.progress == LINES:
            now = self.clock()
            if now - self._last_line >= LINE_INTERVAL_S:
                self._last_line = now
                elapsed = now - self._stage_start
                out = self._out()
                out.write(progress_line(self._stage, self._done, self._total, elapsed) + "\n")
                out.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _out(self) -> IO[str]:
        return self.stream or sys.stderr
