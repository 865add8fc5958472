"""Recurrent cells other than LSTM: RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, SVDF.

A basic RNN cell computes h' = act(W_x x [+ W_aux aux] + W_h h + b); its state h is a
variable tensor the kernel updates. Float cells run in float32. Hybrid cells (int8
weights, versions 2-3) quantize each row of their float operands to int8 on the fly
(symmetric, or asymmetric with `asymmetric_quantize_inputs`), multiply in integers and
scale back, as TFLite's kernel_utils::RnnBatchStep; an all-zero operand adds nothing.

SVDF keeps a memory of the last `memory_size` feature activations per filter (its state):
each step shifts the memory, writes W_feature x into its newest slot, weighs it with
W_time and sums each unit's `rank` filters. The fully int8 form follows TFLite's
EvalIntegerSVDF (int16 state and time weights, int32 bias).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from .alloc import check_alloc
from .common import (
    ACT_RELU,
    apply_activation,
    multiply_by_quantized_multiplier,
    quant_params,
    quantize_multiplier,
    quantize_rows_asymmetric,
    quantize_rows_symmetric,
)
from .registry import OpContext, register

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# -- hybrid arithmetic -------------------------------------------------------------------


def hybrid_matmul(
    x: np.ndarray, w: np.ndarray, w_scale: float, asymmetric: bool
) -> np.ndarray | None:
    """x [batch, n] float32 times int8 w [units, n]: each row of x quantized to int8,
    integer dot products, scaled back to float32 (TFLite's hybrid
    MatrixBatchVectorMultiplyAccumulate); None when x is all zeros (TFLite skips it)."""
    if not x.any():
        return None
    quantize = quantize_rows_asymmetric if asymmetric else quantize_rows_symmetric
    q, scale, zp = quantize(x.reshape(len(x), -1).astype(np.float32, copy=False))
    scale = (scale * np.float32(w_scale)).astype(np.float32)
    wf = w.astype(np.float64)
    dot = q @ wf.T  # exact: integers well below 2**53
    if asymmetric:
        dot = dot - zp[:, None] * wf.sum(axis=1)[None, :]
    return dot.astype(np.float32) * scale[:, None]


def weight_scale(ctx: OpContext, position: int) -> float:
    """The (first) scale of an int8 weight input, as TFLite's hybrid kernels read it."""
    return float(quant_params(ctx.in_tensors[position], f"input {position}").scale[0])


# -- the basic RNN cell ----------------------------------------------------------------------


@dataclass
class RnnCell:
    """A basic RNN cell's weights: float32, or int8 with per-tensor scales (hybrid)."""

    w_x: np.ndarray
    w_h: np.ndarray
    bias: np.ndarray
    activation: int
    w_aux: np.ndarray | None = None
    hybrid: bool = False
    asymmetric: bool = False
    scales: tuple[float, float, float] = (1.0, 1.0, 1.0)  #: input, recurrent, aux weights

    @property
    def units(self) -> int:
        return self.w_x.shape[0]


def read_rnn_cell(
    ctx: OpContext, w_x: int, w_h: int, bias: int, w_aux: int | None = None
) -> RnnCell:
    """The cell whose input, recurrent, bias (and aux) weights are those inputs of the op."""
    what = ctx.op.describe()
    wx, wh, b = ctx.input(w_x), ctx.input(w_h), ctx.input(bias)
    waux = ctx.input(w_aux) if w_aux is not None else None
    if wx is None or wh is None or b is None:
        raise ModelError(f"{what}: the input weights, recurrent weights and bias are required")
    if wx.ndim != 2 or wh.ndim != 2 or b.ndim != 1:
        raise ModelError(f"{what}: weights must have rank 2 and the bias rank 1")
    units = wx.shape[0]
    if wh.shape != (units, units) or b.shape[0] != units:
        raise ModelError(
            f"{what}: weights {list(wx.shape)}, recurrent weights {list(wh.shape)} and bias "
            f"{list(b.shape)} disagree on the number of units"
        )
    if waux is not None and (waux.ndim != 2 or waux.shape[0] != units):
        raise ModelError(f"{what}: aux weights {list(waux.shape)} must be [{units}, aux size]")
    if wx.dtype != wh.dtype or (waux is not None and waux.dtype != wx.dtype):
        raise ModelError(f"{what}: the weights must share one type, got {wx.dtype}, {wh.dtype}")
    if b.dtype != np.float32:
        raise ModelError(f"{what}: the bias must be float32, got {b.dtype.name}")
    if wx.dtype not in (np.float32, np.int8):
        raise ModelError(f"{what}: weights of type {wx.dtype.name} are not supported")
    hybrid = wx.dtype == np.int8
    scales = (1.0, 1.0, 1.0)
    if hybrid:
        scales = (
            weight_scale(ctx, w_x),
            weight_scale(ctx, w_h),
            weight_scale(ctx, w_aux) if waux is not None and w_aux is not None else 0.0,
        )
    return RnnCell(
        w_x=wx,
        w_h=wh,
        bias=b,
        activation=int(ctx.opt("fused_activation_function", 0)),
        w_aux=waux,
        hybrid=hybrid,
        asymmetric=bool(ctx.opt("asymmetric_quantize_inputs", False)),
        scales=scales,
    )


def rnn_step(
    cell: RnnCell, x: np.ndarray, h: np.ndarray, aux: np.ndarray | None = None
) -> np.ndarray:
    """One step on a batch: act(bias + W_x x [+ W_aux aux] + W_h h), float32."""
    out = np.broadcast_to(cell.bias, (len(x), cell.units)).astype(np.float32)
    parts = [(x, cell.w_x, cell.scales[0]), (h, cell.w_h, cell.scales[1])]
    if aux is not None and cell.w_aux is not None:
        parts.insert(1, (aux, cell.w_aux, cell.scales[2]))
    for v, w, scale in parts:
        if cell.hybrid:
            term = hybrid_matmul(v, w, scale, cell.asymmetric)
            if term is not None:
                out = out + term
        else:
            out = out + v @ w.T
    return apply_activation(out.astype(np.float32, copy=False), cell.activation)


def _float_input(ctx: OpContext, i: int, rank: int) -> np.ndarray:
    x = ctx.input(i)
    if x is None or x.dtype != np.float32 or x.ndim != rank:
        got = "absent" if x is None else f"{x.dtype.name} of rank {x.ndim}"
        raise ModelError(f"{ctx.op.describe()}: input {i} must be float32 of rank {rank}, {got}")
    return x


def _state(ctx: OpContext, i: int, batch: int, width: int) -> np.ndarray:
    h = ctx.input(i)
    if h is None or h.ndim != 2 or h.shape != (batch, width):
        got = "absent" if h is None else list(h.shape)
        raise ModelError(
            f"{ctx.op.describe()}: state input {i} must have shape [{batch}, {width}], got {got}"
        )
    if h.dtype != np.float32:
        raise ModelError(f"{ctx.op.describe()}: state input {i} must be float32")
    return h


def _check_inputs(ctx: OpContext, count: int) -> None:
    if len(ctx.inputs) != count:
        raise ModelError(f"{ctx.op.describe()}: takes {count} inputs, got {len(ctx.inputs)}")


def _check_input_size(ctx: OpContext, x: np.ndarray, cell: RnnCell, what: str = "input") -> None:
    if x.shape[-1] != cell.w_x.shape[1]:
        raise ModelError(
            f"{ctx.op.describe()}: {what} size {x.shape[-1]} does not match the weights "
            f"{list(cell.w_x.shape)}"
        )


@register("RNN", versions=(1, 2, 3))
def rnn(ctx: OpContext) -> np.ndarray:
    """One basic RNN step on [batch, input]: h' = act(W_x x + W_h h + b), the new state."""
    _check_inputs(ctx, 5)
    cell = read_rnn_cell(ctx, 1, 2, 3)
    x = _float_input(ctx, 0, 2)
    _check_input_size(ctx, x, cell)
    h = rnn_step(cell, x, _state(ctx, 4, x.shape[0], cell.units))
    ctx.write_variable(4, h)
    return h


def run_sequence(
    cell: RnnCell,
    seq: np.ndarray,
    h: np.ndarray,
    aux: np.ndarray | None = None,
    reverse: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The cell over time-major `seq` [time, batch, n]: (outputs [time, batch, units],
    final state); `reverse` runs from the last step to the first."""
    outs = np.zeros((seq.shape[0], seq.shape[1], cell.units), np.float32)
    steps = range(seq.shape[0] - 1, -1, -1) if reverse else range(seq.shape[0])
    for t in steps:
        h = rnn_step(cell, seq[t], h, None if aux is None else aux[t])
        outs[t] = h
    return outs, h


@register("UNIDIRECTIONAL_SEQUENCE_RNN", versions=(1, 2, 3))
def unidirectional_sequence_rnn(ctx: OpContext) -> np.ndarray:
    """A basic RNN over a sequence [batch, time, input] ([time, batch, input] if
    time_major); the output holds every step's state."""
    _check_inputs(ctx, 5)
    cell = read_rnn_cell(ctx, 1, 2, 3)
    x = _float_input(ctx, 0, 3)
    _check_input_size(ctx, x, cell)
    time_major = bool(ctx.opt("time_major", False))
    seq = x if time_major else x.transpose(1, 0, 2)
    h = _state(ctx, 4, seq.shape[1], cell.units)
    check_alloc((*seq.shape[:2], cell.units), np.float32, f"{ctx.op.describe()}: output")
    outs, h = run_sequence(cell, seq, h)
    ctx.write_variable(4, h)
    return outs if time_major else outs.transpose(1, 0, 2)


# BIDIRECTIONAL_SEQUENCE_RNN input positions.
BIDI_FW = (1, 2, 3)  #: forward input weights, recurrent weights, bias
BIDI_FW_STATE = 4
BIDI_BW = (5, 6, 7)
BIDI_BW_STATE = 8
BIDI_AUX_INPUT, BIDI_FW_AUX_W, BIDI_BW_AUX_W = 9, 10, 11


@register("BIDIRECTIONAL_SEQUENCE_RNN", versions=(1, 2, 3))
def bidirectional_sequence_rnn(ctx: OpContext) -> list[np.ndarray]:
    """A forward RNN over the sequence and a backward one from its end; outputs the two
    output sequences, or one with both concatenated on the last axis (merge_outputs).

    An aux input with aux weights (stacking with cross links) adds W_aux aux to both
    cells; an aux input without weights feeds the backward cell (stacking without)."""
    what = ctx.op.describe()
    _check_inputs(ctx, 12)
    merge = bool(ctx.opt("merge_outputs", False))
    if len(ctx.op.outputs) != (1 if merge else 2):
        raise ModelError(f"{what}: needs {1 if merge else 2} outputs (merge_outputs={merge})")
    fw = read_rnn_cell(ctx, *BIDI_FW, w_aux=BIDI_FW_AUX_W)
    bw = read_rnn_cell(ctx, *BIDI_BW, w_aux=BIDI_BW_AUX_W)
    if (fw.w_aux is None) != (bw.w_aux is None):
        raise ModelError(f"{what}: give both aux weights or neither")
    if fw.hybrid != bw.hybrid:
        raise ModelError(f"{what}: forward and backward weights must share one type")
    x = _float_input(ctx, 0, 3)
    _check_input_size(ctx, x, fw)
    _check_input_size(ctx, x, bw)
    time_major = bool(ctx.opt("time_major", False))
    seq = x if time_major else x.transpose(1, 0, 2)
    batch = seq.shape[1]
    aux = ctx.input(BIDI_AUX_INPUT)
    bw_seq, cross = seq, None
    if aux is not None and fw.w_aux is not None:
        # Stacking with cross links: both cells add W_aux aux.
        _check_aux(ctx, aux, x, fw, bw)
        cross = aux if time_major else aux.transpose(1, 0, 2)
        # NOTE: TFLite's time-major kernels (and its hybrid batch-major one) step through
        # the aux input with the input's row size: with an aux size other than the input
        # size they read the wrong rows. We read the aux input's own rows.
    elif aux is not None and time_major:
        # Stacking without cross links: the aux input is the backward cell's input.
        _check_aux(ctx, aux, x, bw)
        bw_seq = aux
    # NOTE: without aux weights TFLite's batch-major kernels read the backward cell's input
    # from `input` and ignore the aux input; we do as they do.
    h_fw = _state(ctx, BIDI_FW_STATE, batch, fw.units)
    h_bw = _state(ctx, BIDI_BW_STATE, batch, bw.units)
    check_alloc((*seq.shape[:2], fw.units + bw.units), np.float32, f"{what}: output")
    # NOTE: TFLite's hybrid time-major kernel runs both passes once per time step (an outer
    # loop over time around them): the states advance `time` passes, the outputs are the
    # last pass's. We do as it does.
    passes = max(seq.shape[0], 1) if fw.hybrid and time_major else 1
    for _ in range(passes):
        out_fw, h_fw = run_sequence(fw, seq, h_fw, cross)
        out_bw, h_bw = run_sequence(bw, bw_seq, h_bw, cross, reverse=True)
    ctx.write_variable(BIDI_FW_STATE, h_fw)
    ctx.write_variable(BIDI_BW_STATE, h_bw)
    outs = [np.concatenate([out_fw, out_bw], axis=-1)] if merge else [out_fw, out_bw]
    return outs if time_major else [o.transpose(1, 0, 2) for o in outs]


def _check_aux(ctx: OpContext, aux: np.ndarray, x: np.ndarray, *cells: RnnCell) -> None:
    """The aux input: float32, the input's time and batch, each cell's aux (or input) size."""
    if aux.dtype != np.float32 or aux.ndim != 3 or aux.shape[:2] != x.shape[:2]:
        raise ModelError(
            f"{ctx.op.describe()}: aux input {list(aux.shape)} must be float32 with the "
            f"input's first two dimensions {list(x.shape[:2])}"
        )
    for cell in cells:
        w = cell.w_aux if cell.w_aux is not None else cell.w_x
        if w.shape[1] != aux.shape[2]:
            raise ModelError(
                f"{ctx.op.describe()}: aux input size {aux.shape[2]} does not match the "
                f"weights {list(w.shape)}"
            )


# -- SVDF ------------------------------------------------------------------------------------

SVDF_INPUT, SVDF_W_FEATURE, SVDF_W_TIME, SVDF_BIAS, SVDF_STATE = range(5)


@dataclass(frozen=True)
class SvdfDims:
    batch: int
    filters: int
    memory: int
    rank: int

    @property
    def units(self) -> int:
        return self.filters // self.rank


def _svdf_dims(ctx: OpContext) -> SvdfDims:
    what = ctx.op.describe()
    _check_inputs(ctx, 5)
    x, wf, wt = ctx.input(SVDF_INPUT), ctx.input(SVDF_W_FEATURE), ctx.input(SVDF_W_TIME)
    state, bias = ctx.input(SVDF_STATE), ctx.input(SVDF_BIAS)
    if x is None or wf is None or wt is None or state is None:
        raise ModelError(f"{what}: input, feature weights, time weights and state are required")
    if x.ndim != 2 or wf.ndim != 2 or wt.ndim != 2 or state.ndim != 2:
        raise ModelError(f"{what}: input, weights and state must have rank 2")
    rank = int(ctx.opt("rank", 0))
    filters = wf.shape[0]
    if rank <= 0 or filters % rank:
        raise ModelError(f"{what}: rank {rank} must be positive and divide {filters} filters")
    dims = SvdfDims(x.shape[0], filters, wt.shape[1], rank)
    if x.shape[1] != wf.shape[1] or wt.shape[0] != filters:
        raise ModelError(
            f"{what}: input {list(x.shape)}, feature weights {list(wf.shape)} and time "
            f"weights {list(wt.shape)} disagree"
        )
    if bias is not None and bias.shape != (dims.units,):
        raise ModelError(f"{what}: bias {list(bias.shape)} must be [{dims.units}]")
    if state.shape != (dims.batch, dims.memory * filters):
        raise ModelError(
            f"{what}: state {list(state.shape)} must be [{dims.batch}, "
            f"{dims.memory * filters}] (batch, memory size x filters)"
        )
    return dims


def _shifted(state: np.ndarray, d: SvdfDims) -> np.ndarray:
    """The memory [batch, filters, memory] moved one slot older (the newest slot is then
    overwritten)."""
    mem = state.reshape(d.batch, d.filters, d.memory)
    out = np.empty_like(mem)
    out[..., :-1] = mem[..., 1:]
    return out


def _wrap_int32(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32 as TFLite's int32 accumulators overflow."""
    return ((x.astype(np.int64) - INT32_MIN) % 2**32 + INT32_MIN).astype(np.int64)


def _svdf_float_tail(
    mem: np.ndarray, w_time: np.ndarray, bias: np.ndarray | None, d: SvdfDims, act: int
) -> np.ndarray:
    """Time weights, the sum of each unit's filters, bias, activation (float32)."""
    scratch = np.einsum("bfm,fm->bf", mem, w_time).astype(np.float32)
    out = scratch.reshape(d.batch, d.units, d.rank).sum(axis=-1, dtype=np.float32)
    if bias is not None:
        out = out + bias
    return apply_activation(out.astype(np.float32, copy=False), act)


@register("SVDF", versions=(1, 2, 3, 4))
def svdf(ctx: OpContext) -> np.ndarray:
    """Singular value decomposition filter: float (v1), hybrid int8 weights (v2, v4 with
    asymmetric inputs) or fully int8 (v3); the memory state is a variable tensor."""
    d = _svdf_dims(ctx)
    x, wf = ctx.input(SVDF_INPUT), ctx.input(SVDF_W_FEATURE)
    if x.dtype == np.int8:
        return _svdf_integer(ctx, d)
    what = ctx.op.describe()
    wt, bias = ctx.input(SVDF_W_TIME), ctx.input(SVDF_BIAS)
    state = ctx.input(SVDF_STATE)
    if x.dtype != np.float32 or state.dtype != np.float32:
        raise ModelError(f"{what}: input and state must be float32 (or int8/int16)")
    if bias is not None and bias.dtype != np.float32:
        raise ModelError(f"{what}: the bias of a float SVDF must be float32")
    act = int(ctx.opt("fused_activation_function", 0))
    mem = _shifted(state, d)
    if wf.dtype == np.float32 and wt.dtype == np.float32:
        mem[..., -1] = x @ wf.T
        w_time = wt
    elif wf.dtype == np.int8 and wt.dtype == np.int8:
        asymmetric = bool(ctx.opt("asymmetric_quantize_inputs", False))
        feat = hybrid_matmul(x, wf, weight_scale(ctx, SVDF_W_FEATURE), asymmetric)
        mem[..., -1] = 0.0 if feat is None else feat
        w_time = (wt.astype(np.float32) * np.float32(weight_scale(ctx, SVDF_W_TIME))).astype(
            np.float32
        )
    else:
        raise ModelError(
            f"{what}: weights {wf.dtype.name}/{wt.dtype.name} are not supported (float32, "
            "or int8 for a hybrid SVDF)"
        )
    ctx.write_variable(SVDF_STATE, mem.reshape(state.shape))
    return _svdf_float_tail(mem, w_time, bias, d, act)


def _scale(ctx: OpContext, i: int | None, what: str) -> tuple[float, int]:
    t = ctx.in_tensors[i] if i is not None else ctx.out_tensors[0]
    q = quant_params(t, what)
    return float(q.scale[0]), int(q.zero_point[0])


def _svdf_integer(ctx: OpContext, d: SvdfDims) -> np.ndarray:
    """The fully int8 SVDF (TFLite's EvalIntegerSVDF): int8 input and output, int8 feature
    weights, int16 time weights and state, int32 bias."""
    what = ctx.op.describe()
    x, wf, wt = ctx.input(SVDF_INPUT), ctx.input(SVDF_W_FEATURE), ctx.input(SVDF_W_TIME)
    bias, state = ctx.input(SVDF_BIAS), ctx.input(SVDF_STATE)
    out_t = ctx.out_tensors[0]
    types = (wf.dtype, wt.dtype, state.dtype, out_t.dtype)
    if types != (np.int8, np.int16, np.int16, np.int8) or (
        bias is not None and bias.dtype != np.int32
    ):
        raise ModelError(
            f"{what}: an int8 SVDF needs int8 feature weights, int16 time weights and state, "
            f"an int32 bias and an int8 output; got {[t.name for t in types]}"
        )
    if int(ctx.opt("fused_activation_function", 0)) != ACT_RELU:
        raise ModelError(f"{what}: an int8 SVDF supports only a fused RELU")
    in_s, in_zp = _scale(ctx, SVDF_INPUT, "input")
    wf_s, _ = _scale(ctx, SVDF_W_FEATURE, "feature weights")
    wt_s, _ = _scale(ctx, SVDF_W_TIME, "time weights")
    st_s, _ = _scale(ctx, SVDF_STATE, "state")
    out_s, out_zp = _scale(ctx, None, "output")
    # TFLite forms the effective scales in float32, then quantizes them as doubles.
    f32 = np.float32
    m1, s1 = quantize_multiplier(float(f32(f32(in_s) * f32(wf_s)) / f32(st_s)))
    m2, s2 = quantize_multiplier(float(f32(f32(st_s) * f32(wt_s)) / f32(out_s)))
    mem = _shifted(state, d).astype(np.int64)
    feat = _wrap_int32((x.astype(np.int64) - in_zp) @ wf.astype(np.int64).T)
    feat = multiply_by_quantized_multiplier(feat, m1, s1)
    # NOTE: the state is assumed symmetric (TFLite ignores its zero point).
    mem[..., -1] = np.clip(feat, -(2**15), 2**15 - 1)
    ctx.write_variable(SVDF_STATE, mem.astype(np.int16).reshape(state.shape))
    scratch = _wrap_int32(np.einsum("bfm,fm->bf", mem, wt.astype(np.int64)))
    acc = _wrap_int32(scratch.reshape(d.batch, d.units, d.rank).sum(axis=-1))
    if bias is not None:
        acc = _wrap_int32(acc + bias.astype(np.int64))
    out = multiply_by_quantized_multiplier(acc, m2, s2) + out_zp
    # NOTE: TFLite requires a fused RELU here but applies none: only the int8 clamp.
    return np.clip(out, -128, 127).astype(np.int8)
