"""Progress lines of a running job, for slow devices (PoCL runs OpenCL on the CPU: a
MobileNet inference takes seconds there, a job minutes).

The measurement tools call `JobProgress(job_id)` as their progress callback; it writes
`job 12: benchmark: 12/50 runs, 3.31 s/run, 40 s` to stderr at most every
LINE_INTERVAL_S: the worker's terminal, or the consumer's log that `devicefarm run` reads
back with `latest_line` to show what a long job is doing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from delegate_runtime.tools.progress import LINE_INTERVAL_S, progress_line

#: How much of a log's end `latest_line` reads.
TAIL_BYTES = 64 * 1024


def prefix(job_id: int) -> str:
    return f"job {job_id}: "


class JobProgress:
    """A progress(stage, done, total) callback writing one job's progress lines."""

    def __init__(
        self,
        job_id: int,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = LINE_INTERVAL_S,
    ):
        self.job_id = job_id
        self.stream = stream
        self.clock = clock
        self.interval_s = interval_s
        self._stage_start = clock()
        self._last_line = self._stage_start

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        now = self.clock()
        if done == 0:  # a stage starts
            self._stage_start = now
            return
        if now - self._last_line < self.interval_s:
            return
        self._last_line = now
        out = self.stream or sys.stderr
        line = progress_line(stage, done, total, now - self._stage_start)
        out.write(prefix(self.job_id) + line + "\n")
        out.flush()


def latest_line(log: Path, job_id: int) -> str | None:
    """The newest progress line of `job_id` in a consumer's `log` (without its prefix)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - TAIL_BYTES))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    mark = prefix(job_id)
    for line in reversed(tail.splitlines()):
        if line.startswith(mark):
            return line[len(mark) :].strip()
    return None
