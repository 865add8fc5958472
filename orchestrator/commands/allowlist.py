"""`devicefarm allowlist --model M --format devicedb-json|devicedb-bin|csv|json --out FILE`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import common

FORMATS = ("devicedb-json", "devicedb-bin", "csv", "json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the model: sha256, a prefix, or file name")
    p.add_argument("--min-speedup", type=float, default=1.2, help="CPU / GPU latency needed (1.2)")
    p.add_argument(
        "--max-error",
        type=float,
        default=None,
        help="largest inference-diff avg error (default: 1e-3 for fp32, 1e-2 for fp16)",
    )
    p.add_argument(
        "--require-full-delegation",
        action="store_true",
        help="a device where any op falls back to the CPU is unsupported",
    )
    p.add_argument("--min-runs", type=int, default=1, help="successful runs needed (1)")
    p.add_argument(
        "--sdk-minimum",
        action="store_true",
        help="devicedb: newer Android SDKs inherit the newest measured SDK's decision",
    )
    p.add_argument("--format", choices=FORMATS, default="devicedb-json")
    p.add_argument("--out", required=True, help="file to write ('-' for stdout, text only)")
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError

    from ..allowlist.collect import build_allowlist
    from ..allowlist.export import render
    from ..allowlist.rules import Thresholds, summary

    if args.min_runs < 1:
        raise JobError(f"--min-runs must be at least 1, not {args.min_runs}")
    if args.min_speedup < 0 or (args.max_error is not None and args.max_error < 0):
        raise JobError("--min-speedup and --max-error must not be negative")
    thresholds = Thresholds(
        min_speedup=args.min_speedup,
        max_error=args.max_error,
        require_full_delegation=args.require_full_delegation,
        min_runs=args.min_runs,
    )
    allowlist = build_allowlist(common.engine(args), args.model, thresholds)
    data = render(allowlist, args.format, sdk_minimum=args.sdk_minimum)
    if args.out == "-":
        if args.format == "devicedb-bin":
            raise JobError("devicedb-bin is binary: give --out FILE")
        sys.stdout.write(data.decode())
    else:
        Path(args.out).write_bytes(data)
    counts = summary({str(i): e.decision for i, e in enumerate(allowlist.entries)})
    print(
        f"{allowlist.model_name} ({allowlist.model_sha256[:12]}): "
        + ", ".join(f"{n} {s}" for s, n in counts.items())
        + ("" if args.out == "-" else f"; wrote {args.format} to {args.out}"),
        file=sys.stderr,
    )
    return 0
