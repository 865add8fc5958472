"""`devicefarm run MODEL...`: the whole farm on this machine, no server needed.

Uses a SQLite file and a filesystem broker in the farm's home (--home, $DEVICEFARM_HOME, else
the user's data directory: farm_core.settings.home), runs every model on every local device
in each configuration the device runs, and prints the per-device, per-configuration
comparison table.
"""

from __future__ import annotations

import argparse
import sys

from . import argtypes


def add_arguments(p: argparse.ArgumentParser) -> None:
    from farm_core import service_urls
    from worker_agent.discovery import SPEC_HELP, device_specs

    p.add_argument("models", nargs="+", metavar="MODEL", help=".tflite model(s)")
    p.add_argument(
        "--devices",
        default="",
        type=device_specs,
        metavar="SPEC,...",
        help=f"local devices: {SPEC_HELP}; default all",
    )
    p.add_argument(
        "--configs",
        default=None,
        type=argtypes.configs,
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
    p.add_argument(
        "--db",
        default=None,
        type=service_urls.database_url,
        help="database URL, a SQLite file created if missing, in a folder that exists "
        "(default: the embedded SQLite file, its folder created)",
    )
    p.add_argument(
        "--broker",
        default=None,
        type=service_urls.broker_url,
        help="broker URL (default: embedded filesystem)",
    )


def input_errors(args: argparse.Namespace) -> list[str]:
    """What is wrong with the models, their name and --input values: found before any
    device is looked for (submitting finds the same)."""
    from delegate_runtime import read_model
    from farm_core.user_inputs import read_inputs
    from orchestrator.submit import model_name_errors, read_models

    errors = model_name_errors(args.name, len(args.models))
    models = read_models(args.models, errors)
    if args.input and not errors:
        read_inputs(args.input, [read_model(m.data) for m in models], errors)
    return errors


def run(args: argparse.Namespace) -> int:
    from farm_core import service_urls
    from farm_core.settings import new_home_notice
    from orchestrator.submit import RunSettings, SubmissionError

    from ..embedded import run_local

    errors = input_errors(args)
    if errors:  # before any device is started
        raise SubmissionError(errors)

    settings = RunSettings(num_runs=args.runs, diff_runs=args.diff_runs, timeout_s=args.timeout)
    notice = None if args.db else new_home_notice()
    if notice:
        print(notice, flush=True)
    result = run_local(
        args.models,
        args.devices,
        args.configs,
        settings,
        args.db or service_urls.default_db(existing=False),  # run may start a farm
        args.broker or service_urls.default_broker(),
        say=lambda m: print(m, flush=True),
        inputs=args.input,
        model_name=args.name,
    )
    sys.stdout.flush()
    return 0 if result.ok else 1
