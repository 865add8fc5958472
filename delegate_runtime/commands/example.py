"""`devicefarm example OUT.tflite`: write a small example model (no download needed)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="path of the .tflite file to write")
    p.add_argument("--size", type=int, default=96, help="input height and width (default 96)")
    p.add_argument("--classes", type=int, default=100, help="output classes (default 100)")
    p.add_argument("--seed", type=int, default=0, help="random weight seed (default 0)")


def run(args: argparse.Namespace) -> int:
    from ..examples import tiny_mobilenet

    data = tiny_mobilenet(args.size, args.classes, args.seed)
    Path(args.out).write_bytes(data)
    print(
        f"wrote {args.out} ({len(data)} bytes): a MobileNet-style float32 classifier, "
        f"input 1x{args.size}x{args.size}x3"
    )
    return 0
