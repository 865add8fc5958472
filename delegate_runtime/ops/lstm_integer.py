"""The full-integer LSTM cell: TFLite's "8x8->16" kernel (lstm_eval's EvalInteger8x8_16).

int8 input, weights and output state, int16 cell state (a power-of-two scale), int32
biases, int16 peephole and layer-norm weights. Every product is rescaled by a fixed-point
multiplier that TFLite's Prepare derives once from the tensors' scales and the op's
intermediates (PopulateQuantizedLstmParams8x8_16): `prepare_cell` does the same; the gates
are int16 (Q3.12 before their activation, Q0.15 after), and sigmoid and tanh are gemmlowp's
fixed-point functions. `lstm_sequence` then steps the cell as lstm_eval does, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..errors import ModelError
from .common import (
    c_div,
    high_mul16,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from .normalization import inv_sqrt_multiplier

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
#: Gate pre-activations without layer norm are Q3.12 (the intermediates' default scale).
GATE_SCALE = 2.0**-12
#: TFLite's variance guard: max(1, int(VARIANCE_GUARD * layer-norm scale)).
VARIANCE_GUARD = 10000
#: ApplyTanh's integer bits: a cell state scale of 2^-15 to 2^-9 (15 + log2 scale bits).
TANH_INTEGER_BITS = range(7)

Multiplier = tuple[int, int]  #: (int32 fixed-point multiplier, shift), QuantizeMultiplier's


@dataclass(frozen=True)
class Quant:
    """A tensor's per-tensor quantization."""

    scale: float
    zero_point: int = 0


@dataclass(frozen=True)
class GateTensors:
    """One gate's tensors as the op holds them (None: absent), and its intermediate."""

    w_x: np.ndarray | None  #: int8 [cell, input]
    w_h: np.ndarray | None  #: int8 [cell, output]
    x_quant: Quant | None
    h_quant: Quant | None
    bias: np.ndarray | None  #: int32 [cell]
    peephole: np.ndarray | None = None  #: int16 [cell]
    peephole_quant: Quant | None = None
    layer_norm: np.ndarray | None = None  #: int16 [cell]
    layer_norm_quant: Quant | None = None
    intermediate: Quant | None = None  #: the gate's pre-activation (layer norm only)


@dataclass(frozen=True)
class IntegerGate:
    """A gate prepared for the integer kernel: weights, effective biases and multipliers."""

    w_x: np.ndarray
    w_h: np.ndarray
    x_bias: np.ndarray  #: bias (without layer norm) - input zero point x row sums
    h_bias: np.ndarray  #: -output-state zero point x row sums
    x_mult: Multiplier
    h_mult: Multiplier
    peephole: np.ndarray | None
    peephole_mult: Multiplier
    layer_norm: np.ndarray | None
    norm_bias: np.ndarray | None  #: the gate bias, added inside the layer norm
    norm_mult: Multiplier
    variance_guard: int


@dataclass(frozen=True)
class IntegerCell:
    """TFLite's IntegerLstmParameter with the weights it goes with."""

    gates: dict[str, IntegerGate | None]  #: input (None: CIFG), forget, cell, output
    proj_w: np.ndarray | None
    proj_bias: np.ndarray | None  #: projection bias + hidden zero point x row sums
    proj_mult: Multiplier
    hidden_mult: Multiplier
    hidden_zp: int
    output_state_zp: int
    cell_scale: int  #: log2 of the cell state's scale
    cell_clip: int  #: quantized; 0: none
    proj_clip: int  #: quantized; 0: none
    n_output: int


# -- gemmlowp's int16 fixed point, vectorised over int64 arrays holding int16 values ------


def _wrap16(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int16, as a C++ cast to int16 leaves them."""
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def _wrap32(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _high_mul16(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """int16 SaturatingRoundingDoublingHighMul, cast to int16 as the kernel holds it."""
    return _wrap16(high_mul16(a, b))


def _shl16(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT, int16, exponent >= 0."""
    limit = (1 << (15 - exponent)) - 1
    return np.where(x > limit, INT16_MAX, np.where(x < -limit, INT16_MIN, x << exponent))


def _rescale16(x: np.ndarray, src_bits: int, dst_bits: int) -> np.ndarray:
    """gemmlowp's Rescale between int16 formats of `src_bits` and `dst_bits` integer bits."""
    e = src_bits - dst_bits
    return _shl16(x, e) if e >= 0 else rounding_divide_by_pot(x, -e)


def _const16(raw32: int) -> int:
    """An int32 fixed-point constant as gemmlowp rescales it to int16."""
    return int(_wrap16(rounding_divide_by_pot(np.int64(raw32), 16)))


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.15: gemmlowp's Taylor expansion around -1/8."""
    c0, third = _const16(1895147668), _const16(715827883)
    x = _wrap16(a + (1 << 12))
    x2 = _high_mul16(x, x)
    x3 = _high_mul16(x2, x)
    x4 = _high_mul16(x2, x2)
    poly = _wrap16(_high_mul16(_wrap16(rounding_divide_by_pot(x4, 2) + x3), third) + x2)
    poly = rounding_divide_by_pot(poly, 1)
    return np.clip(c0 + _high_mul16(np.int64(c0), _wrap16(x + poly)), INT16_MIN, INT16_MAX)


#: exp(-2^k) in Q0.31 for k = -2..4: gemmlowp's barrel shifter.
_EXP_STEPS = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
              (2, 39332535), (3, 720401), (4, 242))  # fmt: skip


def _exp_negative(a: np.ndarray, bits: int) -> np.ndarray:
    """exp(a) for a <= 0 with `bits` integer bits, Q0.15 (exp_on_negative_values)."""
    frac = 15 - bits
    quarter = 1 << (frac - 2)
    a_mod = _wrap16((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_rescale16(a_mod, bits, 0))
    remainder = _wrap16(a_mod - a)
    for k, multiplier in _EXP_STEPS:
        if bits > k:
            hit = (remainder & (1 << (frac + k))) != 0
            result = np.where(hit, _high_mul16(result, _const16(multiplier)), result)
    if bits > 5:
        result = np.where(a < _const16(-(1 << (36 - bits))), 0, result)
    return np.where(a == 0, INT16_MAX, result)


def _newton_reciprocal(a: np.ndarray) -> np.ndarray:
    """x ~= 1 / ((1 + a) / 2) in Q2.13, three Newton-Raphson steps, and (1 + a) / 2."""
    s = a + INT16_MAX
    half = _wrap16(c_div(s + np.where(s >= 0, 1, -1), 2))  # RoundingHalfSum
    x = _wrap16(_const16(1515870810) + _high_mul16(half, _const16(-1010580540)))
    for _ in range(3):
        residual = _wrap16((1 << 13) - _high_mul16(half, x))
        x = _wrap16(x + _shl16(_high_mul16(x, residual), 2))
    return x


@cache
def _table(fn: str, bits: int) -> np.ndarray:
    """gemmlowp's logistic or tanh of every int16 input with `bits` integer bits, as an
    int16 table indexed by input + 32768 (output Q0.15)."""
    a = np.arange(INT16_MIN, INT16_MAX + 1, dtype=np.int64)
    neg_a = _wrap16(-a)
    if fn == "logistic":
        positive = a > 0
        magnitude = np.where(positive, a, neg_a)
        up = _shl16(_newton_reciprocal(_exp_negative(_wrap16(-magnitude), bits)), 1)
        out = np.where(positive, up, _wrap16(INT16_MAX - up))
        out = np.where(a == 0, 1 << 14, out)
    else:
        negative = a < 0
        e = _exp_negative(np.where(negative, a, neg_a), bits + 1)  # exp(2x) for x <= 0
        t = _shl16(_wrap16(_newton_reciprocal(e) - (1 << 13)), 2)
        out = np.where(a == 0, 0, np.where(negative, _wrap16(-t), t))
    return out.astype(np.int16)


def sigmoid_q3_12(x: np.ndarray) -> np.ndarray:
    """ApplySigmoid: Q3.12 int16 in, Q0.15 out."""
    return _table("logistic", 3)[x.astype(np.int64) + (1 << 15)].astype(np.int64)


def tanh_q(x: np.ndarray, integer_bits: int) -> np.ndarray:
    """ApplyTanh: int16 with `integer_bits` integer bits in, Q0.15 out."""
    return _table("tanh", integer_bits)[x.astype(np.int64) + (1 << 15)].astype(np.int64)


# -- the tensor_utils operations the kernel is built from -----------------------------------


def _mbqm(x: np.ndarray, m: Multiplier) -> np.ndarray:
    return multiply_by_quantized_multiplier(_wrap32(x), m[0], m[1])


def _matmul_acc(x: np.ndarray, w: np.ndarray, bias: np.ndarray, m: Multiplier) -> np.ndarray:
    """MatrixBatchVectorMultiplyAccumulate before its output zero point and clamp."""
    return _mbqm(bias + x @ w.T.astype(np.int64), m)


def _c_mul_shift(a: np.ndarray, b: np.ndarray, shift: int) -> np.ndarray:
    """CwiseMul with a right shift: the int16 result is cast (wrapped), not saturated."""
    return _wrap16(rounding_divide_by_pot(a * b, shift))


def _layer_norm(gate: np.ndarray, g: IntegerGate) -> np.ndarray:
    """ApplyLayerNorm: integer mean and variance per row, gemmlowp's inverse square root."""
    n = gate.shape[-1]
    mean = c_div(gate.sum(axis=-1, keepdims=True) * 1024, n)
    variance = (gate * gate).sum(axis=-1, keepdims=True) * ((1 << 20) // n) - mean * mean
    variance = _wrap32(c_div(variance, 1 << 20))
    variance = np.where(variance < 1, g.variance_guard, variance)
    inv_mult, inv_shift = inv_sqrt_multiplier(variance)
    rescaled = multiply_by_quantized_multiplier(_wrap32(1024 * gate - mean), inv_mult, -inv_shift)
    scaled = _wrap32(_wrap32(rescaled * g.layer_norm) + g.norm_bias)
    scaled = c_div(scaled + np.where(scaled > 0, 512, -512), 1024)
    out = multiply_by_quantized_multiplier(scaled, g.norm_mult[0], g.norm_mult[1] + 12)
    return np.clip(out, INT16_MIN, INT16_MAX)


def _peephole(
    gate: np.ndarray, g: IntegerGate, c: np.ndarray, n_output: int, rows: int
) -> np.ndarray:
    """VectorBatchVectorCwiseProductAccumulate as lstm_eval calls it: with v_size n_output,
    so it walks each call's `rows` rows as one flat vector of rows x n_output values."""
    out = gate.copy()
    for start in range(0, len(gate), rows):
        flat_g, flat_c = out[start : start + rows].reshape(-1), c[start : start + rows].reshape(-1)
        m = min(rows, len(gate) - start) * n_output
        prod = _mbqm(g.peephole[np.arange(m) % n_output] * flat_c[:m], g.peephole_mult)
        flat_g[:m] = np.clip(prod + flat_g[:m], INT16_MIN, INT16_MAX)
    return out


def _gate(
    cell: IntegerCell, g: IntegerGate, x: np.ndarray, h: np.ndarray, c: np.ndarray,
    rows: int, tanh: bool = False,
) -> np.ndarray:  # fmt: skip
    """CalculateLstmGateInteger8x8_16: one gate, int16 Q0.15 after its activation."""
    gate = np.clip(_matmul_acc(x, g.w_x, g.x_bias, g.x_mult), INT16_MIN, INT16_MAX)
    gate = np.clip(gate + _matmul_acc(h, g.w_h, g.h_bias, g.h_mult), INT16_MIN, INT16_MAX)
    if g.peephole is not None:
        gate = _peephole(gate, g, c, cell.n_output, rows)
    if g.layer_norm is not None:
        gate = _layer_norm(gate, g)
    return tanh_q(gate, 3) if tanh else sigmoid_q3_12(gate)


def lstm_step(
    cell: IntegerCell, x: np.ndarray, h: np.ndarray, c: np.ndarray, rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """One LstmStepInteger8x8_16 on int64 arrays x [batch, input], h [batch, output] (int8
    values), c [batch, cell] (int16 values): (new h, new c). TFLite steps `rows` batch rows
    per call (all of them time-major, one batch-major), which only its peephole sees."""
    gates = cell.gates
    inp = None if gates["input"] is None else _gate(cell, gates["input"], x, h, c, rows)
    forget = _gate(cell, gates["forget"], x, h, c, rows)
    cand = _gate(cell, gates["cell"], x, h, c, rows, tanh=True)
    # UpdateLstmCellInteger
    shift = 30 + cell.cell_scale
    kept = _c_mul_shift(forget, c, 15)
    added = _c_mul_shift(INT16_MAX - forget if inp is None else inp, cand, shift)
    c = np.clip(kept + added, INT16_MIN, INT16_MAX)
    if cell.cell_clip > 0:
        c = np.clip(c, -cell.cell_clip, cell.cell_clip)
    out_gate = _gate(cell, gates["output"], x, h, c, rows)
    # CalculateLstmOutputInteger8x8_16
    # NOTE: TFLite's ApplyTanh has no case for other integer bits and writes nothing: its
    # output buffer still holds this step's input gate, which then stands for tanh(c). The
    # converter gives a cell state within +-0.5 the scale 2^-16, so real models do this.
    bits = 15 + cell.cell_scale
    hidden = out_gate * (tanh_q(c, bits) if bits in TANH_INTEGER_BITS else inp)
    if cell.proj_w is None:
        return np.clip(_mbqm(hidden, cell.hidden_mult) + cell.hidden_zp, -128, 127), c
    # NOTE: TFLite quantizes the hidden state with the negated zero point before the
    # projection (b/246629213); the projection's effective bias adds it back.
    hidden = np.clip(_mbqm(hidden, cell.hidden_mult) - cell.hidden_zp, -128, 127)
    h = _matmul_acc(hidden, cell.proj_w, cell.proj_bias, cell.proj_mult)
    h = np.clip(h + cell.output_state_zp, -128, 127)
    if cell.proj_clip > 0:
        h = np.clip(h, -cell.proj_clip, cell.proj_clip)
    return h, c


def lstm_sequence(
    cell: IntegerCell, seq: np.ndarray, h: np.ndarray, c: np.ndarray, batch_major: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cell over int8 `seq` [time, batch, input] from int8 h [batch, output] and int16
    c [batch, cell]: (int8 outputs [time, batch, output], final h, final c)."""
    rows = 1 if batch_major else seq.shape[1]
    h64, c64 = h.astype(np.int64), c.astype(np.int64)
    outs = np.zeros((seq.shape[0], seq.shape[1], cell.n_output), np.int8)
    for t in range(seq.shape[0]):
        h64, c64 = lstm_step(cell, seq[t].astype(np.int64), h64, c64, rows)
        outs[t] = h64
    return outs, h64.astype(np.int8), c64.astype(np.int16)


# -- Prepare: PopulateQuantizedLstmParams8x8_16 and the precomputed zero-point terms --------


def _f32(*factors: float) -> float:
    """Left-to-right float32 products and quotients, as C++ float arithmetic gives them:
    a float, then ('*' or '/', float) pairs."""
    acc = np.float32(factors[0])
    for op, v in zip(factors[1::2], factors[2::2], strict=True):
        acc = acc * np.float32(v) if op == "*" else acc / np.float32(v)
    return float(acc)


def _as_f32(x: float) -> float:
    """`x` rounded to float32, as a Python float (double): C++ float promoted to double."""
    return float(np.float32(x))


def _checked_log2(x: float) -> int | None:
    """CheckedLog2: log2(x) when x is a power of two (within 1e-3), else None."""
    log2 = np.float32(math.log(np.float32(x))) * (np.float32(1.0) / np.float32(math.log(2.0)))
    rounded = np.float32(np.sign(log2) * np.floor(np.abs(log2) + 0.5))
    return int(rounded) if abs(log2 - rounded) < 1e-3 else None


def _row_sums(w: np.ndarray) -> np.ndarray:
    return w.astype(np.int64).sum(axis=1)


def _clip(clip: float, scale: float, limit: int) -> int:
    """A clip value in quanta (truncated as TFLite's cast), 0 for none."""
    if clip <= 0:
        return 0
    return int(min(max(np.float32(clip) / np.float32(scale), -limit - 1), limit))


def _prepare_gate(
    what: str, g: GateTensors, input_q: Quant, state_q: Quant, cell_scale: int, layer_norm: bool
) -> IntegerGate:
    inter = g.intermediate if layer_norm else Quant(GATE_SCALE)
    if inter is None:
        raise ModelError(f"{what}: the layer-norm LSTM's gate intermediate is missing")
    x_scale = _f32(g.x_quant.scale, "*", input_q.scale, "/", inter.scale)
    h_scale = _f32(g.h_quant.scale, "*", state_q.scale, "/", inter.scale)
    peep_mult: Multiplier = (0, 0)
    if g.peephole is not None:
        # std::pow(2, cell_scale) is a double: the product is double, stored as float
        real = 2.0**cell_scale * _as_f32(g.peephole_quant.scale) / _as_f32(inter.scale)
        peep_mult = quantize_multiplier(_as_f32(real))
    norm_scale = g.layer_norm_quant.scale if layer_norm else 1.0
    bias = g.bias.astype(np.int64) if g.bias is not None else np.zeros(len(g.w_x), np.int64)
    return IntegerGate(
        w_x=g.w_x,
        w_h=g.w_h,
        x_bias=_wrap32((0 if layer_norm else bias) - input_q.zero_point * _row_sums(g.w_x)),
        h_bias=_wrap32(-state_q.zero_point * _row_sums(g.w_h)),
        x_mult=quantize_multiplier(x_scale),
        h_mult=quantize_multiplier(h_scale),
        peephole=None if g.peephole is None else g.peephole.astype(np.int64),
        peephole_mult=peep_mult,
        layer_norm=g.layer_norm.astype(np.int64) if layer_norm else None,
        norm_bias=bias,
        norm_mult=quantize_multiplier(norm_scale),
        variance_guard=max(1, int(np.float32(VARIANCE_GUARD) * np.float32(norm_scale))),
    )


def prepare_cell(
    what: str,
    gates: dict[str, GateTensors],
    proj: tuple[np.ndarray, Quant, np.ndarray | None] | None,
    *,
    input_q: Quant,
    output_state_q: Quant,
    cell_state_q: Quant,
    output_q: Quant,
    hidden_q: Quant,
    cell_clip: float,
    proj_clip: float,
    max_cell_scale: int | None = None,
) -> IntegerCell:
    """The integer cell as TFLite's Prepare derives it (PopulateQuantizedLstmParams8x8_16,
    PopulatePrecomputedZPTimesWeightsWithBias); `gates` holds input (w_x None: CIFG),
    forget, cell and output; `proj` is (weights, their quantization, bias) or None. LSTM
    also requires a cell scale of at most 2^max_cell_scale."""
    cell_scale = _checked_log2(cell_state_q.scale)
    if cell_scale is None:
        raise ModelError(f"{what}: the cell state's scale {cell_state_q.scale} is no power of 2")
    if max_cell_scale is not None and cell_scale > max_cell_scale:
        raise ModelError(f"{what}: the cell state's scale must be at most 2^{max_cell_scale}")
    if 15 + cell_scale not in TANH_INTEGER_BITS and gates["input"].w_x is None:
        raise ModelError(
            f"{what}: with a cell state scale of 2^{cell_scale}, outside TFLite's integer tanh "
            "(2^-15 to 2^-9), TFLite's CIFG LSTM reads a buffer nothing wrote"
        )
    layer_norm = gates["forget"].layer_norm is not None
    n_output = gates["output"].w_h.shape[1]
    if any(g.peephole is not None for g in gates.values()) and n_output > len(gates["output"].w_x):
        raise ModelError(f"{what}: peepholes with more outputs than cells read past their weights")
    prepared: dict[str, IntegerGate | None] = {
        name: None
        if g.w_x is None
        else _prepare_gate(what, g, input_q, output_state_q, cell_scale, layer_norm)
        for name, g in gates.items()
    }
    hidden_scale = _as_f32(2.0**-15 / _as_f32(hidden_q.scale) * 2.0**-15)  # doubles, as C++
    proj_w = proj_bias = None
    proj_mult: Multiplier = (0, 0)
    if proj is not None:
        proj_w, proj_quant, bias = proj
        start = np.zeros(len(proj_w), np.int64) if bias is None else bias.astype(np.int64)
        proj_bias = _wrap32(start + hidden_q.zero_point * _row_sums(proj_w))
        proj_mult = quantize_multiplier(
            _f32(proj_quant.scale, "*", hidden_q.scale, "/", output_state_q.scale)
        )
    return IntegerCell(
        gates=prepared,
        proj_w=proj_w,
        proj_bias=proj_bias,
        proj_mult=proj_mult,
        hidden_mult=quantize_multiplier(hidden_scale),
        hidden_zp=hidden_q.zero_point,
        output_state_zp=output_state_q.zero_point,
        cell_scale=cell_scale,
        cell_clip=_clip(cell_clip, cell_state_q.scale, INT16_MAX),
        proj_clip=_clip(proj_clip, output_q.scale, 127),
        n_output=n_output,
    )
