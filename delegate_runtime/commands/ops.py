"""`devicefarm ops`: the ops (and versions) the reference interpreter and GPU delegate run."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", action="store_true", help="list the GPU delegate's rules instead")


def run(args: argparse.Namespace) -> int:
    if args.gpu:
        from ..gpu.support import RULES

        for name, rule in sorted(RULES.items()):
            print(
                f"{name:28s} float v{list(rule.float_versions)} quantized v{list(rule.quant_versions)}"
            )
        return 0
    from ..ops.registry import supported_ops

    for name, versions in supported_ops().items():
        print(f"{name:28s} v{list(versions)}")
    return 0
