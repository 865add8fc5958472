"""A job message as Celery sends it (task protocol 2), read without a Celery worker.

farm_core.dispatch sends `devicefarm.run_job(job_id, attempt)`, or for several dispatches of
a device `devicefarm.run_jobs([[job_id, attempt], ...])` (worker_agent.batches), as
`app.send_task` does: the headers name the task (`task`), its id (`id`), its time limits
(`timelimit`: [hard, soft], None for the app's defaults) and a retry's start (`eta`, ISO
8601, from `countdown`); the body is JSON `[args, kwargs, embed]`. A device group
(worker_agent.group) reads it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from farm_core.celery_app import TASK_RUN_JOB, TASK_RUN_JOBS
from farm_core.settings import JOB_HARD_LIMIT_S, JOB_SOFT_LIMIT_S


class BadMessage(ValueError):
    """A message that is not a run_job task this worker can run (dropped, never retried)."""


@dataclass(frozen=True)
class JobMessage:
    """The dispatches of jobs a message asks for (most often one)."""

    job_id: int  #: the first dispatch's
    attempt: int
    task_id: str
    soft_limit_s: float  #: the job times out past this (Celery's soft time limit)
    hard_limit_s: float  #: the job is given up past this (Celery's hard time limit)
    eta: datetime | None = None  #: not to start before (a retry's backoff); aware, UTC
    #: every dispatch (job, attempt), in order; empty means the one above
    more: tuple[tuple[int, int], ...] = ()

    @property
    def dispatches(self) -> list[tuple[int, int]]:
        return list(self.more) or [(self.job_id, self.attempt)]


def decode(headers: dict[str, Any] | None, body: Any) -> JobMessage:
    """The jobs a Celery protocol-2 message carries; BadMessage saying why when it is not
    a `devicefarm.run_job(job_id, attempt)` or `devicefarm.run_jobs(dispatches)` task."""
    headers = headers or {}
    task = headers.get("task")
    if task not in (TASK_RUN_JOB, TASK_RUN_JOBS):
        raise BadMessage(f"unknown task {str(task)[:80]!r} (protocol 2 {TASK_RUN_JOB} expected)")
    if not isinstance(body, list | tuple) or not body or not isinstance(body[0], list | tuple):
        raise BadMessage(f"task {headers.get('id')}: body is not [args, kwargs, embed]")
    args = list(body[0])
    kwargs = body[1] if len(body) > 1 and isinstance(body[1], dict) else {}
    more: tuple[tuple[int, int], ...] = ()
    if task == TASK_RUN_JOBS:
        raw = args[0] if len(args) == 1 else kwargs.get("dispatches")
        try:
            more = tuple(parse_dispatches(raw))
        except ValueError as exc:
            raise BadMessage(f"task {headers.get('id')}: {exc}") from None
        args = list(more[0])
    if len(args) < 2 and kwargs:  # sent by keyword
        args += [kwargs.get(k) for k in ("job_id", "attempt")[len(args) :]]
    if len(args) != 2 or not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        raise BadMessage(f"task {headers.get('id')}: arguments {args!r} are not (job_id, attempt)")
    hard, soft = (list(headers.get("timelimit") or []) + [None, None])[:2]
    return JobMessage(
        job_id=args[0],
        attempt=args[1],
        task_id=str(headers.get("id") or ""),
        soft_limit_s=float(soft) if soft else float(JOB_SOFT_LIMIT_S),
        hard_limit_s=float(hard) if hard else float(JOB_HARD_LIMIT_S),
        eta=_eta(headers.get("eta")),
        more=more,
    )


def parse_dispatches(raw: object) -> list[tuple[int, int]]:
    """A run_jobs message's [[job_id, attempt], ...]; ValueError when it is not that."""
    if not isinstance(raw, list | tuple) or not raw:
        raise ValueError(f"dispatches {str(raw)[:80]} are not [[job_id, attempt], ...]")
    out = []
    for pair in raw:
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
        ):
            raise ValueError(f"dispatch {str(pair)[:80]} is not [job_id, attempt]")
        out.append((pair[0], pair[1]))
    return out


def _eta(raw: Any) -> datetime | None:
    if not raw:
        return None
    try:
        eta = datetime.fromisoformat(str(raw))
    except ValueError as exc:
        raise BadMessage(f"eta {str(raw)[:40]!r} is not ISO 8601") from exc
    if eta.tzinfo is None:  # Celery sends aware times in UTC; a naive one is taken as UTC
        eta = eta.replace(tzinfo=UTC)
    return eta
