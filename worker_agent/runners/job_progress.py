"""Progress of a running job, for slow devices (PoCL runs OpenCL on the CPU: a MobileNet
inference takes seconds there, a job minutes).

The measurement tools call `JobProgress` as their progress callback. It writes
`job 12: benchmark: 12/50 runs, 3.31 s/run, 40 s` to stderr at most every LINE_INTERVAL_S
(the worker's terminal or the consumer's log), and keeps the newest state: `line()` gives
it, and the worker's lease thread stores it with the job (`jobs.progress`), where a client
waiting on any host reads it (`submit --wait`, `devicefarm run`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

from delegate_runtime.tools.progress import LINE_INTERVAL_S, progress_line


def prefix(job_id: int) -> str:
    return f"job {job_id}: "


class JobProgress:
    """A progress(stage, done, total) callback for one job."""

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
        #: (stage, done, total, seconds into the stage, when the stage began): one tuple,
        #: so that the lease thread never reads half of an update
        self._state: tuple[str, int, int | None, float, float] | None = None

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        now = self.clock()
        if done == 0:  # a stage starts
            self._stage_start = now
        self._state = (stage, done, total, now - self._stage_start, self._stage_start)
        if done == 0 or now - self._last_line < self.interval_s:
            return
        self._last_line = now
        out = self.stream or sys.stderr
        out.write(prefix(self.job_id) + self.line() + "\n")
        out.flush()

    def line(self) -> str | None:
        """`benchmark: 12/50 runs, 3.31 s/run, 40 s` as of the newest call; None before
        the first."""
        state = self._state
        if state is None:
            return None
        stage, done, total, elapsed_s, began = state
        if not done:  # nothing counted yet (init, a slow first run): its time so far
            elapsed_s = self.clock() - began
        return progress_line(stage, done, total, elapsed_s)
