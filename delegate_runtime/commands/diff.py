"""`devicefarm diff`: TFLite's inference diff (a delegate against the CPU reference).

devicefarm diff --model MODEL [--use_gpu] [--num_runs 50] [--seed S] [--json OUT]
"""

from __future__ import annotations

import argparse
import sys

from ._flags import (
    add_delegate_flags,
    add_output_flags,
    delegate_options,
    existing_file,
    int_at_least,
    write_json,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Run a model on random inputs through the single-threaded CPU reference (the "
        "official LiteRT interpreter when installed, else ours) and through the chosen "
        "delegate; print latencies and, per output, the mean absolute difference "
        "(average and standard deviation over runs), as TFLite's inference diff does."
    )
    p.add_argument(
        "--model",
        required=True,
        type=existing_file,
        metavar="MODEL",
        help="path to a .tflite model",
    )
    p.add_argument(
        "--num_runs",
        type=int_at_least(1),
        default=50,
        help="number of random inputs to compare on (default: 50)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the random inputs (default: fresh each time)",
    )
    add_delegate_flags(p)
    add_output_flags(p)


def run(args: argparse.Namespace) -> int:
    from ..tools.benchmark import BenchmarkOptions
    from ..tools.diff import run_inference_diff
    from ..tools.progress import progress_mode

    options = BenchmarkOptions(**delegate_options(args))
    result = run_inference_diff(
        args.model,
        options,
        num_runs=args.num_runs,
        seed=args.seed,
        progress=progress_mode(args.progress),
        out=sys.stdout,
    )
    if args.json:
        write_json(args.json, result.to_dict())
    return 0
