"""`devicefarm invoke`: run a model once. A stable contract that external checks drive:

    devicefarm invoke MODEL --inputs IN.npz --outputs OUT.npz --delegate cpu|gpu
        [--precision fp32|fp16] [--device SPEC]

Inputs are `in_0, in_1, ...` in model input order (other arrays in the file, such as the
expected `out_*` of a conformance case, are ignored); outputs are written as `out_0, ...`.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile

import numpy as np

from ..errors import JobError
from ..printable import printable
from ._flags import existing_file, output_file

#: Names of the input arrays in an .npz: in_0, in_1, ...
INPUT_KEY = re.compile(r"in_(\d+)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Run a model once on the inputs of an .npz file and write its outputs to another."
    )
    p.add_argument("model", type=existing_file, help="path to a .tflite model")
    p.add_argument(
        "--inputs",
        required=True,
        type=existing_file,
        metavar="IN.npz",
        help=".npz with in_0, in_1, ... in model input order (other arrays are ignored)",
    )
    p.add_argument(
        "--outputs",
        required=True,
        type=output_file,
        metavar="OUT.npz",
        help=".npz to write out_0, out_1, ... to (checked before the model runs)",
    )
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
        metavar="SPEC",
        help="OpenCL device for --delegate gpu: 'P:D' indices or a name substring "
        "(default: the first GPU, else the first OpenCL device)",
    )
    p.add_argument(
        "--signature",
        default=None,
        metavar="KEY",
        help="run this signature instead of subgraph 0 (default: subgraph 0)",
    )


def load_inputs(path: str) -> list[np.ndarray]:
    """Arrays in_0, in_1, ... from an .npz file, in order; other arrays are ignored."""
    if not zipfile.is_zipfile(path):
        raise JobError(f"inputs {printable(path)} is not an .npz file (numpy.savez's format)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            keys = list(npz.keys())
            found = {int(m.group(1)): k for k in keys if (m := INPUT_KEY.fullmatch(k))}
            arrays = {i: npz[k] for i, k in found.items()}
    except Exception as exc:  # numpy and zipfile raise several kinds for a bad archive
        raise JobError(f"cannot read inputs {printable(path)}: {exc}") from exc
    if not arrays:
        shown = ", ".join(printable(k) for k in keys[:8]) or "nothing"
        raise JobError(f"inputs {printable(path)} hold no in_0, in_1, ... arrays (found {shown})")
    count = max(arrays) + 1
    missing = [f"in_{i}" for i in range(count) if i not in arrays]
    if missing:
        raise JobError(
            f"inputs {printable(path)} must hold in_0..in_{count - 1}; missing {missing}"
        )
    return [arrays[i] for i in range(count)]


def run(args: argparse.Namespace) -> int:
    from ..reader import load_model
    from ..session import make_session

    inputs = load_inputs(args.inputs)
    model = load_model(args.model)
    subgraph = 0
    if args.signature:
        sig = next((s for s in model.signatures if s.key == args.signature), None)
        if sig is None:
            keys = [printable(s.key) for s in model.signatures]
            raise JobError(f"no signature '{printable(args.signature)}'; the model has {keys}")
        subgraph = sig.subgraph_index
    session = make_session(
        model, delegate=args.delegate, precision=args.precision, device=args.device, log=sys.stderr
    )
    outputs = session.invoke(inputs, subgraph=subgraph)
    try:
        with open(args.outputs, "wb") as f:  # a file object: savez keeps the name as given
            np.savez(f, **{f"out_{i}": o for i, o in enumerate(outputs)})
    except OSError as exc:
        raise JobError(f"cannot write {printable(args.outputs)}: {exc.strerror or exc}") from exc
    return 0
