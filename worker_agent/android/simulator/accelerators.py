"""What the simulated phone's NNAPI, Hexagon and XNNPACK delegates take, and the lines the
official benchmark_model prints for them.

The simulated phone computes every delegate's figures on the CPU path (it has no DSP or
NPU); what differs per delegate is what the real tool shows of it: which nodes the
delegate takes (its partitions), the names it prints, and how it fails when the phone
lacks what the delegate needs. Sources (google-ai-edge/LiteRT):

- Hexagon: `tflite/delegates/hexagon/README.md` "Supported Ops" and
  `hexagon/utils.cc` (IsNodeSupportedByHexagon: 8-bit quantized tensors only, rank <= 4);
  kernel name `TfLiteHexagonDelegate` (hexagon_delegate.cc); a delegate that cannot be
  created is only warned about (hexagon_delegate_provider.cc) and the model runs on the CPU.
- NNAPI: `tflite/delegates/nnapi/nnapi_delegate.cc` (custom_name `TfLiteNnapiDelegate`;
  "Could not find the specified NNAPI accelerator: %s. Must be one of: {%s}.");
  the provider lists "NNAPI accelerators available: [a,b]".
- XNNPACK: kernel name `TfLiteXNNPackDelegate` (xnnpack_delegate.cc).
- benchmark_tflite_model.cc: "Failed to apply <NAME> delegate.", "Explicitly applied ..."
  and "Though <NAME> delegate is explicitly applied, the model graph will not be executed
  by the delegate."
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from delegate_runtime.graph import Model

#: hexagon/README.md "Supported Ops" (their builtin names); 8-bit tensors only.
HEXAGON_OPS = frozenset(
    [
        "ADD",
        "ARG_MAX",
        "ARG_MIN",
        "AVERAGE_POOL_2D",
        "CONCATENATION",
        "CONV_2D",
        "DEPTH_TO_SPACE",
        "DEPTHWISE_CONV_2D",
        "FULLY_CONNECTED",
        "HARD_SWISH",
        "L2_NORMALIZATION",
        "LOGISTIC",
        "MAXIMUM",
        "MAX_POOL_2D",
        "MEAN",
        "MINIMUM",
        "MIRROR_PAD",
        "MUL",
        "NEG",
        "PACK",
        "PAD",
        "QUANTIZE",
        "RELU",
        "RELU6",
        "RESHAPE",
        "RESIZE_BILINEAR",
        "RESIZE_NEAREST_NEIGHBOR",
        "RSQRT",
        "SLICE",
        "SOFTMAX",
        "SPACE_TO_DEPTH",
        "SPLIT",
        "SQUARED_DIFFERENCE",
        "STRIDED_SLICE",
        "SUB",
        "TANH",
        "TRANSPOSE",
        "TRANSPOSE_CONV",
    ]
)
#: nnapi_delegate.cc's Validate cases (abridged to the common vision ops; the simulated
#: accelerators all take this set).
NNAPI_OPS = frozenset(
    [
        "ADD",
        "AVERAGE_POOL_2D",
        "CONCATENATION",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "DEQUANTIZE",
        "FULLY_CONNECTED",
        "HARD_SWISH",
        "L2_NORMALIZATION",
        "LOGISTIC",
        "MAXIMUM",
        "MAX_POOL_2D",
        "MEAN",
        "MINIMUM",
        "MUL",
        "PAD",
        "PRELU",
        "QUANTIZE",
        "RELU",
        "RELU6",
        "RESHAPE",
        "RESIZE_BILINEAR",
        "RESIZE_NEAREST_NEIGHBOR",
        "SOFTMAX",
        "SPACE_TO_DEPTH",
        "STRIDED_SLICE",
        "SUB",
        "TANH",
        "TRANSPOSE",
        "TRANSPOSE_CONV",
    ]
)
#: xnnpack_delegate.cc's VisitNode cases (abridged).
XNNPACK_OPS = frozenset(
    [
        "ADD",
        "AVERAGE_POOL_2D",
        "CONCATENATION",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "DEQUANTIZE",
        "FULLY_CONNECTED",
        "HARD_SWISH",
        "LOGISTIC",
        "MAXIMUM",
        "MAX_POOL_2D",
        "MEAN",
        "MINIMUM",
        "MUL",
        "PAD",
        "PRELU",
        "QUANTIZE",
        "RELU",
        "RELU6",
        "RESHAPE",
        "RESIZE_BILINEAR",
        "SOFTMAX",
        "STRIDED_SLICE",
        "SUB",
        "TANH",
        "TRANSPOSE",
    ]
)


@dataclass(frozen=True)
class Accelerator:
    provider: str  #: the provider's GetName(): NNAPI, Hexagon, XNNPACK
    kernel: str  #: the delegate kernel's registration name
    ops: frozenset[str]
    eight_bit_only: bool = False


ACCELERATORS = {
    "nnapi": Accelerator("NNAPI", "TfLiteNnapiDelegate", NNAPI_OPS),
    "hexagon": Accelerator("Hexagon", "TfLiteHexagonDelegate", HEXAGON_OPS, True),
    "xnnpack": Accelerator("XNNPACK", "TfLiteXNNPackDelegate", XNNPACK_OPS),
}
_EIGHT_BIT = (np.dtype(np.uint8), np.dtype(np.int8))


def _takes(acc: Accelerator, model: Model, op, ops: frozenset[str]) -> bool:
    if op.op not in ops:
        return False
    tensors = [model.main.tensors[t] for t in (*op.inputs, *op.outputs) if t >= 0]
    if any(len(t.shape) > 4 for t in tensors):
        return False
    if acc.eight_bit_only:
        data = [model.main.tensors[op.inputs[0]], *(model.main.tensors[t] for t in op.outputs)]
        return all(np.dtype(t.dtype) in _EIGHT_BIT for t in data)
    return True


def partitions(
    delegate: str, model: Model, max_partitions: int, ops: frozenset[str] | None = None
) -> tuple[list[list[int]], int]:
    """The delegate's partitions (runs of consecutive nodes it takes, the largest
    `max_partitions` kept; <= 0 keeps all) and the node count of the main graph."""
    acc = ACCELERATORS[delegate]
    allowed = acc.ops if ops is None else acc.ops & ops
    runs: list[list[int]] = []
    current: list[int] = []
    for op in model.main.operators:
        if _takes(acc, model, op, allowed):
            current.append(op.index)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    if max_partitions > 0:
        runs = sorted(sorted(runs, key=len, reverse=True)[:max_partitions])
    return runs, len(model.main.operators)


def delegation_lines(delegate: str, parts: list[list[int]], total: int) -> str:
    """What the interpreter and benchmark_model print once the delegate is applied."""
    acc = ACCELERATORS[delegate]
    taken = sum(len(p) for p in parts)
    if not taken:
        return (
            f"INFO: Though {acc.provider} delegate is explicitly applied, the model graph "
            "will not be executed by the delegate.\n"
        )
    lines = (
        f"INFO: Replacing {taken} out of {total} node(s) with delegate ({acc.kernel}) node, "
        f"yielding {len(parts)} partitions for the whole graph.\n"
    )
    if taken == total and len(parts) == 1:
        return lines + (
            f"INFO: Explicitly applied {acc.provider} delegate, and the model graph will be "
            "completely executed by the delegate.\n"
        )
    return lines + (
        f"INFO: Explicitly applied {acc.provider} delegate, and the model graph will be "
        f"partially executed by the delegate w/ {len(parts)} delegate kernels.\n"
    )
