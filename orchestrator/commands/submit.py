"""`devicefarm submit MODEL... --devices SELECTOR --configs cpu,gpu-fp32,gpu-fp16`."""

from __future__ import annotations

import argparse

from ..configs import DEFAULT_CONFIGS
from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help=".tflite model(s)")
    p.add_argument(
        "--devices",
        default="all",
        metavar="SELECTOR",
        help="e.g. 'kind=opencl,vendor=nvidia|amd,driver>=535', 'opencl:*', "
        "'tag=lab1' (default: all)",
    )
    p.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        help="comma-separated: cpu, gpu-fp32, gpu-fp16 (default: all three)",
    )
    p.add_argument("--runs", type=int, default=50, help="benchmark runs per job (default 50)")
    p.add_argument(
        "--diff-runs",
        type=int,
        default=50,
        help="inference diff runs for GPU configurations (default 50; 0: none)",
    )
    p.add_argument("--priority", type=int, default=0, help="0 (default) .. 9 (most urgent)")
    p.add_argument("--timeout", type=float, default=None, help="soft time limit per job, s")
    p.add_argument("--name", default="", help="campaign name")
    common.add_db(p)
    common.add_broker(p)


def run(args: argparse.Namespace) -> int:
    from ..dispatch import CeleryDispatcher
    from ..submit import RunSettings, submit

    settings = RunSettings(num_runs=args.runs, diff_runs=args.diff_runs, timeout_s=args.timeout)
    dispatcher = CeleryDispatcher(common.broker_url(args))
    try:
        sub = submit(
            common.engine(args),
            dispatcher,
            args.models,
            args.devices,
            args.configs,
            settings,
            args.priority,
            args.name,
        )
    finally:
        dispatcher.close()
    for w in sub.warnings:
        print(f"warning: {w}")
    print(
        f"campaign {sub.campaign_id}: {sub.jobs} jobs on {len(sub.devices)} device(s), "
        f"{sub.sent} sent"
    )
    return 0
