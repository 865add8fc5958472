"""BATCH_MATMUL (`batch_matmul4d` in matmul.cl, or the tiled GEMM where the right operand
is a constant matrix) and ADD_N (a chain of `binary4d` ADDs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..codes import Binary
from ..launch import Buf, contiguous_strides, i4, shape4
from .gemm_kernel import GEMM
from .geometry import Shape, broadcast, shape_of
from .lacks import MEASURED_GENERIC, NO_EPILOGUE, NOT_PER_ELEMENT, NOT_SPECIALIZED
from .record import GpuOp, OpRule, register, versions

if TYPE_CHECKING:
    from ..lowering_api import Lowering

# -- BATCH_MATMUL ---------------------------------------------------------------------------


def check_batch_matmul(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT's condition, two inputs and one output. Both may be runtime tensors (one
    tensor read twice, x @ x^T, included: LiteRT's graph builder fails on it), or either
    constant, of any rank up to 4-D; adj_x and adj_y honoured (LiteRT's parser ignores
    them), batch axes broadcast as TFLite's kernel broadcasts them."""
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        return False, (
            f"Expected 2 inputs and 1 output, got: {len(op.inputs)} inputs and "
            f"{len(op.outputs)} outputs"
        )
    return True, ""


def batch_matmul_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    """[broadcast batch..., M, N] as TFLite's Prepare computes it."""
    x, y = shape_of(sg, op.inputs[0]), shape_of(sg, op.inputs[1])
    if len(x) < 2 or len(y) < 2:
        raise ModelError(f"operands {list(x)} and {list(y)} must have rank 2 or more")
    m, kx = (x[-1], x[-2]) if op.options.get("adj_x", False) else (x[-2], x[-1])
    ky, n = (y[-1], y[-2]) if op.options.get("adj_y", False) else (y[-2], y[-1])
    if kx != ky:
        raise ModelError(f"cannot multiply {list(x)} by {list(y)}")
    (batch,) = broadcast([x[:-2], y[:-2]])
    return [(*batch, m, n)]


def matrix_strides(shape: Shape, out4: Shape, adjoint: bool) -> np.ndarray:
    """The int4 strides reading an operand of `shape` as [b0, b1, rows, cols] of the
    product (x: rows m, cols k; y: rows k, cols n): 0 on a batch axis it broadcasts
    along, the matrix strides swapped where it is given as its adjoint."""
    s4 = shape4(shape)
    cs = contiguous_strides(s4)
    batch = [0 if s4[d] == 1 and out4[d] != 1 else cs[d] for d in (0, 1)]
    return i4([*batch, *((cs[3], cs[2]) if adjoint else (cs[2], cs[3]))])


def gemm_ready(lo: Lowering, op: Operator) -> bool:
    """Whether the product is one [rows, K] x [K, N] GEMM: x a runtime tensor read as
    stored (not its adjoint), y a constant matrix (every batch axis 1)."""
    x, y = lo.t(op.inputs[0]), lo.t(op.inputs[1])
    return (
        not x.is_constant
        and y.is_constant
        and not op.options.get("adj_x", False)
        and int(np.prod(y.shape[:-2], dtype=np.int64)) == 1
    )


def lower_batch_matmul(lo: Lowering, op: Operator) -> None:
    x, y, out = op.inputs[0], op.inputs[1], op.outputs[0]
    adj_x, adj_y = bool(op.options.get("adj_x", False)), bool(op.options.get("adj_y", False))
    x_shape = lo.t(x).shape
    k = int(x_shape[-2] if adj_x else x_shape[-1])
    if gemm_ready(lo, op):
        w = lo.const_float(y)
        n = int(w.shape[-2] if adj_y else w.shape[-1])
        # the GEMM reads B as [K, N]: y's adjoint transposed once (FULLY_CONNECTED's key)
        b = lo.add_const(*((f"t{y}:kn", w.reshape(n, k).T) if adj_y else (f"t{y}", w)))
        m = lo.t(x).size // k
        lo.gemm(op, (Buf(x), b, lo.bias(op, 2, n), Buf(out)), (m, n, k), 0)
        return
    out4 = shape4(lo.t(out).shape)
    args = [
        lo.operand(x),
        lo.operand(y),
        Buf(out),
        i4(out4),
        matrix_strides(x_shape, out4, adj_x),
        matrix_strides(lo.t(y).shape, out4, adj_y),
        np.int32(k),
    ]
    lo.emit_1d(op, "batch_matmul4d", args, int(np.prod(out4)))


# -- ADD_N ----------------------------------------------------------------------------------


def check_add_n(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """Two inputs or more (LiteRT takes two alone, as ADD: "ADD_N only supports 2
    inputs."), all of the output's shape as TFLite's kernel requires; one tensor may be
    read more than once."""
    if len(op.inputs) < 2 or len(op.outputs) != 1:
        return False, f"Expected 2 inputs or more and 1 output, got {len(op.inputs)} inputs."
    shape = shape_of(sg, op.outputs[0])
    if any(shape_of(sg, t) != shape for t in op.inputs):
        shapes = [list(shape_of(sg, t)) for t in op.inputs]
        return False, f"ADD_N's inputs must have one shape, got {shapes}."
    return True, ""


def lower_add_n(lo: Lowering, op: Operator) -> None:
    """out = x0 + x1, then out += x2, ... (binary4d in place: each item reads then writes
    its own element)."""
    out = Buf(op.outputs[0])
    out4 = shape4(lo.t(op.outputs[0]).shape)
    strides = i4(contiguous_strides(out4))
    oview = np.array([out4[3], 0], np.int32)  # the output's own buffer, whole
    n = int(np.prod(out4))
    acc = lo.operand(op.inputs[0])
    for t in op.inputs[1:]:
        shape_args = [i4(out4), strides, strides, np.int32(Binary.ADD), oview]
        lo.emit_1d(op, "binary4d", [acc, lo.operand(t), out, *shape_args, *lo.epilogue(0)], n)
        acc = out


# BATCH_MATMUL: LiteRT's parser checks no version. v2 (int8) runs as the float view, v4
# (float x, int8 constant y) with y dequantized; v3 (int16) the common type rule refuses.
# ADD_N (TFLite has v1 alone) takes LiteRT's ADD versions (its parser is ADD's).
register(
    GpuOp(
        "BATCH_MATMUL",
        OpRule(versions(1), versions(4)),
        lower_batch_matmul,
        ("matmul.cl", "depthwise_at.cl", GEMM),
        check_batch_matmul,
        batch_matmul_shapes,
        launches=("batch_matmul4d", "gemm*"),
        family="convolution",
        lacks={
            "specialized": f"batch_matmul4d (a runtime right operand) {MEASURED_GENERIC}",
            "persistent": NOT_SPECIALIZED,
            "epilogue": f"batch_matmul4d {NO_EPILOGUE}; its GEMM (a constant right operand) "
            "could take one",
            "step": NOT_PER_ELEMENT,
        },
        on_demand=("matmul.cl",),  # the depthwise and GEMM sources every program holds
    ),
    GpuOp(
        "ADD_N",
        OpRule(versions(2)),
        lower_add_n,
        ("elementwise.cl",),
        check_add_n,
        launches=("binary4d",),
        family="elementwise",
        lacks={
            "epilogue": "its binary4d launches run no epilogue (GpuOp.epilogue off): not done",
            "step": "a step reads one operand; ADD_N reads two or more",
        },
    ),
)
