"""LSTM kernels: UNIDIRECTIONAL_SEQUENCE_LSTM and the full LSTM (float and full-integer),
the basic LSTM (float), BIDIRECTIONAL_SEQUENCE_LSTM (float and hybrid).

The full kernels take TFLite's 24-input layout (`IN_*` below; -1 marks an absent optional
input): no input-gate tensors means CIFG (input gate = 1 - forget gate), cell-to-gate
weights are peepholes, projection weights map the cell output to the output size, and
layer-norm coefficients normalise each gate. Output and cell state are variable tensors
that the kernel updates. Gate arithmetic follows TFLite's lstm_eval (LstmStepFloat).
The bidirectional kernel runs two such cells (48 inputs, `BIDI_*` below), optionally with
an aux input; its hybrid form (int8 weights, float activations) quantizes each operand
row to int8 on the fly as LstmStepHybrid does. Full-integer cells (int8 input, int16 cell
state) are read here and run by lstm_integer, TFLite's 8x8->16 kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from .alloc import check_alloc
from .common import apply_activation, quant_params
from .lstm_integer import GateTensors, IntegerCell, Quant, lstm_sequence, prepare_cell
from .registry import OpContext, register
from .rnn import hybrid_matmul

# Input positions of the full LSTM layout.
IN_INPUT = 0
IN_X_WEIGHTS = (1, 2, 3, 4)  #: input-to-{input, forget, cell, output} weights [cell, input]
IN_H_WEIGHTS = (5, 6, 7, 8)  #: recurrent-to-gate weights [cell, output] (or [cell]: diagonal)
IN_PEEPHOLES = (9, 10, 11)  #: cell-to-{input, forget, output} weights [cell]
IN_BIASES = (12, 13, 14, 15)  #: gate biases [cell]
IN_PROJ_WEIGHTS, IN_PROJ_BIAS = 16, 17  #: [output, cell], [output]
IN_OUTPUT_STATE, IN_CELL_STATE = 18, 19  #: variables [batch, output], [batch, cell]
IN_LAYER_NORM = (20, 21, 22, 23)  #: per-gate layer-norm coefficients [cell]


@dataclass(frozen=True)
class CellLayout:
    """Where an op keeps one cell's tensors among its inputs."""

    x_weights: tuple[int, ...]
    h_weights: tuple[int, ...]
    peepholes: tuple[int, ...]
    biases: tuple[int, ...]
    proj_weights: int
    proj_bias: int
    layer_norm: tuple[int, ...] = ()
    aux_weights: tuple[int, ...] = ()  #: aux-input-to-{input, forget, cell, output}


#: The 24-input layout of LSTM and UNIDIRECTIONAL_SEQUENCE_LSTM.
FULL_LAYOUT = CellLayout(
    IN_X_WEIGHTS, IN_H_WEIGHTS, IN_PEEPHOLES, IN_BIASES, IN_PROJ_WEIGHTS, IN_PROJ_BIAS,
    IN_LAYER_NORM,
)  # fmt: skip
#: BIDIRECTIONAL_SEQUENCE_LSTM (bidirectional_sequence_lstm.cc): the forward cell at 1-17,
#: the backward one at 18-34, states at 35-38, the aux input at 39, aux weights at 40-47.
BIDI_FW = CellLayout((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), 16, 17,
                     aux_weights=(40, 41, 42, 43))  # fmt: skip
BIDI_BW = CellLayout((18, 19, 20, 21), (22, 23, 24, 25), (26, 27, 28), (29, 30, 31, 32), 33, 34,
                     aux_weights=(44, 45, 46, 47))  # fmt: skip
BIDI_FW_STATES, BIDI_BW_STATES = (35, 36), (37, 38)  #: (output state, cell state)
BIDI_AUX_INPUT = 39
BIDI_INPUTS = 48

#: TFLite's MeanStddevNormalization epsilon.
LAYER_NORM_EPSILON = 1e-8
#: LSTMKernelType codes.
KERNEL_FULL, KERNEL_BASIC = 0, 1
GATES = ("input", "forget", "cell", "output")


@dataclass
class Gate:
    """Weights of one gate; any may be None (absent). Matrices are float32, or int8 in a
    hybrid cell with their per-tensor scales in `scales` (x, h, aux)."""

    w_x: np.ndarray | None
    w_h: np.ndarray | None
    peephole: np.ndarray | None  #: float32 (dequantized in a hybrid cell)
    bias: np.ndarray | None
    layer_norm: np.ndarray | None
    w_aux: np.ndarray | None = None
    scales: tuple[float, float, float] = (1.0, 1.0, 1.0)


@dataclass
class LstmCell:
    """A full LSTM cell: its gates, projection, clipping and activation."""

    gates: dict[str, Gate]
    proj_w: np.ndarray | None
    proj_b: np.ndarray | None
    activation: int
    cell_clip: float
    proj_clip: float
    hybrid: bool = False
    asymmetric: bool = False  #: hybrid: quantize operands asymmetrically
    proj_scale: float = 1.0

    @property
    def cifg(self) -> bool:
        return self.gates["input"].w_x is None

    @property
    def n_cell(self) -> int:
        return self.gates["output"].w_x.shape[0]

    @property
    def n_output(self) -> int:
        w_h = self.gates["output"].w_h
        return w_h.shape[0] if w_h.ndim == 1 else w_h.shape[1]

    @property
    def has_aux(self) -> bool:
        return self.gates["forget"].w_aux is not None


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
            f"{ctx.op.describe()}: input {i} is {x.dtype.name}; the float LSTM takes float "
            "inputs (hybrid LSTMs, float activations with int8 weights, are not supported)"
        )
    return x.astype(np.float32, copy=False)


def _weight(ctx: OpContext, i: int, hybrid: bool) -> tuple[np.ndarray | None, float]:
    """Optional weight input `i` and its scale: float32, or int8 in a hybrid cell."""
    if not hybrid:
        return _float(ctx, i), 1.0
    w = ctx.input(i)
    if w is None:
        return None, 0.0
    if w.dtype != np.int8:
        raise ModelError(
            f"{ctx.op.describe()}: input {i} is {w.dtype.name}; a hybrid LSTM takes int8 weights"
        )
    return w, float(quant_params(ctx.in_tensors[i], f"input {i}").scale[0])


def _dequantized(w: tuple[np.ndarray | None, float]) -> np.ndarray | None:
    arr, scale = w
    return None if arr is None else (arr.astype(np.float32) * np.float32(scale))


def read_cell(
    ctx: OpContext, layout: CellLayout = FULL_LAYOUT, hybrid_ok: bool = False
) -> LstmCell:
    """The cell of a full-layout LSTM op, from its inputs and options; a hybrid one (int8
    weights) where `hybrid_ok` and the input-to-output weights are int8."""
    out_w = ctx.input(layout.x_weights[3])
    hybrid = hybrid_ok and out_w is not None and out_w.dtype == np.int8
    gates = {}
    for g, name in enumerate(GATES):
        w_x, w_h = (
            _weight(ctx, layout.x_weights[g], hybrid),
            _weight(ctx, layout.h_weights[g], hybrid),
        )
        w_aux = _weight(ctx, layout.aux_weights[g], hybrid) if layout.aux_weights else (None, 0.0)
        peephole = None if name == "cell" else _weight(ctx, layout.peepholes[min(g, 2)], hybrid)
        gates[name] = Gate(
            w_x=w_x[0],
            w_h=w_h[0],
            peephole=None if peephole is None else _dequantized(peephole),
            bias=_float(ctx, layout.biases[g]),
            layer_norm=_float(ctx, layout.layer_norm[g]) if layout.layer_norm else None,
            w_aux=w_aux[0],
            scales=(w_x[1], w_h[1], w_aux[1]),
        )
    for name in GATES[1:]:
        if gates[name].w_x is None or gates[name].w_h is None:
            raise ModelError(f"{ctx.op.describe()}: the {name} gate weights are missing")
    proj_w = _weight(ctx, layout.proj_weights, hybrid)
    return LstmCell(
        gates=gates,
        proj_w=proj_w[0],
        proj_b=_float(ctx, layout.proj_bias),
        activation=int(ctx.opt("fused_activation_function", 0)),
        cell_clip=float(ctx.opt("cell_clip", 0.0)),
        proj_clip=float(ctx.opt("proj_clip", 0.0)),
        hybrid=hybrid,
        asymmetric=bool(ctx.opt("asymmetric_quantize_inputs", False)),
        proj_scale=proj_w[1],
    )


def _gate(
    g: Gate, x: np.ndarray, h: np.ndarray, c: np.ndarray | None, aux: np.ndarray | None = None
) -> np.ndarray:
    """Pre-activation of one gate: W_x x (+ W_aux aux) + W_h h (+ peephole c), normalised,
    plus bias."""
    acc = x @ g.w_x.T
    if aux is not None and g.w_aux is not None:
        acc = acc + aux @ g.w_aux.T
    acc = acc + (h * g.w_h if g.w_h.ndim == 1 else h @ g.w_h.T)
    if g.peephole is not None and c is not None:
        acc = acc + c * g.peephole
    if g.layer_norm is not None:
        acc = _layer_norm(acc) * g.layer_norm
    if g.bias is not None:
        acc = acc + g.bias
    return acc


def _gate_hybrid(
    cell: LstmCell,
    g: Gate,
    x: np.ndarray,
    h: np.ndarray,
    c: np.ndarray | None,
    aux: np.ndarray | None = None,
) -> np.ndarray:
    """A hybrid gate in TFLite's order (CalculateLstmGateHybrid): the bias (zero with layer
    norm), then each int8 product of a row-quantized operand, the peephole, the norm."""
    n_batch, n_cell = len(x), g.w_x.shape[0]
    start = g.bias if g.bias is not None and g.layer_norm is None else np.float32(0)
    acc = np.broadcast_to(start, (n_batch, n_cell)).astype(np.float32)
    for v, w, scale in ((x, g.w_x, g.scales[0]), (aux, g.w_aux, g.scales[2])):
        if v is not None and w is not None:
            term = hybrid_matmul(v, w, scale, cell.asymmetric)
            acc = acc if term is None else acc + term
    if g.w_h.ndim == 1:
        raise ModelError("a hybrid LSTM with diagonal recurrent weights is not supported")
    term = hybrid_matmul(h, g.w_h, g.scales[1], cell.asymmetric)
    acc = acc if term is None else acc + term
    if g.peephole is not None and c is not None:
        acc = acc + c * g.peephole
    if g.layer_norm is not None:
        acc = _layer_norm(acc) * g.layer_norm
        if g.bias is not None:
            acc = acc + g.bias
    return acc.astype(np.float32, copy=False)


def _clip(x: np.ndarray, clip: float) -> np.ndarray:
    return np.clip(x, -clip, clip) if clip > 0 else x


def lstm_step(
    cell: LstmCell, x: np.ndarray, h: np.ndarray, c: np.ndarray, aux: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One time step on a batch: (new output state, new cell state)."""
    gates = cell.gates

    def gate(name: str, c_in: np.ndarray | None) -> np.ndarray:
        if cell.hybrid:
            return _gate_hybrid(cell, gates[name], x, h, c_in, aux)
        return _gate(gates[name], x, h, c_in, aux)

    inp = None if cell.cifg else _sigmoid(gate("input", c))
    forget = _sigmoid(gate("forget", c))
    cand = apply_activation(gate("cell", None), cell.activation)
    inp = 1.0 - forget if inp is None else inp
    c_new = _clip(forget * c + inp * cand, cell.cell_clip)
    out = _sigmoid(gate("output", c_new))
    hidden = out * apply_activation(c_new, cell.activation)
    if cell.proj_w is None:
        return hidden, c_new
    if cell.hybrid:
        start = cell.proj_b if cell.proj_b is not None else np.float32(0)
        h_new = np.broadcast_to(start, (len(hidden), cell.proj_w.shape[0])).astype(np.float32)
        term = hybrid_matmul(hidden, cell.proj_w, cell.proj_scale, cell.asymmetric)
        h_new = h_new if term is None else h_new + term
        return _clip(h_new, cell.proj_clip), c_new
    h_new = hidden @ cell.proj_w.T
    if cell.proj_b is not None:
        h_new = h_new + cell.proj_b
    return _clip(h_new, cell.proj_clip), c_new


def run_sequence(
    cell: LstmCell,
    seq: np.ndarray,
    h: np.ndarray,
    c: np.ndarray,
    aux: np.ndarray | None = None,
    reverse: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cell over time-major `seq` [time, batch, input] (from its end if `reverse`):
    (outputs [time, batch, output], final output state, final cell state)."""
    outs = np.zeros((seq.shape[0], seq.shape[1], cell.n_output), np.float32)
    steps = range(seq.shape[0] - 1, -1, -1) if reverse else range(seq.shape[0])
    for t in steps:
        h, c = lstm_step(cell, seq[t], h, c, None if aux is None else aux[t])
        outs[t] = h
    return outs, h, c


def _states(ctx: OpContext) -> tuple[np.ndarray, np.ndarray]:
    h, c = _float(ctx, IN_OUTPUT_STATE), _float(ctx, IN_CELL_STATE)
    if h is None or c is None:
        raise ModelError(f"{ctx.op.describe()}: output and cell state inputs are required")
    return h, c


# -- full-integer cells (int8 activations and weights, int16 cell state: lstm_integer) -------

#: Types of a full-integer LSTM's tensors (CheckInputTensorDimensions with is_integer).
INTEGER_TYPES = {"weights": np.int8, "peephole": np.int16, "bias": np.int32,
                 "layer norm": np.int16}  # fmt: skip
#: Intermediates of TFLite's 8x8->16 integer LSTM (4 gate pre-activations, the hidden state);
#: the 8x8->8 form (12) is not run here.
INTEGER_INTERMEDIATES = 5


def _is_integer(ctx: OpContext) -> bool:
    x = ctx.input(IN_INPUT)
    return x is not None and x.dtype == np.int8


def _quant(ctx: OpContext, i: int) -> Quant:
    """Input `i`'s per-tensor quantization."""
    q = quant_params(ctx.in_tensors[i], f"input {i}")
    return Quant(float(q.scale[0]), int(q.zero_point[0]))


def _typed(ctx: OpContext, i: int, kind: str) -> tuple[np.ndarray | None, Quant | None]:
    """Optional input `i` of a full-integer LSTM, checked against its type, and its
    quantization (None for biases, which TFLite reads without their scale)."""
    x = ctx.input(i)
    if x is None:
        return None, None
    if x.dtype != INTEGER_TYPES[kind]:
        raise ModelError(
            f"{ctx.op.describe()}: input {i} ({kind}) is {x.dtype.name}; a full-integer LSTM "
            f"takes {np.dtype(INTEGER_TYPES[kind]).name}"
        )
    return x, None if kind == "bias" else _quant(ctx, i)


def _intermediate(ctx: OpContext, k: int) -> Quant:
    t = ctx.intermediates[k]
    q = quant_params(t, f"intermediate {k}")
    return Quant(float(q.scale[0]), int(q.zero_point[0]))


def _integer_cell(
    ctx: OpContext, max_cell_scale: int | None = None
) -> tuple[IntegerCell, np.ndarray, np.ndarray]:
    """The prepared cell of a full-integer LSTM op, its int8 output state and int16 cell
    state (as the op holds them)."""
    what = ctx.op.describe()
    if len(ctx.intermediates) != INTEGER_INTERMEDIATES:
        raise ModelError(
            f"{what}: a full-integer LSTM needs {INTEGER_INTERMEDIATES} intermediates (TFLite's "
            f"8x8->16 kernel), got {len(ctx.intermediates)}"
        )
    layout = FULL_LAYOUT
    layer_norm = (
        len(ctx.inputs) > layout.layer_norm[1] and ctx.input(layout.layer_norm[1]) is not None
    )
    gates = {}
    for g, name in enumerate(GATES):
        (w_x, x_q), (w_h, h_q) = (_typed(ctx, layout.x_weights[g], "weights"),
                                  _typed(ctx, layout.h_weights[g], "weights"))  # fmt: skip
        if name != "input" and (w_x is None or w_h is None):
            raise ModelError(f"{what}: the {name} gate weights are missing")
        if w_h is not None and w_h.ndim != 2:
            raise ModelError(f"{what}: a full-integer LSTM takes matrix recurrent weights")
        peep = (
            (None, None) if name == "cell" else _typed(ctx, layout.peepholes[min(g, 2)], "peephole")
        )
        norm = _typed(ctx, layout.layer_norm[g], "layer norm") if layer_norm else (None, None)
        gates[name] = GateTensors(
            w_x=w_x, w_h=w_h, x_quant=x_q, h_quant=h_q,
            bias=_typed(ctx, layout.biases[g], "bias")[0],
            peephole=peep[0], peephole_quant=peep[1],
            layer_norm=norm[0], layer_norm_quant=norm[1],
            intermediate=_intermediate(ctx, g) if layer_norm else None,
        )  # fmt: skip
    proj_w, proj_q = _typed(ctx, layout.proj_weights, "weights")
    proj_b = _typed(ctx, layout.proj_bias, "bias")[0]
    h, c = ctx.input(IN_OUTPUT_STATE), ctx.input(IN_CELL_STATE)
    if h is None or c is None or h.dtype != np.int8 or c.dtype != np.int16:
        raise ModelError(f"{what}: a full-integer LSTM takes an int8 output state and an int16 "
                         "cell state")  # fmt: skip
    proj = None if proj_w is None else (proj_w, proj_q, proj_b)
    _check_integer_shapes(what, gates, proj, ctx.input(IN_INPUT).shape[-1])
    cell = prepare_cell(
        what,
        gates,
        proj,
        input_q=_quant(ctx, IN_INPUT),
        output_state_q=_quant(ctx, IN_OUTPUT_STATE),
        cell_state_q=_quant(ctx, IN_CELL_STATE),
        output_q=Quant(float(quant_params(ctx.out_tensors[0], "output").scale[0])),
        hidden_q=_intermediate(ctx, 4),
        cell_clip=float(ctx.opt("cell_clip", 0.0)),
        proj_clip=float(ctx.opt("proj_clip", 0.0)),
        max_cell_scale=max_cell_scale,
    )
    return cell, h, c


def _check_integer_shapes(
    what: str, gates: dict[str, GateTensors], proj: tuple | None, n_input: int
) -> None:
    """Each tensor of a full-integer cell has its shape (CheckInputTensorDimensions)."""
    n_cell, n_output = gates["output"].w_h.shape
    want = {"input weights": (n_cell, n_input), "recurrent weights": (n_cell, n_output)}
    want |= dict.fromkeys(("bias", "peephole", "layer norm"), (n_cell,))
    for name, g in gates.items():
        arrays = {"input weights": g.w_x, "recurrent weights": g.w_h, "bias": g.bias,
                  "peephole": g.peephole, "layer norm": g.layer_norm}  # fmt: skip
        if name == "input" and (g.w_x is None) != (g.w_h is None or g.bias is None):
            raise ModelError(f"{what}: the input gate's weights and bias must be all or none")
        for key, arr in arrays.items():
            if arr is not None and arr.shape != want[key]:
                raise ModelError(f"{what}: {name} gate {key} {list(arr.shape)} must be "
                                 f"{list(want[key])}")  # fmt: skip
    if proj is not None and (proj[0].shape != (n_output, n_cell) or (
        proj[2] is not None and proj[2].shape != (n_output,)
    )):  # fmt: skip
        raise ModelError(f"{what}: projection weights must be [{n_output}, {n_cell}]")
    if proj is None and n_output != n_cell:
        raise ModelError(f"{what}: {n_output} outputs from {n_cell} cells need projection weights")


def _integer_sequence(ctx: OpContext, seq: np.ndarray, batch_major: bool,
                      max_cell_scale: int | None = None) -> np.ndarray:  # fmt: skip
    """Run a full-integer cell over time-major `seq`, update its states, return the int8
    outputs [time, batch, output]."""
    cell, h, c = _integer_cell(ctx, max_cell_scale)
    batch = seq.shape[1]
    if h.size != batch * cell.n_output or c.size != batch * len(cell.gates["output"].w_x):
        raise ModelError(f"{ctx.op.describe()}: the states do not fit batch {batch}")
    check_alloc((*seq.shape[:2], cell.n_output), np.int8, f"{ctx.op.describe()}: output")
    outs, h_new, c_new = lstm_sequence(
        cell, seq, h.reshape(batch, -1), c.reshape(batch, -1), batch_major
    )
    ctx.write_variable(IN_OUTPUT_STATE, h_new.reshape(h.shape))
    ctx.write_variable(IN_CELL_STATE, c_new.reshape(c.shape))
    return outs


# NOTE: versions 2-3 of UNIDIRECTIONAL_SEQUENCE_LSTM and 3-4 of LSTM are hybrid (int8
# weights, inputs quantized on the fly): not registered, so such models fail before running.
@register("UNIDIRECTIONAL_SEQUENCE_LSTM", versions=(1, 4))
def unidirectional_sequence_lstm(ctx: OpContext) -> np.ndarray:
    """An LSTM over a sequence [time, batch, input] (time_major) or [batch, time, input];
    version 4 takes diagonal (vector) recurrent weights. Full-integer models (int8 input and
    weights, int16 cell state, version 1) run TFLite's integer kernel (lstm_integer)."""
    x = ctx.input(IN_INPUT)
    if x is None or x.ndim != 3:
        raise ModelError(f"{ctx.op.describe()}: the input must have rank 3")
    time_major = bool(ctx.opt("time_major", False))
    if _is_integer(ctx):
        out = _integer_sequence(ctx, x if time_major else x.transpose(1, 0, 2), not time_major)
        return out if time_major else out.transpose(1, 0, 2)
    cell = read_cell(ctx)
    x = _float(ctx, IN_INPUT)
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
    if _is_integer(ctx):
        x = ctx.input(IN_INPUT)
        if x.ndim != 2:
            raise ModelError(f"{ctx.op.describe()}: the input must have rank 2")
        # NOTE: LSTM's Prepare (unlike the sequence op's) requires a cell scale <= 2^-9.
        return _integer_sequence(ctx, x[None], batch_major=False, max_cell_scale=-9)[0]
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


def _bidi_cells(ctx: OpContext) -> tuple[LstmCell, LstmCell]:
    """The forward and backward cells of a BIDIRECTIONAL_SEQUENCE_LSTM, checked as TFLite's
    Prepare checks them (the backward cell must match the forward one's sizes)."""
    what = ctx.op.describe()
    if float(ctx.opt("cell_clip", 0.0)) < 0 or float(ctx.opt("proj_clip", 0.0)) < 0:
        raise ModelError(f"{what}: cell_clip and proj_clip must not be negative")
    fw, bw = read_cell(ctx, BIDI_FW, hybrid_ok=True), read_cell(ctx, BIDI_BW, hybrid_ok=True)
    if fw.hybrid != bw.hybrid:
        raise ModelError(f"{what}: forward and backward weights must share one type")
    required = [cell.gates[k].w_aux is not None for cell in (fw, bw) for k in GATES[1:]]
    optional = [cell.gates["input"].w_aux is not None for cell in (fw, bw)]
    if not (all(required) or not any(required + optional)):
        raise ModelError(f"{what}: give the aux weights of both cells, or none")
    for name, cell in (("forward", fw), ("backward", bw)):
        _check_cell_shapes(what, name, cell, fw.n_cell, fw.n_output)
    return fw, bw


def _check_cell_shapes(what: str, name: str, cell: LstmCell, n_cell: int, n_output: int) -> None:
    """Every weight of `cell` fits [n_cell, *], [n_cell, n_output], [n_cell], [n_output, n_cell]."""
    n_input = cell.gates["output"].w_x.shape[1]
    for gate_name, g in cell.gates.items():
        shapes = {
            "input weights": (g.w_x, (n_cell, n_input)),
            "recurrent weights": (g.w_h, (n_cell, n_output)),
            "peephole": (g.peephole, (n_cell,)),
            "bias": (g.bias, (n_cell,)),
        }
        if g.w_aux is not None:
            shapes["aux weights"] = (g.w_aux, (n_cell, cell.gates["forget"].w_aux.shape[1]))
        for what_w, (w, shape) in shapes.items():
            if w is not None and w.shape != shape:
                raise ModelError(
                    f"{what}: {name} {gate_name} gate {what_w} {list(w.shape)} must be "
                    f"{list(shape)} (both cells have the forward cell's sizes)"
                )
    if cell.cifg != (cell.gates["input"].w_h is None) or cell.cifg != (
        cell.gates["input"].bias is None
    ):
        raise ModelError(f"{what}: the {name} input gate tensors must be all present or none")
    if cell.proj_w is not None and cell.proj_w.shape != (n_output, n_cell):
        raise ModelError(f"{what}: {name} projection weights must be [{n_output}, {n_cell}]")
    if cell.proj_w is None and (cell.proj_b is not None or n_output != n_cell):
        raise ModelError(f"{what}: {name} cell has no projection weights but needs them")


def _bidi_state(ctx: OpContext, i: int, batch: int, width: int) -> np.ndarray:
    s = _float(ctx, i)
    if s is None or s.size != batch * width:
        raise ModelError(f"{ctx.op.describe()}: state input {i} must hold {batch} x {width} values")
    return s.reshape(batch, width)


@register("BIDIRECTIONAL_SEQUENCE_LSTM", versions=(1, 2, 3))
def bidirectional_sequence_lstm(ctx: OpContext) -> list[np.ndarray]:
    """A forward LSTM over the sequence and a backward one from its end ([batch, time,
    input], or [time, batch, input] if time_major); the two output sequences, or one with
    both concatenated on the last axis (merge_outputs). An aux input with aux weights adds
    W_aux aux to every gate of both cells; without aux weights it is the backward cell's
    input. Versions 2-3 are hybrid (int8 weights; 3 with asymmetric_quantize_inputs)."""
    what = ctx.op.describe()
    if len(ctx.inputs) != BIDI_INPUTS:
        raise ModelError(f"{what}: takes {BIDI_INPUTS} inputs, got {len(ctx.inputs)}")
    merge = bool(ctx.opt("merge_outputs", False))
    if len(ctx.op.outputs) != (1 if merge else 2):
        raise ModelError(f"{what}: needs {1 if merge else 2} outputs (merge_outputs={merge})")
    fw, bw = _bidi_cells(ctx)
    x = _float(ctx, IN_INPUT)
    if x is None or x.ndim != 3 or x.shape[2] != fw.gates["output"].w_x.shape[1]:
        raise ModelError(
            f"{what}: the input must have rank 3 and the weights' input size "
            f"{fw.gates['output'].w_x.shape[1]}"
        )
    time_major = bool(ctx.opt("time_major", False))
    seq = x if time_major else x.transpose(1, 0, 2)
    aux = _float(ctx, BIDI_AUX_INPUT)
    if fw.has_aux and aux is None:
        raise ModelError(f"{what}: aux weights are given but the aux input is absent")
    if aux is not None:
        size = fw.gates["forget"].w_aux.shape[1] if fw.has_aux else x.shape[2]
        if aux.ndim != 3 or aux.shape != (*x.shape[:2], size):
            raise ModelError(f"{what}: the aux input {list(aux.shape)} must be "
                             f"{[*x.shape[:2], size]}")  # fmt: skip
    aux_seq = None if aux is None else (aux if time_major else aux.transpose(1, 0, 2))
    # With aux weights the aux input feeds both cells; without, it is the backward input.
    cross, bw_seq = (aux_seq, seq) if fw.has_aux else (None, aux_seq if aux is not None else seq)
    batch = seq.shape[1]
    (fh, fc), (bh, bc) = BIDI_FW_STATES, BIDI_BW_STATES
    h_fw, c_fw = _bidi_state(ctx, fh, batch, fw.n_output), _bidi_state(ctx, fc, batch, fw.n_cell)
    h_bw, c_bw = _bidi_state(ctx, bh, batch, bw.n_output), _bidi_state(ctx, bc, batch, bw.n_cell)
    check_alloc((*seq.shape[:2], 2 * fw.n_output), np.float32, f"{what}: output")
    out_fw, h_fw, c_fw = run_sequence(fw, seq, h_fw, c_fw, cross)
    out_bw, h_bw, c_bw = run_sequence(bw, bw_seq, h_bw, c_bw, cross, reverse=True)
    for (hi, ci), h, c in ((BIDI_FW_STATES, h_fw, c_fw), (BIDI_BW_STATES, h_bw, c_bw)):
        ctx.write_variable(hi, h.reshape(ctx.inputs[hi].shape))
        ctx.write_variable(ci, c.reshape(ctx.inputs[ci].shape))
    # NOTE: TFLite's batch-major kernels step the states by the output's row size: with
    # merge_outputs and a batch over 1 they read and write past the states (garbage).
    outs = [np.concatenate([out_fw, out_bw], axis=-1)] if merge else [out_fw, out_bw]
    return outs if time_major else [o.transpose(1, 0, 2) for o in outs]
