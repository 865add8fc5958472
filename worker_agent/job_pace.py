"""Whether a device's jobs are short: the streak of jobs in a row that each ran under
`short_below_s()` (50 ms, `DEVICEFARM_BATCH_BELOW_MS`), counted as each job ends
(`executor.run_claimed`). A device whose jobs are short gets them in batches
(worker_agent.batches): the spine's own cost per job, about 5 ms, would be a tenth of such
a job or more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from delegate_runtime.env_numbers import whole_number

if TYPE_CHECKING:
    from .consumer import ConsumerContext

#: A job that ran at least this long is not short (ms).
ENV_BATCH_BELOW_MS = "DEVICEFARM_BATCH_BELOW_MS"
DEFAULT_BATCH_BELOW_MS = 50


def short_below_s() -> float:
    """A job that ran this long or longer is not short: $DEVICEFARM_BATCH_BELOW_MS / 1000."""
    return whole_number(ENV_BATCH_BELOW_MS, DEFAULT_BATCH_BELOW_MS, 1, 3_600_000) / 1000


def note_job(ctx: ConsumerContext, took_s: float) -> None:
    """Count a job's time towards the device's streak of short jobs."""
    ctx.short_jobs = ctx.short_jobs + 1 if took_s < short_below_s() else 0
