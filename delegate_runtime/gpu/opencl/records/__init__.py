"""The GPU delegate's ops, one record each (support rule, lowering, kernel source and
template instances, the kernels it launches, its family and the fast forms it lacks).

A new op is a new module here that calls `register(GpuOp(...))`, plus its name in
OP_MODULES (docs/architecture.md: "Adding a GPU op, end to end").
"""

from __future__ import annotations

from importlib import import_module

from .record import REGISTRY, GpuOp, OpRule, record_for, register, versions

__all__ = ["REGISTRY", "GpuOp", "OpRule", "record_for", "register", "versions"]

#: The modules holding the records, in registration order.
OP_MODULES = (
    "conv",
    "fully_connected",
    "depthwise",
    "transpose_conv",
    "lstm",
    "pool",
    "mean",
    "softmax",
    "elementwise",
    "select",
    "expand_squeeze",
    "reduce",
    "cumsum",
    "batch_matmul",
    "pad_tile",
    "split_pack",
    "gather",
    "movement",
    "resize",
    "quantize",
    "mediapipe",
)

for _module in OP_MODULES:
    import_module(f"{__name__}.{_module}")
