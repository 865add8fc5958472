"""`devicefarm benchmark`: TFLite's benchmark_model for our runtime (same flags, same lines).

devicefarm benchmark --graph MODEL [--use_gpu] [--num_runs N] ... [--json OUT]
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._flags import (
    add_bool,
    add_delegate_flags,
    add_output_flags,
    delegate_options,
    existing_file,
    non_negative_float,
    non_negative_int,
    write_json,
)

if TYPE_CHECKING:
    from ..tools.benchmark import BenchmarkOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Measure a model's latency (init, first inference, warm-up, timed runs), memory, "
        "delegation and per-op times, printing the lines of TFLite's benchmark_model."
    )
    p.add_argument(
        "--graph",
        required=True,
        type=existing_file,
        metavar="MODEL",
        help="path to a .tflite model",
    )
    runs = p.add_argument_group("runs")
    runs.add_argument(
        "--num_runs",
        type=non_negative_int,
        default=50,
        help="timed runs: at least this many (default: 50)",
    )
    runs.add_argument(
        "--min_secs",
        type=non_negative_float,
        default=1.0,
        help="timed runs: for at least this many seconds (default: 1)",
    )
    runs.add_argument(
        "--max_secs",
        type=non_negative_float,
        default=150.0,
        help="stop each loop once this many seconds have passed (default: 150)",
    )
    runs.add_argument(
        "--warmup_runs",
        type=non_negative_int,
        default=1,
        help="warm-up runs before timing: at least this many (default: 1)",
    )
    runs.add_argument(
        "--warmup_min_secs",
        type=non_negative_float,
        default=0.5,
        help="warm-up: for at least this many seconds (default: 0.5)",
    )
    runs.add_argument(
        "--warmup_max_secs",
        type=non_negative_float,
        default=2.0,
        help="warm-up then goes on until the latency is stable, for at most this many "
        "seconds (ours; default: 2)",
    )
    add_delegate_flags(p)
    report = p.add_argument_group("reporting")
    add_bool(
        report,
        "--enable_op_profiling",
        False,
        "time every op in a pass of its own after the timed runs (which stay on the shipped "
        "path) and print TFLite's profiling tables",
    )
    add_bool(
        report,
        "--report_peak_memory_footprint",
        False,
        "sample the resident size every 50 ms and report the peak",
    )
    add_bool(
        report,
        "--require_full_delegation",
        False,
        "fail when the GPU delegate leaves any op to the CPU",
    )
    add_output_flags(report)


def options_from_args(args: argparse.Namespace) -> BenchmarkOptions:
    """BenchmarkOptions from the flags `add_arguments` defines (benchmark_model's)."""
    from ..tools.benchmark import BenchmarkOptions

    return BenchmarkOptions(
        num_runs=args.num_runs,
        min_secs=args.min_secs,
        max_secs=args.max_secs,
        warmup_runs=args.warmup_runs,
        warmup_min_secs=args.warmup_min_secs,
        warmup_max_secs=args.warmup_max_secs,
        enable_op_profiling=args.enable_op_profiling,
        report_peak_memory=args.report_peak_memory_footprint,
        require_full_delegation=args.require_full_delegation,
        **delegate_options(args),
    )


def run(args: argparse.Namespace) -> int:
    from ..tools.benchmark import run_benchmark
    from ..tools.progress import progress_mode

    options = options_from_args(args)
    result = run_benchmark(
        args.graph, options, progress=progress_mode(args.progress), out=sys.stdout
    )
    if args.json:
        write_json(args.json, result.to_dict())
    return 0
