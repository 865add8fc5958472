"""Refusals: a device that cannot run a configuration, decided at submission from the
device's recorded facts (farm_core.configs.supports), with the official tool's words.

Each is kept with its campaign (`campaigns.refusals`, migration 0011) as
{"device", "config", "reason"}, so that the comparison shows what submission decided, not
what the devices' facts say today. A campaign submitted before they were kept has None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from farm_core.schema import Campaign

#: What a campaign without a record (submitted before migration 0011) says instead.
NOT_RECORDED = "refusals: not recorded (the campaign was submitted before the farm kept them)"


def refusal(device: str, config: str, reason: str) -> dict[str, str]:
    """One refusal as it is stored."""
    return {"device": device, "config": config, "reason": reason}


def line(r: dict[str, Any]) -> str:
    """A refusal as one line: `CONFIG on DEVICE: REASON`."""
    return f"{r['config']} on {r['device']}: {r['reason']}"


def stored(conn: Connection, campaign: int) -> list[dict[str, Any]] | None:
    """The refusals kept with `campaign`, or None when it has no record."""
    return conn.execute(select(Campaign.refusals).where(Campaign.id == campaign)).scalar()


def lines(refused: Sequence[dict[str, Any]] | None) -> list[str]:
    """The refusals as the comparison prints them, or the line saying there is no record."""
    if refused is None:
        return [NOT_RECORDED]
    return [f"refused: {line(r)}" for r in refused]
