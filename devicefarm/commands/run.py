"""`devicefarm run MODEL...`: the whole farm on this machine, no server needed.

Uses a SQLite file and a filesystem broker under $DEVICEFARM_HOME (default ./.devicefarm),
runs every model on every local device in each configuration the device runs, and prints
the per-device, per-configuration comparison table.
"""

from __future__ import annotations

import argparse
import sys

from . import argtypes, common


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
    argtypes.add_run_counts(p)
    p.add_argument(
        "--timeout",
        type=argtypes.seconds,
        default=None,
        help="soft time limit per job, s (default: none)",
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="LAYER:SHAPE:FILE",
        help="the model input LAYER's values: a raw file of SHAPE (e.g. 1,224,224,3) in the "
        "tensor's type, as benchmark_model's --input_layer_value_files; or VALUES.npz (one "
        "array per layer name). Repeatable; every model input needs one",
    )
    p.add_argument(
        "--name",
        default="",
        help="the model's name (one model): its history is kept by this name across versions "
        "(default: the model file name)",
    )
    p.add_argument("--db", default=None, help="database URL (default: the embedded SQLite)")
    p.add_argument("--broker", default=None, help="broker URL (default: embedded filesystem)")


def run(args: argparse.Namespace) -> int:
    from orchestrator.submit import RunSettings, SubmissionError, model_name_errors

    from ..embedded import run_local

    errors = model_name_errors(args.name, len(args.models))
    if errors:  # before any device is started
        raise SubmissionError(errors)

    specs = [s for s in args.devices.split(",") if s.strip()] or None
    configs = [c for c in args.configs.split(",") if c.strip()] if args.configs else None
    settings = RunSettings(num_runs=args.runs, diff_runs=args.diff_runs, timeout_s=args.timeout)
    result = run_local(
        args.models,
        specs,
        configs,
        settings,
        args.db,
        args.broker and common.checked_broker_url(args.broker),
        say=lambda m: print(m, flush=True),
        inputs=args.input,
        model_name=args.name,
    )
    sys.stdout.flush()
    return 0 if result.ok else 1
