"""`devicefarm allowlist`: export a model's allowlist (GPU, or one per delegate), or ask
or merge lists.

    devicefarm allowlist --model M --format devicedb-json|devicedb-bin|csv|json --out FILE
    devicefarm allowlist --model M --delegate nnapi|hexagon|xnnpack --out allowlist-nnapi.json
    devicefarm allowlist evaluate LIST --facts K=V,...   (SUPPORTED/UNSUPPORTED/UNKNOWN)
    devicefarm allowlist merge OURS --base LIST --out FILE

Exported lists always carry Android SDK ranges (orchestrator/allowlist/export.py). The
GPU list (the default) is LiteRT's compatibility list; another delegate's is the same tree
with `devicefarm.<delegate>.status` and `.config`, in a file of its own
(docs/delegates.md, "Allowlists per delegate").
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from . import argtypes, common

FORMATS = ("devicedb-json", "devicedb-bin", "csv", "json")
#: orchestrator.allowlist.rules.LIST_DELEGATES (not imported: --help stays light).
DELEGATES = ("gpu", "xnnpack", "nnapi", "hexagon")


#: subcommand -> (module in orchestrator.allowlist, one-line help)
ACTIONS = {
    "evaluate": (
        "evaluate",
        "ask a devicedb list about a device as an app would: SUPPORTED, UNSUPPORTED or UNKNOWN",
    ),
    "merge": ("merge", "layer our measured list on a base list (LiteRT's shipped one)"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = (
        "Without an ACTION: export the model's list (--model and --out are needed). "
        "--delegate gpu (the default) writes LiteRT's GPU compatibility list "
        "(tflite.gpu.status); another delegate's list judges every configuration of that "
        "delegate measured for the model (e.g. each NNAPI accelerator) by the same rules and "
        "writes devicefarm.<delegate>.status (SUPPORTED/UNSUPPORTED) and "
        "devicefarm.<delegate>.config (the best configuration) in a file of its own, e.g. "
        "allowlist-nnapi.json, which an app's GPUCompatibilityList never reads "
        "(devicedb-json, csv or json; not devicedb-bin)."
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    for name, (module, help_text) in ACTIONS.items():
        action = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(f"orchestrator.allowlist.{module}").add_arguments(action)
    p.add_argument(
        "--model",
        help="the model: its .tflite file (hashed), its sha256, a unique sha256 prefix of 4 "
        "or more characters, or its file name as submitted",
    )
    p.add_argument(
        "--delegate",
        choices=DELEGATES,
        default="gpu",
        help="whose list: gpu (default: LiteRT's GPU list), xnnpack, nnapi or hexagon "
        "(devicefarm.<delegate>.status and .config, a file of its own)",
    )
    p.add_argument(
        "--min-speedup",
        type=argtypes.non_negative,
        default=1.2,
        help="CPU / delegate latency needed (default 1.2)",
    )
    p.add_argument(
        "--max-error",
        type=argtypes.non_negative,
        default=None,
        help="largest inference-diff avg error (default: 1e-3 for fp32, 1e-2 for fp16: the "
        "configuration's precision; fp16 for gpu precision=fp16 or nnapi/xnnpack fp16=true)",
    )
    p.add_argument(
        "--require-full-delegation",
        action="store_true",
        help="a device where any op falls back to the CPU is unsupported",
    )
    p.add_argument(
        "--min-runs", type=argtypes.int_in(1), default=1, help="successful runs needed (default 1)"
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="devicedb-json",
        help="devicedb-json (default), devicedb-bin (GPU list only), csv or json",
    )
    p.add_argument(
        "--out",
        type=argtypes.output_file_or_stdout,
        help="file to write, in a folder that exists ('-' for stdout, text only; no default)",
    )
    common.add_db(p)


def model_ref(text: str) -> str:
    """The sha256 of `text` when it is a file (the model the user just ran), else `text`
    (a sha256, a prefix or a name, resolved against the database)."""
    import hashlib

    from delegate_runtime.errors import JobError

    path = Path(text)
    if not path.exists() or path.suffix != ".tflite":
        return text
    try:
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as exc:
        raise JobError(f"cannot read --model {text}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError, UsageError

    if args.action:
        module, _ = ACTIONS[args.action]
        return int(importlib.import_module(f"orchestrator.allowlist.{module}").run(args) or 0)
    missing = [f"--{n}" for n in ("model", "out") if not getattr(args, n)]
    if missing:
        raise UsageError(f"exporting a list needs {' and '.join(missing)} (or give an ACTION)")
    if args.out == "-" and args.format == "devicedb-bin":
        raise UsageError("argument --out: devicedb-bin is binary: give --out FILE, not -")
    from orchestrator.allowlist.collect import build_allowlist
    from orchestrator.allowlist.export import BINARY_GPU_ONLY, render
    from orchestrator.allowlist.tree import GPU

    if args.delegate != GPU and args.format == "devicedb-bin":
        raise UsageError(f"argument --format: --delegate {args.delegate}: {BINARY_GPU_ONLY}")
    from orchestrator.allowlist.rules import Thresholds, summary

    thresholds = Thresholds(
        min_speedup=args.min_speedup,
        max_error=args.max_error,
        require_full_delegation=args.require_full_delegation,
        min_runs=args.min_runs,
    )
    ref = model_ref(args.model)
    try:
        allowlist = build_allowlist(common.engine(args), ref, thresholds, delegate=args.delegate)
    except JobError as exc:
        if ref == args.model or not str(exc).startswith("no model"):
            raise
        raise JobError(
            f"model file {args.model} (sha256 {ref[:12]}) was never run on the farm"
        ) from exc
    data = render(allowlist, args.format)
    if args.out == "-":
        sys.stdout.write(data.decode())
    else:
        try:
            Path(args.out).write_bytes(data)
        except OSError as exc:  # checked as parsed; gone or full since
            raise JobError(f"cannot write {args.out}: {exc.strerror or exc}") from exc
    counts = summary({str(i): e.decision for i, e in enumerate(allowlist.entries)})
    aside = sum(e.evidence.set_aside for e in allowlist.entries)
    which = "" if args.delegate == GPU else f" {args.delegate} list"
    print(
        f"{allowlist.model_name} ({allowlist.model_sha256[:12]}){which}: "
        + ", ".join(f"{n} {s}" for s, n in counts.items())
        + (f"; {aside} results of other configurations set aside" if aside else "")
        + ("" if args.out == "-" else f"; wrote {args.format} to {args.out}"),
        file=sys.stderr,
    )
    return 0
