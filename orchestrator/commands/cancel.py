"""`devicefarm cancel CAMPAIGN`: cancel a campaign's queued, dispatched and running jobs."""

from __future__ import annotations

import argparse

from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", type=int)
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from ..jobs import cancel

    with common.engine(args).begin() as conn:
        n = cancel(conn, args.campaign)
    print(f"campaign {args.campaign}: {n} job(s) cancelled")
    return 0
