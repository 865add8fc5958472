"""LSTM kernels (float): UNIDIRECTIONAL_SEQUENCE_LSTM, the full LSTM and the basic LSTM.

The full kernels take TFLite's 24-input layout (`IN_*` below; -1 marks an absent optional
input): no input-gate tensors means CIFG (input gate = 1 - forget gate), cell-to-gate
weights are peepholes, projection weights map the cell output to the output size, and
layer-norm coefficients normalise each gate. Output and cell state are variable tensors
that the kernel updates. Gate arithmetic follows TFLite's lstm_eval (LstmStepFloat).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from .common import apply_activation
from .registry import OpContext, register

# Input positions of the full LSTM layout.
IN_INPUT = 0
IN_X_WEIGHTS = (1, 2, 3, 4)  #: input-to-{input, forget, cell, output} weights [cell, input]
IN_H_WEIGHTS = (5, 6, 7, 8)  #: recurrent-to-gate weights [cell, output] (or [cell]: diagonal)
IN_PEEPHOLES = (9, 10, 11)  #: cell-to-{input, forget, output} weights [cell]
IN_BIASES = (12, 13, 14, 15)  #: gate biases [cell]
IN_PROJ_WEIGHTS, IN_PROJ_BIAS = 16, 17  #: [output, cell], [output]
IN_OUTPUT_STATE, IN_CELL_STATE = 18, 19  #: variables [batch, output], [batch, cell]
IN_LAYER_NORM = (20, 21, 22, 23)  #: per-gate layer-norm coefficients [cell]

#: TFLite's MeanStddevNormalization epsilon.
LAYER_NORM_EPSILON = 1e-8
#: LSTMKernelType codes.
KERNEL_FULL, KERNEL_BASIC = 0, 1
GATES = ("input", "forget", "cell", "output")


@dataclass
class Gate:
    """Weights of one gate; any may be None (absent)."""

    w_x: np.ndarray | None
    w_h: np.ndarray | None
    peephole: np.ndarray | None
    bias: np.ndarray | None
    layer_norm: np.ndarray | None


@dataclass
class LstmCell:
    """A full LSTM cell: its gates, projection, clipping and activation."""

    gates: dict[str, Gate]
    proj_w: np.ndarray | None
    proj_b: np.ndarray | None
    activation: int
    cell_clip: float
    proj_clip: float

    @property
    def cifg(self) -> bool:
        return self.gates["input"].w_x is None


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32, copy=False)


def _layer_norm(x: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = np.square(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(LAYER_NORM_EPSILON))


def _float(ctx: OpContext, i: int) -> np.ndarray | None:
    """Optional input `i` as float32; integer weights mean a hybrid model we do not run."""
    x = ctx.input(i)
    if x is None:
        return None
    if x.dtype.kind != "f":
        raise ModelError(
            f"{ctx.op.describe()}: input {i} is {x.dtype.name}; only float LSTMs are "
            "supported (hybrid and integer-quantized LSTMs are not)"
        )
    return x.astype(np.float32, copy=False)


def read_cell(ctx: OpContext) -> LstmCell:
    """The cell of a full-layout LSTM op, from its inputs and options."""
    gates = {
        name: Gate(
            w_x=_float(ctx, IN_X_WEIGHTS[g]),
            w_h=_float(ctx, IN_H_WEIGHTS[g]),
            peephole=None if name == "cell" else _float(ctx, IN_PEEPHOLES[min(g, 2)]),
            bias=_float(ctx, IN_BIASES[g]),
            layer_norm=_float(ctx, IN_LAYER_NORM[g]),
        )
        for g, name in enumerate(GATES)
    }
    for name in GATES[1:]:
        if gates[name].w_x is None or gates[name].w_h is None:
            raise ModelError(f"{ctx.op.describe()}: the {name} gate weights are missing")
    return LstmCell(
        gates=gates,
        proj_w=_float(ctx, IN_PROJ_WEIGHTS),
        proj_b=_float(ctx, IN_PROJ_BIAS),
        activation=int(ctx.opt("fused_activation_function", 0)),
        cell_clip=float(ctx.opt("cell_clip", 0.0)),
        proj_clip=float(ctx.opt("proj_clip", 0.0)),
    )


def _gate(g: Gate, x: np.ndarray, h: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """Pre-activation of one gate: W_x x + W_h h (+ peephole c), normalised, plus bias."""
    acc = x @ g.w_x.T
    acc = acc + (h * g.w_h if g.w_h.ndim == 1 else h @ g.w_h.T)
    if g.peephole is not None and c is not None:
        acc = acc + c * g.peephole
    if g.layer_norm is not None:
        acc = _layer_norm(acc) * g.layer_norm
    if g.bias is not None:
        acc = acc + g.bias
    return acc


def _clip(x: np.ndarray, clip: float) -> np.ndarray:
    return np.clip(x, -clip, clip) if clip > 0 else x


def lstm_step(
    cell: LstmCell, x: np.ndarray, h: np.ndarray, c: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One time step on a batch: (new output state, new cell state)."""
    gates = cell.gates
    forget = _sigmoid(_gate(gates["forget"], x, h, c))
    cand = apply_activation(_gate(gates["cell"], x, h, None), cell.activation)
    inp = 1.0 - forget if cell.cifg else _sigmoid(_gate(gates["input"], x, h, c))
    c_new = _clip(forget * c + inp * cand, cell.cell_clip)
    out = _sigmoid(_gate(gates["output"], x, h, c_new))
    hidden = out * apply_activation(c_new, cell.activation)
    if cell.proj_w is None:
        return hidden, c_new
    h_new = hidden @ cell.proj_w.T
    if cell.proj_b is not None:
        h_new = h_new + cell.proj_b
    return _clip(h_new, cell.proj_clip), c_new


def _states(ctx: OpContext) -> tuple[np.ndarray, np.ndarray]:
    h, c = _float(ctx, IN_OUTPUT_STATE), _float(ctx, IN_CELL_STATE)
    if h is None or c is None:
        raise ModelError(f"{ctx.op.describe()}: output and cell state inputs are required")
    return h, c


# NOTE: versions 2-3 of UNIDIRECTIONAL_SEQUENCE_LSTM and 3-4 of LSTM are hybrid (int8
# weights, inputs quantized on the fly): not registered, so such models fail before running.
@register("UNIDIRECTIONAL_SEQUENCE_LSTM", versions=(1, 4))
def unidirectional_sequence_lstm(ctx: OpContext) -> np.ndarray:
    """An LSTM over a sequence [time, batch, input] (time_major) or [batch, time, input];
    version 4 takes diagonal (vector) recurrent weights."""
    cell = read_cell(ctx)
    x = _float(ctx, IN_INPUT)
    if x is None or x.ndim != 3:
        raise ModelError(f"{ctx.op.describe()}: the input must have rank 3")
    time_major = bool(ctx.opt("time_major", False))
    seq = x if time_major else x.transpose(1, 0, 2)
    h, c = _states(ctx)
    h, c = h.reshape(seq.shape[1], -1), c.reshape(seq.shape[1], -1)
    outs = []
    for x_t in seq:
        h, c = lstm_step(cell, x_t, h, c)
        outs.append(h)
    ctx.write_variable(IN_OUTPUT_STATE, h.reshape(ctx.inputs[IN_OUTPUT_STATE].shape))
    ctx.write_variable(IN_CELL_STATE, c.reshape(ctx.inputs[IN_CELL_STATE].shape))
    out = np.stack(outs) if outs else np.zeros((0, seq.shape[1], h.shape[-1]), np.float32)
    return out if time_major else out.transpose(1, 0, 2)


@register("LSTM", versions=(1, 2))
def lstm(ctx: OpContext) -> np.ndarray | list[np.ndarray]:
    """One LSTM step: the full 20/24-input kernel, or the basic 5-input one (kernel_type)."""
    if int(ctx.opt("kernel_type", KERNEL_FULL)) == KERNEL_BASIC:
        return basic_lstm(ctx)
    cell = read_cell(ctx)
    x = _float(ctx, IN_INPUT)
    h, c = _states(ctx)
    h, c = lstm_step(cell, x, h, c)
    ctx.write_variable(IN_OUTPUT_STATE, h)
    ctx.write_variable(IN_CELL_STATE, c)
    return h


def basic_lstm(ctx: OpContext) -> list[np.ndarray]:
    """The basic LSTM cell (TFLite's LstmCell): one fully-connected layer over [x, h] gives
    the gates in the order input, candidate, forget, output; four outputs."""
    if len(ctx.inputs) != 5 or len(ctx.op.outputs) != 4:
        raise ModelError(f"{ctx.op.describe()}: the basic LSTM takes 5 inputs and gives 4 outputs")
    x, h, w, b, c = (_float(ctx, i) for i in range(5))
    concat = np.concatenate([x, h], axis=-1)
    activ = concat @ w.T + b
    i, g, f, o = np.split(activ, 4, axis=-1)
    c_new = _sigmoid(i) * np.tanh(g) + _sigmoid(f) * c
    h_new = _sigmoid(o) * np.tanh(c_new)
    return [h_new, c_new, concat, activ]
