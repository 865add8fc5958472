"""`devicefarm example OUT.tflite`: write a small example model (no download needed)."""

from __future__ import annotations

import argparse

from ._flags import int_at_least, output_file


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Write a small MobileNet-style float32 classifier: random weights, its head "
        "calibrated so the softmax is peaked and its top class follows the input."
    )
    p.add_argument("out", type=output_file, help="path of the .tflite file to write")
    p.add_argument(
        "--size", type=int_at_least(1), default=96, help="input height and width (default: 96)"
    )
    p.add_argument(
        "--classes", type=int_at_least(2), default=100, help="output classes (default: 100)"
    )
    p.add_argument("--seed", type=int, default=0, help="random weight seed (default: 0)")


def run(args: argparse.Namespace) -> int:
    from ..errors import JobError
    from ..examples import tiny_mobilenet
    from ..printable import printable

    data = tiny_mobilenet(args.size, args.classes, args.seed)
    try:
        with open(args.out, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise JobError(f"cannot write {printable(args.out)}: {exc.strerror or exc}") from exc
    print(
        f"wrote {printable(args.out)} ({len(data)} bytes): a MobileNet-style float32 "
        f"classifier, input 1x{args.size}x{args.size}x3, {args.classes} classes"
    )
    return 0
