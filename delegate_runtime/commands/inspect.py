"""`devicefarm inspect MODEL`: subgraphs, tensors, ops, and what the GPU delegate takes."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to a .tflite model")
    p.add_argument("--tensors", action="store_true", help="list every tensor too")
    p.add_argument(
        "--no-quant", action="store_true", help="judge GPU support with quantized ops disabled"
    )


def run(args: argparse.Namespace) -> int:
    from ..gpu.fold import fold_constants
    from ..gpu.partition import partition
    from ..gpu.support import SupportOptions
    from ..reader import load_model

    model = load_model(args.model)
    print(f"model {args.model}: {model.size_bytes} bytes, sha256 {model.sha256}")
    for si, sg in enumerate(model.subgraphs):
        print(
            f"subgraph {si} '{sg.name}': {len(sg.operators)} ops, {len(sg.tensors)} tensors, "
            f"inputs {list(sg.inputs)}, outputs {list(sg.outputs)}"
        )
        for op in sg.operators:
            print(
                f"  #{op.index:<4d} {op.op} v{op.version}  in {list(op.inputs)} out {list(op.outputs)}"
            )
        if args.tensors:
            for t in sg.tensors:
                kind = "const" if t.is_constant else "var" if t.is_variable else ""
                q = " quant" if t.quantization is not None else ""
                print(f"  t{t.index:<4d} {t.name} {list(t.shape)} {t.dtype.name} {kind}{q}")
    for s in model.signatures:
        print(
            f"signature '{s.key}': subgraph {s.subgraph_index}, inputs {list(s.inputs)}, "
            f"outputs {list(s.outputs)}"
        )
    folded, n = fold_constants(model)
    summary = partition(folded.main, SupportOptions(enable_quant=not args.no_quant))
    print(
        f"GPU delegate: {n} static ops folded; {summary.delegated_nodes} of "
        f"{summary.total_nodes} nodes delegated in {len(summary.partitions)} partition(s)"
    )
    for line in summary.messages():
        print(f"  {line}")
    return 0
