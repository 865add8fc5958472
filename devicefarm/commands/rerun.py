"""`devicefarm rerun CAMPAIGN`: re-attempt the campaign's failed, timed-out and cancelled
jobs, as new attempts of the same jobs (not a new campaign)."""

from __future__ import annotations

import argparse

from . import argtypes, common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "campaign", type=argtypes.campaign_id, help="the campaign's id (`devicefarm status`)"
    )
    common.add_db(p)
    common.add_broker(p)
    p.epilog = "exit status: 0 (also when nothing needed a re-run), 1 for an unknown campaign"


def run(args: argparse.Namespace) -> int:
    from farm_core.dispatch import CeleryDispatcher
    from orchestrator.rerun import rerun

    engine = common.engine(args)
    dispatcher = CeleryDispatcher(common.broker_url(args))
    try:
        done = rerun(engine, dispatcher, args.campaign)
    finally:
        dispatcher.close()
    if not done.cells:
        print(
            f"campaign {args.campaign}: nothing to re-run (no failed, timed-out or cancelled job)"
        )
        return 0
    for job, model, device, config, state in done.cells:
        print(f"re-queued job {job}: {model} {device} {config} (was {state})")
    waiting = len(done.cells) - done.sent
    print(
        f"campaign {args.campaign}: {len(done.cells)} job(s) re-queued, {done.sent} sent"
        + (f", {waiting} wait for a device or the reconciler" if waiting else "")
    )
    if done.broker_error:
        print(f"warning: broker unreachable ({done.broker_error}); the reconciler sends them")
    return 0
