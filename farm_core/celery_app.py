"""The Celery app, configured for long device jobs (ARCHITECTURE.md, decision 2).

JSON only; acks_late with reject-on-worker-lost; prefetch 1; one queue per device; soft and
hard time limits inside the Redis visibility timeout; no result backend (the database holds
results). `filesystem://<folder>` selects kombu's filesystem transport for the embedded mode.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from celery import Celery

from .settings import JOB_HARD_LIMIT_S, JOB_SOFT_LIMIT_S, VISIBILITY_TIMEOUT_S

TASK_RUN_JOB = "devicefarm.run_job"
#: Several dispatches of one device in one message, run in order (farm_core.job_batches).
TASK_RUN_JOBS = "devicefarm.run_jobs"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.]")
QUEUE_PREFIX = "df."
#: kombu polls server-less transports this often.
FILESYSTEM_POLL_S = 0.05
#: User priorities run 0 (default) to 9 (most urgent); Redis serves its priority 0 first.
MAX_PRIORITY = 9
#: kombu's Redis transport keeps one list per step and rounds a message's priority to a
#: step: its default steps are [0, 3, 6, 9], four levels; one step per priority makes ten.
REDIS_PRIORITY_STEPS = list(range(MAX_PRIORITY + 1))


def queue_for(device_key: str) -> str:
    """The queue that feeds one device: `df.` + the key, with every character outside
    [A-Za-z0-9_.] written as `-xx` (UTF-8 hex; ':' is `-3a`), as every transport accepts."""
    return QUEUE_PREFIX + _UNSAFE.sub(_escape, device_key)


def _escape(m: re.Match) -> str:
    return "".join(f"-{b:02x}" for b in m.group().encode())


def task_id(job_id: int, attempt: int) -> str:
    """The message id of one dispatch of a job (the reconciler looks for it in the broker)."""
    return f"df-job-{job_id}-{attempt}"


_BATCH_PREFIX = "df-jobs-"


def batch_task_id(dispatches: list[tuple[int, int]]) -> str:
    """The message id of several dispatches sent together: each one's (job, attempt)."""
    return _BATCH_PREFIX + "_".join(f"{job_id}-{attempt}" for job_id, attempt in dispatches)


def task_call(dispatches: list[tuple[int, int]]) -> tuple[str, list[Any], str]:
    """(task name, arguments, task id) of the message that carries `dispatches` (job,
    attempt) of one device: `run_job(job_id, attempt)` for one, `run_jobs([[job_id,
    attempt], ...])` for several."""
    if len(dispatches) == 1:
        job_id, attempt = dispatches[0]
        return TASK_RUN_JOB, [job_id, attempt], task_id(job_id, attempt)
    return TASK_RUN_JOBS, [[list(d) for d in dispatches]], batch_task_id(dispatches)


def dispatch_task_ids(message_id: str) -> list[str]:
    """The `task_id` of every dispatch a message carries: its own id, or for a batch
    (`batch_task_id`) each of its dispatches' (what the reconciler looks for)."""
    if not message_id.startswith(_BATCH_PREFIX):
        return [message_id]
    return ["df-job-" + part for part in message_id[len(_BATCH_PREFIX) :].split("_") if part]


def broker_priority(user_priority: int) -> int:
    return MAX_PRIORITY - user_priority


def transport_options(broker_url: str) -> dict[str, Any]:
    """Transport options for `broker_url`'s transport."""
    if broker_url.startswith("filesystem://"):
        folder = Path(broker_url.removeprefix("filesystem://") or ".devicefarm/broker")
        queue_dir = folder / "queue"
        return {
            "data_folder_in": str(queue_dir),
            "data_folder_out": str(queue_dir),
            "control_folder": str(folder / "control"),
            "polling_interval": FILESYSTEM_POLL_S,
        }
    # NOTE: the consumer's BRPOP lists every priority of every queue, priority first, so
    # the queue order strategy (round robin) only orders queues within one priority.
    return {
        "visibility_timeout": VISIBILITY_TIMEOUT_S,
        "socket_keepalive": True,
        "priority_steps": REDIS_PRIORITY_STEPS,
    }


def prepare_broker(broker_url: str) -> None:
    """Create the folders a filesystem broker needs (no-op for servers)."""
    options = transport_options(broker_url)
    for key in ("data_folder_in", "control_folder"):
        if key in options:
            Path(options[key]).mkdir(parents=True, exist_ok=True)


def configure(app: Celery, broker_url: str) -> Celery:
    """Point `app` at `broker_url` with the farm's settings."""
    url = "filesystem://" if broker_url.startswith("filesystem://") else broker_url
    app.conf.update(
        broker_url=url,
        broker_transport_options=transport_options(broker_url),
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=JOB_SOFT_LIMIT_S,
        task_time_limit=JOB_HARD_LIMIT_S,
        task_default_queue=f"{QUEUE_PREFIX}default",
        task_create_missing_queues=True,
        task_default_priority=broker_priority(0),
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    return app


def make_app(broker_url: str, name: str = "devicefarm") -> Celery:
    """A Celery app for the farm on `broker_url` (tasks are registered by worker_agent.tasks)."""
    return configure(Celery(name, set_as_current=False), broker_url)
