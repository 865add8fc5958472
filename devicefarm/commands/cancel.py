"""`devicefarm cancel CAMPAIGN`: cancel a campaign's queued, dispatched and running jobs."""

from __future__ import annotations

import argparse

from . import argtypes, common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "campaign", type=argtypes.campaign_id, help="the campaign's id (`devicefarm status`)"
    )
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from sqlalchemy import select

    from delegate_runtime.errors import JobError
    from farm_core.jobs import cancel
    from farm_core.schema import Campaign

    with common.engine(args).begin() as conn:
        if conn.execute(select(Campaign.id).where(Campaign.id == args.campaign)).first() is None:
            raise JobError(f"no campaign {args.campaign} (`devicefarm status` lists them)")
        n = cancel(conn, args.campaign)
    print(f"campaign {args.campaign}: {n} job(s) cancelled")
    return 0
