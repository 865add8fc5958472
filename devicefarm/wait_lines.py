"""What a wait for a campaign prints, in every mode (`devicefarm run`, `submit --wait` on
the database or through the API): a job as it ends, a running job's progress as its worker
stores it (`jobs.progress`: at most every worker_agent.lease.PROGRESS_EVERY_S), a job
waiting for a device. A cell is `device configuration`, after the model's name when the
campaign has more than one model (and after its version too, when two versions share a
name: a confirmation's baseline and candidate)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from farm_core.jobs import WAITING
from farm_core.schema import RUNNING, SUCCEEDED, TERMINAL_STATES

#: Characters of a version shown beside a shared name.
VERSION_CHARS = 10
#: After this long without a line, a wait says where the campaign stands: never more than
#: 10 s of silence (a job's first progress can take longer: kernels compiling cold).
QUIET_S = 8.0


@dataclass(frozen=True)
class JobView:
    """One job as a wait sees it."""

    job: int
    sha256: str
    model: str  #: its lineage name (or file name)
    device: str
    config: str
    state: str
    reason: str = ""
    progress: str = ""  #: a running job's newest progress line
    avg_ms: float | None = None
    took_s: float | None = None  #: the job's own run, claimed to finished


def model_labels(models: Iterable[tuple[str, str]]) -> dict[str, str]:
    """sha256 -> how lines name that model, from the campaign's (sha256, name) pairs: ""
    for the model of a one-model campaign, else its name, `name@<version>` where several
    versions share it."""
    names = dict(models)
    if len(names) < 2:
        return dict.fromkeys(names, "")
    taken = list(names.values())
    return {
        sha: f"{name}@{sha[:VERSION_CHARS]}" if taken.count(name) > 1 else name
        for sha, name in names.items()
    }


class CampaignLines:
    """The lines to print each time a campaign's jobs are read again."""

    def __init__(self) -> None:
        self.seen: set[int] = set()  #: jobs shown as ended
        self._said: dict[int, str] = {}  #: job -> the waiting reason or progress last shown
        self._labels: dict[str, str] | None = None
        self._last_line_s = 0.0  #: elapsed time of the last line returned

    def update(self, jobs: Sequence[JobView], elapsed_s: float) -> list[str]:
        out = self._changes(jobs, elapsed_s)
        if not out and elapsed_s - self._last_line_s >= QUIET_S and not self.done(jobs):
            out.append(_standing(jobs, elapsed_s))
        if out:
            self._last_line_s = elapsed_s
        return out

    def _changes(self, jobs: Sequence[JobView], elapsed_s: float) -> list[str]:
        if self._labels is None:
            self._labels = model_labels((j.sha256, j.model) for j in jobs)
        out = []
        for j in jobs:
            label = self._labels.get(j.sha256, "")
            where = f"{label} {j.device} {j.config}" if label else f"{j.device} {j.config}"
            if j.state in TERMINAL_STATES and j.job not in self.seen:
                self.seen.add(j.job)
                out.append(_ended(len(self.seen), len(jobs), where, j, elapsed_s))
            elif j.reason.endswith(WAITING) and self._said.get(j.job) != j.reason:
                self._said[j.job] = j.reason
                out.append(
                    f"  {where}: {j.reason.splitlines()[0][:160]}; it stays queued until a "
                    "device of the same hardware is online (Ctrl-C leaves it queued) "
                    f"(t+{elapsed_s:.1f} s)"
                )
            elif j.state == RUNNING and j.progress and self._said.get(j.job) != j.progress:
                self._said[j.job] = j.progress
                out.append(f"  {where}: running, {j.progress} (t+{elapsed_s:.1f} s)")
        return out

    def done(self, jobs: Sequence[JobView]) -> bool:
        return len(self.seen) == len(jobs)


def _standing(jobs: Sequence[JobView], elapsed_s: float) -> str:
    """`  2 running (cpu:ref cpu: benchmark: 3/50 runs, 1.2 s/run, 4 s), 1 queued, 3 ended
    (t+31.0 s)`: where a campaign stands when nothing changed for QUIET_S."""
    running = [j for j in jobs if j.state == RUNNING]
    ended = sum(j.state in TERMINAL_STATES for j in jobs)
    parts = []
    if running:
        first = running[0]
        now = f": {first.progress}" if first.progress else ", starting"
        parts.append(f"{len(running)} running ({first.device} {first.config}{now})")
    waiting = len(jobs) - len(running) - ended
    if waiting:
        parts.append(f"{waiting} queued")
    parts.append(f"{ended} of {len(jobs)} ended")
    return f"  {', '.join(parts)} (t+{elapsed_s:.1f} s)"


def _ended(done: int, total: int, where: str, j: JobView, elapsed_s: float) -> str:
    """`[3/6] cpu:ref gpu-fp32: succeeded avg 1.234 ms, took 4.2 s (t+9.4 s)`: t+ is the
    time since the wait began, `took` the job's own run (when known)."""
    figure = f"avg {j.avg_ms:.3f} ms" if j.avg_ms is not None else ""
    why = j.reason.splitlines()[0][:100] if j.state != SUCCEEDED and j.reason else ""
    took = f"took {j.took_s:.1f} s" if j.took_s is not None else ""
    parts = [x for x in (figure or why, took) if x]
    detail = f" {', '.join(parts)}" if parts else ""
    return f"[{done}/{total}] {where}: {j.state}{detail} (t+{elapsed_s:.1f} s)"
