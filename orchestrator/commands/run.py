"""`devicefarm run MODEL...`: the whole farm on this machine, no server needed.

Uses a SQLite file and a filesystem broker under $DEVICEFARM_HOME (default ./.devicefarm),
runs every model on every local device in each configuration the device runs, and prints
the per-device, per-configuration comparison table.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help=".tflite model(s)")
    p.add_argument(
        "--devices",
        default="",
        metavar="SPEC,...",
        help="local devices: kinds (cpu, opencl), key globs, noop:NAME; default all",
    )
    p.add_argument(
        "--configs",
        default=None,
        help="cpu,gpu-fp32,gpu-fp16 (default: those the local devices run)",
    )
    p.add_argument("--runs", type=int, default=50, help="benchmark runs per job (default 50)")
    p.add_argument(
        "--diff-runs",
        type=int,
        default=20,
        help="inference diff runs for GPU configurations (default 20; 0: none)",
    )
    p.add_argument("--timeout", type=float, default=None, help="soft time limit per job, s")
    p.add_argument("--db", default=None, help="database URL (default: the embedded SQLite)")
    p.add_argument("--broker", default=None, help="broker URL (default: embedded filesystem)")


def run(args: argparse.Namespace) -> int:
    from ..embedded import run_local
    from ..submit import RunSettings

    specs = [s for s in args.devices.split(",") if s.strip()] or None
    configs = [c for c in args.configs.split(",") if c.strip()] if args.configs else None
    settings = RunSettings(num_runs=args.runs, diff_runs=args.diff_runs, timeout_s=args.timeout)
    result = run_local(
        args.models,
        specs,
        configs,
        settings,
        args.db,
        args.broker,
        say=lambda m: print(m, flush=True),
    )
    sys.stdout.flush()
    return 0 if result.ok else 1
