"""Which ops the GPU delegate takes: TFLite's GPU support rules.

`supports(op, subgraph, options)` answers (ok, why) the way the real delegate does, and
the reasons reach the user, the database and the dashboard. The rules common to every op
(versions, tensor types and ranks, fused activations, declared output shapes) are here;
each op's own conditions and output shapes are in its record (`gpu/opencl/records/`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..graph import Operator, Subgraph
from .opencl.codes import Act
from .opencl.records import REGISTRY, GpuOp, OpRule, record_for

__all__ = ["NOT_SUPPORTED", "RULES", "TYPE_SHAPE", "OpRule", "SupportOptions", "supports"]

#: Fused activations the delegate can fuse (every TFLite activation but SIGN_BIT).
FUSABLE_ACTIVATIONS = {int(a) for a in Act}

NOT_SUPPORTED = "Operation is not supported."
TYPE_SHAPE = "OP is supported, but tensor type/shape isn't compatible."

#: Versions per op, as the records declare them (the GPU list of REFERENCE.md with the
#: newer delegate's versions and ops).
RULES: dict[str, OpRule] = {name: record.rule for name, record in REGISTRY.items()}


@dataclass(frozen=True)
class SupportOptions:
    """The delegate options that change what it takes."""

    enable_quant: bool = True


def _runtime(sg: Subgraph, t: int) -> bool:
    return t >= 0 and not sg.tensors[t].is_constant


def _type_shape_ok(record: GpuOp, op: Operator, sg: Subgraph, opts: SupportOptions) -> bool:
    for t in (*op.inputs, *op.outputs):
        if t < 0:
            continue
        tensor = sg.tensors[t]
        if len(tensor.shape) > 4:
            return False
        if not _runtime(sg, t):
            continue
        if tensor.dtype in (np.float32, np.float16):
            continue
        if opts.enable_quant and tensor.dtype in (np.int8, np.uint8):
            q = tensor.quantization
            if q is None or q.per_channel:
                return False  # per-channel quantized runtime tensors are not delegated
            continue
        if record.bool_tensors and tensor.dtype == np.bool_:
            continue
        if record.int32_tensors and tensor.dtype == np.int32:
            continue
        return False
    return True


def _is_quantized_op(op: Operator, sg: Subgraph) -> bool:
    return any(
        t >= 0 and sg.tensors[t].dtype in (np.int8, np.uint8) and _runtime(sg, t)
        for t in (*op.inputs, *op.outputs)
    )


def supports(
    op: Operator, sg: Subgraph, opts: SupportOptions = SupportOptions()
) -> tuple[bool, str]:
    """Whether the GPU delegate takes `op`, and if not, why (TFLite's wording)."""
    record = record_for(op.op)
    if record is None:
        return False, NOT_SUPPORTED
    rule = record.rule
    quantized = _is_quantized_op(op, sg)
    if quantized and not opts.enable_quant:
        return False, TYPE_SHAPE
    versions = rule.quant_versions if opts.enable_quant else rule.float_versions
    if op.version not in versions and op.version not in rule.float_versions:
        known = versions or rule.float_versions
        if not known:  # e.g. QUANTIZE with quantization disabled
            return False, TYPE_SHAPE
        return (
            False,
            f"Max version supported: {max(known)}. Requested version {op.version}.",
        )
    if not _type_shape_ok(record, op, sg, opts):
        return False, TYPE_SHAPE
    if op.options.get("fused_activation_function", 0) not in FUSABLE_ACTIVATIONS:
        return False, "Unsupported fused activation: SIGN_BIT."
    try:
        ok, why = record.check(op, sg)
    except (ValueError, IndexError, KeyError, ZeroDivisionError) as exc:
        # a shape no record was written for (a 0-D tensor where a 4-D one belongs): the
        # CPU reference names the problem when it runs the node
        return False, f"Its tensors' shapes cannot be checked ({type(exc).__name__})."
    if not ok:
        return ok, why
    return _declared_shapes_ok(record, op, sg)


def _declared_shapes_ok(record: GpuOp, op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """The delegate sizes buffers and launches from the declared output shapes, so it takes
    an op only where they are those the op computes (LiteRT's Prepare replaces them); the
    CPU reference, which computes its own, runs the rest."""
    try:
        computed = record.shapes(op, sg)
    except (ModelError, ValueError, IndexError, ZeroDivisionError) as exc:
        # a malformed node: the CPU reference names the problem when it runs it
        return False, f"Output shape cannot be computed: {exc}"
    if len(computed) != len(op.outputs):
        return False, f"Expected {len(computed)} outputs, but node has {len(op.outputs)}."
    for t, shape in zip(op.outputs, computed, strict=True):
        declared = tuple(sg.tensors[t].shape)
        if declared != tuple(shape):
            return False, (
                f"Declared output shape {list(declared)} is not the computed {list(shape)}."
            )
        if 0 in declared:
            return False, f"Output shape {list(declared)} is empty."
    return True, ""
