"""`devicefarm invoke`: run a model once. A stable contract that external checks drive:

    devicefarm invoke MODEL --inputs IN.npz --outputs OUT.npz --delegate cpu|gpu
        [--precision fp32|fp16] [--device SPEC]

Inputs are `in_0, in_1, ...` in model input order; outputs are written as `out_0, ...`.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..errors import JobError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to a .tflite model")
    p.add_argument("--inputs", required=True, help=".npz with in_0, in_1, ... in model input order")
    p.add_argument("--outputs", required=True, help=".npz to write out_0, out_1, ... to")
    p.add_argument(
        "--delegate",
        choices=("cpu", "gpu"),
        default="cpu",
        help="cpu: the numpy reference; gpu: the OpenCL GPU delegate (default: cpu)",
    )
    p.add_argument(
        "--precision",
        choices=("fp32", "fp16"),
        default="fp32",
        help="fp16 allows half-precision storage (default: fp32)",
    )
    p.add_argument(
        "--device",
        default=None,
        help="OpenCL device for --delegate gpu: 'P:D' indices or a name substring",
    )
    p.add_argument("--signature", default=None, help="run this signature instead of subgraph 0")


def load_inputs(path: str) -> list[np.ndarray]:
    """Arrays in_0, in_1, ... from an .npz file, in order."""
    if not os.path.exists(path):
        raise JobError(f"inputs file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            files = dict(npz.items())
    except Exception as exc:  # numpy raises several kinds for a bad archive
        raise JobError(f"cannot read inputs {path}: {exc}") from exc
    names = [f"in_{i}" for i in range(len(files))]
    missing = [n for n in names if n not in files]
    if missing:
        raise JobError(f"inputs {path} must hold in_0..in_{len(files) - 1}; missing {missing}")
    return [files[n] for n in names]


def run(args: argparse.Namespace) -> int:
    from ..reader import load_model
    from ..session import make_session

    model = load_model(args.model)
    inputs = load_inputs(args.inputs)
    session = make_session(
        model, delegate=args.delegate, precision=args.precision, device=args.device, log=sys.stderr
    )
    if args.signature:
        sig = next((s for s in model.signatures if s.key == args.signature), None)
        if sig is None:
            raise JobError(f"no signature {args.signature!r}")
        outputs = session.invoke(inputs, subgraph=sig.subgraph_index)
    else:
        outputs = session.invoke(inputs)
    np.savez(args.outputs, **{f"out_{i}": o for i, o in enumerate(outputs)})
    return 0
