"""Keeps the running job's lease alive from a background thread of the process running it.

If that process dies, renewals stop and the reconciler takes the job back once the lease
expires; so the lease says "this job is really being run", not just "the host is up".
Each renewal also stores the job's newest progress line (`jobs.progress`, at least every
PROGRESS_EVERY_S), which a client waiting on any host shows.

A renewal that finds the job no longer ours (cancelled, or moved by the reconciler) aborts
the work: inside `abortable()` the lease thread signals the process (SIGUSR2) and the main
thread raises `JobLost` wherever it is, so a cancelled job frees its device at the next
renewal (every `lease_s / 3` or PROGRESS_EVERY_S, the shorter) instead of running to its
end. A job run on a thread of a device group (`threaded`; worker_agent.group) is aborted the
same way by an exception raised in that thread (worker_agent.thread_interrupt), and so is
its soft time limit (`interrupt`).

The dispatches of a batch (farm_core.job_batches) that wait their turn are held too
(`hold_waiting`): their leases renewed together in one statement, and one found no longer
ours (cancelled, moved) is not run (`gone`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator

from delegate_runtime.tools.progress import LINE_INTERVAL_S
from farm_core import job_batches, jobs
from farm_core.database import Statements

from .thread_interrupt import Interruptible

log = logging.getLogger(__name__)
#: The signal the lease thread sends to abort the job of its own process.
ABORT_SIGNAL = signal.SIGUSR2
#: The longest a new progress line waits to be stored, s (the lease is renewed as often).
PROGRESS_EVERY_S = LINE_INTERVAL_S


class JobLost(Exception):
    """The running job is no longer this worker's (cancelled or moved): stop working on it."""

    def __init__(self, message: str = "the job is no longer ours (cancelled or moved)"):
        super().__init__(message)


class LeaseKeeper:
    """One thread per process; `hold(job, attempt, progress)` while a job runs, `release()`
    after."""

    def __init__(self, statements: Statements, worker: str, lease_s: float, threaded: bool = False):
        self.statements = statements  #: shared with the job's own claim and finish
        self.worker = worker
        self.lease_s = lease_s
        #: jobs run on threads other than the main one and are aborted there (device groups)
        self.threaded = threaded
        self._region = Interruptible()
        self._current: tuple[int, int] | None = None
        self._progress: Callable[[], str | None] | None = None
        self._abortable = False
        self._lost: tuple[int, int] | None = None
        self._waiting: list[tuple[int, int]] = []  #: a batch's dispatches not yet started
        self._gone: set[tuple[int, int]] = set()  #: of those, found no longer ours
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(
        self, job_id: int, attempt: int, progress: Callable[[], str | None] | None = None
    ) -> None:
        """Keep the job's lease, storing `progress()` (its newest line) with each renewal."""
        with self._lock:
            self._current = (job_id, attempt)
            self._progress = progress
            self._lost = None
            if (job_id, attempt) in self._waiting:
                self._waiting.remove((job_id, attempt))
            self._start()

    def hold_waiting(self, dispatches: list[tuple[int, int]]) -> None:
        """Keep the leases of a batch's claimed dispatches until each starts (`hold`) or
        the batch ends (`release_waiting`)."""
        with self._lock:
            self._waiting = list(dispatches)
            self._gone = set()
            self._start()

    def gone(self, dispatch: tuple[int, int]) -> bool:
        """Whether a waiting dispatch was found no longer ours (do not run it)."""
        with self._lock:
            return dispatch in self._gone

    def abandon_waiting(self) -> None:
        """Leave every waiting dispatch to the reconciler: its lease runs out, it is not run
        here (a batch given up past its hard time limit)."""
        with self._lock:
            self._gone.update(self._waiting)
            self._waiting = []

    def release_waiting(self) -> None:
        with self._lock:
            self._waiting = []
            self._gone = set()

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="lease", daemon=True)
            self._thread.start()

    def release(self) -> None:
        with self._lock:
            self._current = None
            self._progress = None

    @contextlib.contextmanager
    def abortable(self) -> Iterator[None]:
        """Run the block so that losing the lease raises `JobLost` in it (the main thread,
        or any thread when `threaded`)."""
        if threading.current_thread() is not threading.main_thread():
            if not self.threaded:
                yield
                return
            with self._lock:
                self._abortable = True
                lost = self._lost
            try:
                if lost is not None:
                    raise JobLost(f"job {lost[0]} attempt {lost[1]} is no longer ours")
                with self._region.region():
                    yield
            finally:
                with self._lock:
                    self._abortable = False
            return

        def on_abort(_sig: int, _frame: object) -> None:
            if self._abortable and self._lost is not None:
                raise JobLost(f"job {self._lost[0]} attempt {self._lost[1]} is no longer ours")

        previous = signal.signal(ABORT_SIGNAL, on_abort)
        with self._lock:
            self._abortable = True
            lost = self._lost
        try:
            if lost is not None:  # lost before the block began
                raise JobLost(f"job {lost[0]} attempt {lost[1]} is no longer ours")
            yield
        finally:
            with self._lock:
                self._abortable = False
            signal.signal(ABORT_SIGNAL, previous)

    def _loop(self) -> None:
        stored: tuple[tuple[int, int], str | None] | None = None  #: the line last written
        while True:
            self._wake.wait(min(self.lease_s / 3, PROGRESS_EVERY_S))
            with self._lock:
                current, progress = self._current, self._progress
                waiting = list(self._waiting)
            if waiting:
                self._renew_waiting(waiting)
            if current is None:
                continue
            line = progress() if progress is not None else None
            new = line if (current, line) != stored else None
            try:
                mine = self.statements.run(
                    lambda c, job=current, line=new: jobs.renew_lease(
                        c, *job, self.worker, self.lease_s, progress=line
                    )
                )
                stored = (current, line)
            except Exception as exc:  # noqa: BLE001 - a DB blip must not kill the thread
                log.warning("lease renewal failed: %s", exc)
                continue
            if not mine:
                self._abort(current)

    def _renew_waiting(self, waiting: list[tuple[int, int]]) -> None:
        try:
            mine = self.statements.run(
                lambda c: job_batches.renew_many(c, waiting, self.worker, self.lease_s)
            )
        except Exception as exc:  # noqa: BLE001 - a DB blip must not kill the thread
            log.warning("lease renewal of a batch failed: %s", exc)
            return
        with self._lock:
            lost = [d for d in waiting if d not in mine and d in self._waiting]
            self._gone.update(lost)
            self._waiting = [d for d in self._waiting if d not in self._gone]
        for d in lost:
            log.warning("job %s attempt %s is no longer ours (cancelled or moved): skipped", *d)

    def _abort(self, current: tuple[int, int]) -> None:
        with self._lock:
            if self._current != current:
                return  # that job ended meanwhile
            self._lost = current
            signal_now = self._abortable
        log.warning("job %s attempt %s is no longer ours (cancelled or moved): aborting", *current)
        if signal_now and self.threaded:
            self._region.interrupt(JobLost)
        elif signal_now:
            os.kill(os.getpid(), ABORT_SIGNAL)

    def interrupt(self, exc_type: type[BaseException]) -> bool:
        """Raise `exc_type` in the running job's `abortable` block (`threaded` only: a time
        limit); False when no job is inside one."""
        return self._region.interrupt(exc_type)
