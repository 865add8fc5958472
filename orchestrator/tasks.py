"""The farm's Celery tasks. Thin: they pass ids to plain functions tested on their own.

A worker agent's consumer process configures `app` for its broker and installs the device
context (`worker_agent.consumer`) before the worker starts.
"""

from __future__ import annotations

from .celery_app import TASK_RUN_JOB, make_app
from .settings import default_broker_url

app = make_app(default_broker_url())


@app.task(name=TASK_RUN_JOB)
def run_job(job_id: int, attempt: int) -> str:
    """Run dispatch `attempt` of job `job_id` on this consumer's device."""
    from worker_agent.consumer import current_context
    from worker_agent.executor import execute_job

    return execute_job(current_context(), job_id, attempt)
