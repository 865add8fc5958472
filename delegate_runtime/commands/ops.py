"""`devicefarm ops`: the ops (and versions) the reference interpreter and GPU delegate run."""

from __future__ import annotations

import argparse
from collections.abc import Iterable


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu",
        action="store_true",
        help="list the GPU delegate's rules instead (default: the reference interpreter's ops)",
    )


def _versions(versions: Iterable[int]) -> str:
    return f"v{list(versions)}" if versions else "none"


def _table(rows: list[list[str]]) -> str:
    """The rows as columns, each padded to its longest cell but the last."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)), row[-1]])
        for row in rows
    )


def run(args: argparse.Namespace) -> int:
    if args.gpu:
        from ..gpu.support import RULES

        rows = [
            [
                name,
                f"float {_versions(r.float_versions)}",
                f"quantized {_versions(r.quant_versions)}",
            ]
            for name, r in sorted(RULES.items())
        ]
    else:
        from ..ops.registry import supported_ops

        rows = [[name, _versions(v)] for name, v in supported_ops().items()]
    print(_table(rows))
    return 0
