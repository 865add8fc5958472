"""Keeps the running job's lease alive from a background thread of the process running it.

If that process dies, renewals stop and the reconciler takes the job back once the lease
expires; so the lease says "this job is really being run", not just "the host is up".
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Engine

from orchestrator import jobs

log = logging.getLogger(__name__)


class LeaseKeeper:
    """One thread per process; `hold(job, attempt)` while a job runs, `release()` after."""

    def __init__(self, engine: Engine, worker: str, lease_s: float):
        self.engine = engine
        self.worker = worker
        self.lease_s = lease_s
        self._current: tuple[int, int] | None = None
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, job_id: int, attempt: int) -> None:
        with self._lock:
            self._current = (job_id, attempt)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="lease", daemon=True)
                self._thread.start()

    def release(self) -> None:
        with self._lock:
            self._current = None

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.lease_s / 3)
            with self._lock:
                current = self._current
            if current is None:
                continue
            try:
                with self.engine.begin() as conn:
                    mine = jobs.renew_lease(conn, *current, self.worker, self.lease_s)
                if not mine:
                    log.warning(
                        "job %s attempt %s is no longer ours (cancelled or moved)", *current
                    )
            except Exception as exc:  # noqa: BLE001 - a DB blip must not kill the thread
                log.warning("lease renewal failed: %s", exc)
