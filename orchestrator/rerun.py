"""Re-run a campaign's failed cells: each failed, timed-out or cancelled job becomes a new
attempt of the same job (same model, configuration and hardware), not a new campaign.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine, select, update

from delegate_runtime.errors import JobError
from farm_core import jobs
from farm_core.dispatch import Dispatcher, SendOrder
from farm_core.schema import Campaign, Job, StoredModel
from farm_core.settings import Timing


@dataclass
class Rerun:
    """What `rerun` re-queued: (job id, model, device, configuration, state it left)."""

    campaign_id: int
    cells: list[tuple[int, str, str, str, str]] = field(default_factory=list)
    sent: int = 0
    broker_error: str = ""


def rerun(
    engine: Engine, dispatcher: Dispatcher, campaign_id: int, timing: Timing | None = None
) -> Rerun:
    """Re-queue exactly the campaign's failed, timed-out and cancelled jobs and send them;
    JobError for an unknown campaign. Jobs with no eligible device now stay queued (the
    reconciler sends them when one is online)."""
    timing = timing or Timing.from_env()
    out = Rerun(campaign_id)
    orders: list[SendOrder] = []
    with engine.begin() as conn:
        if conn.execute(select(Campaign.id).where(Campaign.id == campaign_id)).first() is None:
            raise JobError(f"no campaign {campaign_id} (`devicefarm status` lists them)")
        failed = conn.execute(
            select(Job.id, Job.model_name, StoredModel.name, Job.device_key, Job.config, Job.state)
            .join(StoredModel, StoredModel.sha256 == Job.model_sha256)
            .where(Job.campaign_id == campaign_id, Job.state.in_(jobs.RERUN_STATES))
            .order_by(Job.id)
        ).all()
        for j in failed:
            requeued, order = jobs.rerun(conn, j.id, timing)
            if requeued:
                out.cells.append((j.id, j.model_name or j.name, j.device_key, j.config, j.state))
            if order is not None:
                orders.append(order)
        if out.cells:  # its jobs are active again
            conn.execute(update(Campaign).where(Campaign.id == campaign_id).values(cancelled=False))
    if orders:
        sent, out.broker_error = dispatcher.send(orders)
        with engine.begin() as conn:
            jobs.mark_sent(conn, sent)
        out.sent = len(sent)
    return out
