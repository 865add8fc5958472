"""`devicefarm submit MODEL... --devices SELECTOR --configs cpu,gpu-fp32,gpu-fp16 [--wait]`.

With `--wait` it is a CI gate: progress as jobs run and end, then failures and a
regressions section, and an exit code (common.EXIT_CODES; docs/ci.md).
"""

from __future__ import annotations

import argparse

from farm_core.configs import DEFAULT_CONFIGS

from . import argtypes, common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help=".tflite model(s)")
    p.add_argument(
        "--devices",
        default="all",
        type=argtypes.selector,
        metavar="SELECTOR",
        help="e.g. 'kind=opencl,vendor=nvidia|amd,driver>=535', 'opencl:*', "
        "'tag=lab1' (default: all)",
    )
    p.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        type=argtypes.configs_text,
        help="comma-separated: cpu, gpu-fp32, gpu-fp16 (default: all three)",
    )
    argtypes.add_run_counts(p)
    p.add_argument(
        "--priority", type=argtypes.int_in(0, 9), default=0, help="0 (default) .. 9 (most urgent)"
    )
    p.add_argument(
        "--timeout",
        type=argtypes.seconds,
        default=None,
        help="soft time limit per job, s (default: none)",
    )
    p.add_argument(
        "--name",
        default="",
        help="the model's name (one model): its history and regression baseline are kept by "
        "this name across versions (each version is its sha256); also the campaign's name "
        "(default: the model file name; at most 255 characters)",
    )
    p.add_argument(
        "--project",
        default=None,
        metavar="P",
        help="the project (team) the campaign belongs to (default: default; through --api: "
        "the token's user's only project)",
    )
    p.add_argument(
        "--max-model-mb",
        type=argtypes.float_over(0.0),
        default=None,
        help="refuse model files larger than this, MiB (default: $DEVICEFARM_MAX_MODEL_MB "
        "or 128, also the most allowed: the database stores each model)",
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
        "--wait",
        action="store_true",
        help="wait for every job to end, showing progress, then judge the campaign: failed "
        "jobs and latency regressions set the exit status (below)",
    )
    p.add_argument(
        "--wait-timeout",
        type=argtypes.seconds,
        default=None,
        metavar="S",
        help="--wait: give up after S seconds, exit 1 (the jobs go on; default: no limit)",
    )
    common.add_gate(p)
    common.add_db(p)
    common.add_broker(p)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = common.EXIT_CODES + "\n  (without --wait: 0 once submitted, 1 on an error)"


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.schema import DEFAULT_PROJECT
    from orchestrator.submit import DEFAULT_MAX_MODEL_MB, RunSettings, SubmissionError, submit

    cap_mb = args.max_model_mb
    if not args.wait:
        given = [f for f, v in _GATE_ONLY.items() if getattr(args, v) not in (None, False)]
        if given:
            raise JobError(f"{', '.join(given)} need(s) --wait")
    if cap_mb is not None and not 0 < cap_mb <= DEFAULT_MAX_MODEL_MB:
        raise SubmissionError([f"--max-model-mb must be in (0, {DEFAULT_MAX_MODEL_MB}]"])

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
            max_model_bytes=None if cap_mb is None else int(cap_mb * 1024**2),
            inputs=args.input,
            model_name=args.name,
            project=args.project or DEFAULT_PROJECT,
        )
    finally:
        dispatcher.close()
    for w in sub.warnings:
        print(f"warning: {w}")
    print(
        f"campaign {sub.campaign_id}: {sub.jobs} jobs on {len(sub.devices)} device(s), "
        f"{sub.sent} sent",
        flush=True,
    )
    if not args.wait:
        return 0
    return common.wait_and_gate(args, common.engine(args), sub.campaign_id)


#: Options that only --wait uses: option -> attribute.
_GATE_ONLY = {
    "--baseline": "baseline",
    "--junit": "junit",
    "--wait-timeout": "wait_timeout",
    "--confirm-pairs": "confirm_pairs",
}
