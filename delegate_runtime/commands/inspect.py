"""`devicefarm inspect MODEL`: subgraphs, tensors, ops, and what the GPU delegate takes."""

from __future__ import annotations

import argparse

from ..printable import printable
from ._flags import existing_file


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", type=existing_file, help="path to a .tflite model")
    p.add_argument("--tensors", action="store_true", help="list every tensor too (default: off)")
    p.add_argument(
        "--no-quant",
        action="store_true",
        help="judge GPU support with quantized ops disabled (default: enabled)",
    )


def run(args: argparse.Namespace) -> int:
    from ..gpu.fold import fold_constants
    from ..gpu.partition import partition
    from ..gpu.support import SupportOptions
    from ..reader import load_model
    from ..sparsity import summary

    model = load_model(args.model)
    print(f"model {printable(args.model)}: {model.size_bytes} bytes, sha256 {model.sha256}")
    for si, sg in enumerate(model.subgraphs):
        print(
            f"subgraph {si} '{printable(sg.name)}': {len(sg.operators)} ops, {len(sg.tensors)} tensors, "
            f"inputs {list(sg.inputs)}, outputs {list(sg.outputs)}"
        )
        for op in sg.operators:
            print(
                f"  #{op.index:<4d} {printable(op.op)} v{op.version}  in {list(op.inputs)} out {list(op.outputs)}"
            )
        sparse = [t for t in sg.tensors if t.sparsity is not None]
        if sparse:
            dense = sum(t.size * t.dtype.itemsize for t in sparse)
            stored = sum(t.sparsity.stored_bytes(t.dtype.itemsize) for t in sparse)
            print(f"  {len(sparse)} sparse tensors: {dense} bytes dense, {stored} stored")
            for t in sparse:
                print(
                    f"  t{t.index:<4d} {summary(printable(t.name), t.shape, t.dtype, t.sparsity)}"
                )
        if args.tensors:
            for t in sg.tensors:
                kind = "const" if t.is_constant else "var" if t.is_variable else ""
                q = " quant" if t.quantization is not None else ""
                print(
                    f"  t{t.index:<4d} {printable(t.name)} {list(t.shape)} {t.dtype.name} {kind}{q}"
                )
    for s in model.signatures:
        print(
            f"signature '{printable(s.key)}': subgraph {s.subgraph_index}, "
            f"inputs {printable(list(s.inputs))}, outputs {printable(list(s.outputs))}"
        )
    folded, n = fold_constants(model)
    summary = partition(folded.main, SupportOptions(enable_quant=not args.no_quant))
    print(
        f"GPU delegate: {n} static ops folded; {summary.delegated_nodes} of "
        f"{summary.total_nodes} nodes delegated in {len(summary.partitions)} partition(s)"
    )
    for line in summary.messages():
        print(f"  {printable(line)}")
    return 0
