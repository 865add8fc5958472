"""Flags shared by the measurement commands, spelled as TFLite's tools spell them.

Booleans take `--flag`, `--flag=true` or `--flag=false` (also 1/0, yes/no).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from ..printable import printable
from ..tools.progress import LINE_INTERVAL_S


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


def int_at_least(minimum: int):
    """An argparse type: an integer of at least `minimum`."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = "int"  # argparse names the type in "invalid int value"
    return parse


def float_at_least(minimum: float) -> Callable[[str], float]:
    """An argparse type: a number of at least `minimum`."""

    def parse(text: str) -> float:
        value = float(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {value:g}")
        return value

    parse.__name__ = "float"
    return parse


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high`."""

    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def existing_file(text: str) -> str:
    """A path to read (argparse type): missing paths and folders are usage errors, found
    before any work starts."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{printable(text)} is a directory, not a file")
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{printable(text)} does not exist")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"{printable(text)} cannot be read (permission denied)")
    return text


def existing_dir(text: str) -> str:
    """A folder to read (argparse type)."""
    if not os.path.isdir(text):
        what = "is not a directory" if os.path.exists(text) else "does not exist"
        raise argparse.ArgumentTypeError(f"{printable(text)} {what}")
    return text


def folder_to_create(text: str) -> str:
    """A folder that is used or created (argparse type): what exists of it must be a
    folder, and the first existing one on its path must be writable."""
    shown = printable(text)
    path = os.path.abspath(text)
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{shown} is a file, not a directory")
    while not os.path.exists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"cannot create {shown}: {printable(path)} is a file")
    if not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot create {shown}: {printable(path)} is read-only")
    return text


def output_folder(text: str) -> str:
    """A folder to write into (argparse type): an existing folder, or a new one whose
    parent exists (no folders are made above it), writable either way."""
    shown = printable(text)
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{shown} is a file, not a directory")
    folder = text if os.path.isdir(text) else os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(
            f"cannot create {shown}: folder {printable(folder)} does not exist"
        )
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write into {printable(folder)}: read-only")
    return text


def output_file(text: str) -> str:
    """A path to write (argparse type): its folder must exist and be writable, and it must
    not be a folder itself; checked before the work whose figures it will hold."""
    shown = printable(text)
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{shown} is a directory; give a file path")
    folder = os.path.dirname(text) or "."
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(
            f"cannot write {shown}: folder {printable(folder)} does not exist"
        )
    if not os.access(folder, os.W_OK) or (os.path.exists(text) and not os.access(text, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {shown}: permission denied")
    return text


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
        type=folder_to_create,
        default=None,
        help="directory (private to you) where the delegate caches compiled programs "
        "(default: ~/.cache/devicefarm/kernels, keyed by program source)",
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
        help="OpenCL device for --use_gpu: 'P:D' indices or a name substring "
        "(default: the first GPU, else the first OpenCL device)",
    )


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        type=output_file,
        default=None,
        metavar="OUT",
        help="also write every figure as JSON to OUT (default: none)",
    )
    p.add_argument(
        "--progress",
        nargs="?",
        const=True,
        default=None,
        type=parse_bool,
        metavar="true|false",
        help="true: a progress bar on stderr; false: none (default: a bar on a terminal, "
        f"else a line every {LINE_INTERVAL_S:g} s saying runs done, planned and their rate)",
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


def write_json(path: str, record: Any) -> None:
    """Write `record` to `path` as indented JSON (JobError when it cannot be written)."""
    import json

    from ..errors import JobError

    try:
        with open(path, "w") as f:
            json.dump(record, f, indent=2, default=str)
            f.write("\n")
    except OSError as exc:
        raise JobError(f"cannot write {path}: {exc.strerror or exc}") from exc
