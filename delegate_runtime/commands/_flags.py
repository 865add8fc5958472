"""Flags shared by the measurement commands, spelled as TFLite's tools spell them.

Booleans take `--flag`, `--flag=true` or `--flag=false` (also 1/0, yes/no).
"""

from __future__ import annotations

import argparse
from typing import Any


def parse_bool(text: str) -> bool:
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_bool(p: argparse.ArgumentParser, name: str, default: bool, help: str) -> None:
    p.add_argument(
        name,
        nargs="?",
        const=True,
        default=default,
        type=parse_bool,
        metavar="true|false",
        help=f"{help} (default: {str(default).lower()})",
    )


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def add_delegate_flags(p: argparse.ArgumentParser) -> None:
    """--use_gpu and the GPU delegate's options (benchmark_model's names)."""
    g = p.add_argument_group("delegate")
    add_bool(g, "--use_gpu", False, "run on the OpenCL GPU delegate instead of the CPU reference")
    add_bool(
        g,
        "--gpu_precision_loss_allowed",
        True,
        "let the GPU delegate compute in fp16 (false keeps fp32)",
    )
    add_bool(
        g,
        "--gpu_experimental_enable_quant",
        True,
        "let the GPU delegate take quantized models (float view of their ops)",
    )
    g.add_argument(
        "--max_delegated_partitions",
        type=non_negative_int,
        default=1,
        help="keep only this many of the largest delegated partitions (default: 1)",
    )
    g.add_argument(
        "--delegate_serialize_dir",
        default=None,
        help="directory (private to you) where the delegate caches compiled programs",
    )
    g.add_argument(
        "--delegate_serialize_token",
        default=None,
        help="token unique to the model for the cache (default: the model's sha256)",
    )
    g.add_argument(
        "--device",
        default=None,
        metavar="SPEC",
        help="OpenCL device for --use_gpu: 'P:D' indices or a name substring",
    )


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", default=None, metavar="OUT", help="also write every figure as JSON to OUT"
    )
    p.add_argument(
        "--progress",
        nargs="?",
        const=True,
        default=None,
        type=parse_bool,
        metavar="true|false",
        help="draw progress bars on stderr (default: only when stderr is a terminal)",
    )


def delegate_options(args: argparse.Namespace) -> dict[str, Any]:
    """BenchmarkOptions fields from the delegate flags."""
    return {
        "use_gpu": args.use_gpu,
        "precision": "fp16" if args.use_gpu and args.gpu_precision_loss_allowed else "fp32",
        "enable_quant": args.gpu_experimental_enable_quant,
        "max_delegated_partitions": args.max_delegated_partitions,
        "serialize_dir": args.delegate_serialize_dir,
        "serialize_token": args.delegate_serialize_token,
        "device": args.device,
    }


def write_json(path: str, record: dict[str, Any]) -> None:
    """Write `record` to `path` as indented JSON (JobError when it cannot be written)."""
    import json

    from ..errors import JobError

    try:
        with open(path, "w") as f:
            json.dump(record, f, indent=2, default=str)
            f.write("\n")
    except OSError as exc:
        raise JobError(f"cannot write {path}: {exc.strerror or exc}") from exc
