"""Full-integer LSTMs (TFLite's 8x8->16 kernel) against LiteRT's reference kernels:
UNIDIRECTIONAL_SEQUENCE_LSTM and LSTM with int8 input, weights and output state and an
int16 cell state, laid out as the official converter writes them (five intermediates: the
gates' pre-activation quantizations, used with layer norm, and the hidden state's). One
case per configuration; states are variables, so each case invokes more than once.

The models are built here rather than converted: TensorFlow stays out of the tested
environment, and the converter makes neither projections nor peepholes from Keras. Its own
full-integer LSTM (tf_keras, calibrated) is the zoo's SequenceLSTM__int8 (tests/models)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, SubgraphBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from tests.ops.conftest import run_both_invokes

#: Invokes per case: the second and third see the state the first one left.
INVOKES = 3
#: Allowed difference from LiteRT, in quanta of the int8 output (the kernel is integer).
QUANT_STEPS = 0
INPUT_Q = (2.0 / 255.0, -3)  #: (scale, zero point) of the int8 input, range about [-1, 1]
STATE_Q = (1.0 / 128.0, 5)  #: output state and output (the converter ties them)
PROJ_STATE_Q = (1.0 / 64.0, -2)  #: the same with a projection (a wider range)
HIDDEN_Q = (1.0 / 128.0, 0)  #: intermediate 4: the hidden state o * tanh(c)
NORM_GATE_SCALE = 2.0**-11  #: intermediates 0-3 with layer norm: gate pre-activations


@dataclass(frozen=True)
class Cfg:
    batch: int = 2
    time: int = 3
    n_in: int = 4
    n_cell: int = 5
    time_major: bool = False
    cifg: bool = False
    peephole: bool = False
    projection: bool = False
    proj_bias: bool = False
    layer_norm: bool = False
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    cell_log2: int = -11  #: the cell state's scale is 2^cell_log2

    @property
    def n_out(self) -> int:
        return 3 if self.projection else self.n_cell


BASE = Cfg()
CONFIGS = {
    "plain": BASE,
    "time_major": replace(BASE, time_major=True),
    "cifg": replace(BASE, cifg=True),
    "peephole": replace(BASE, peephole=True),
    "peephole_time_major": replace(BASE, peephole=True, time_major=True),
    "projection": replace(BASE, projection=True),
    "projection_bias_time_major": replace(BASE, projection=True, proj_bias=True, time_major=True),
    "layer_norm": replace(BASE, layer_norm=True),
    "layer_norm_time_major": replace(BASE, layer_norm=True, time_major=True, n_cell=8),
    "layer_norm_cifg_peephole_projection": replace(
        BASE, layer_norm=True, cifg=True, peephole=True, projection=True, proj_bias=True
    ),
    # with n_output < n_cell TFLite's peephole walks rows by n_output (see lstm_integer)
    "peephole_projection_time_major": replace(
        BASE, peephole=True, projection=True, time_major=True, batch=3
    ),
    "cell_clip": replace(BASE, cell_clip=0.4),
    "proj_clip": replace(BASE, projection=True, proj_clip=0.12),
    "cell_scale_2^-9": replace(BASE, cell_log2=-9),
    "cell_scale_2^-15_time_major": replace(BASE, cell_log2=-15, time_major=True),
    # outside ApplyTanh's range: TFLite uses the input gate for tanh(c) (see lstm_integer);
    # the converter picks 2^-16 for a cell state within +-0.5
    "cell_scale_2^-16": replace(BASE, cell_log2=-16),
    "cell_scale_2^-16_time_major_peephole": replace(
        BASE, cell_log2=-16, time_major=True, peephole=True
    ),
    "cell_scale_2^-8_layer_norm": replace(BASE, cell_log2=-8, layer_norm=True),
    "batch1_long": replace(BASE, batch=1, time=12, n_in=7, n_cell=16),
    "wide_batch_major": replace(BASE, batch=4, time=5, n_in=6, n_cell=12),
}


def _quantized(g: SubgraphBuilder, name: str, real: np.ndarray, dtype: type) -> tuple[int, float]:
    """A symmetric per-tensor constant of `real` (int8 or int16) and its scale."""
    scale = float(np.abs(real).max()) / np.iinfo(dtype).max
    q = np.clip(np.round(real / scale), -np.iinfo(dtype).max, np.iinfo(dtype).max)
    return g.const(name, q.astype(dtype), quant=(scale, 0)), scale


def _bias(g: SubgraphBuilder, name: str, real: np.ndarray, scale: float) -> int:
    return g.const(name, np.round(real / scale).astype(np.int32), quant=(scale, 0))


def _inputs(g: SubgraphBuilder, cfg: Cfg, rng: np.random.Generator) -> list[int]:
    """The 24 inputs after the input, -1 where absent, as the converter quantizes them:
    int8 weights, int32 biases (in units of input x weight scale, or of the layer-norm
    weight scale / 1024 with layer norm), int16 peepholes and layer-norm weights."""
    no_input = cfg.cifg
    gates = ("i", "f", "c", "o")
    out_q = PROJ_STATE_Q if cfg.projection else STATE_Q
    x_w, h_w = {}, {}
    for k in gates:
        if not (k == "i" and no_input):
            x_w[k] = _quantized(
                g, f"wx_{k}", rng.uniform(-0.6, 0.6, (cfg.n_cell, cfg.n_in)), np.int8
            )
            h_w[k] = _quantized(g, f"wh_{k}", rng.uniform(-0.6, 0.6, (cfg.n_cell, cfg.n_out)), np.int8)  # fmt: skip
    ins = [x_w[k][0] if k in x_w else -1 for k in gates]
    ins += [h_w[k][0] if k in h_w else -1 for k in gates]
    for k in ("i", "f", "o"):
        on = cfg.peephole and not (k == "i" and no_input)
        real = rng.uniform(-0.5, 0.5, cfg.n_cell)
        ins.append(_quantized(g, f"peep_{k}", real, np.int16)[0] if on else -1)
    norms = {}
    if cfg.layer_norm:
        for k in x_w:
            norms[k] = _quantized(g, f"ln_{k}", rng.uniform(0.5, 1.5, cfg.n_cell), np.int16)
    for k in gates:
        if k not in x_w:
            ins.append(-1)
            continue
        scale = norms[k][1] / 1024 if cfg.layer_norm else INPUT_Q[0] * x_w[k][1]
        ins.append(_bias(g, f"b_{k}", rng.uniform(-0.3, 0.3, cfg.n_cell), scale))
    proj_scale = 1.0
    if cfg.projection:
        proj_w, proj_scale = _quantized(
            g, "proj_w", rng.uniform(-0.6, 0.6, (cfg.n_out, cfg.n_cell)), np.int8
        )
        ins.append(proj_w)
    else:
        ins.append(-1)
    real_b = rng.uniform(-0.2, 0.2, cfg.n_out)
    ins.append(_bias(g, "proj_b", real_b, HIDDEN_Q[0] * proj_scale) if cfg.proj_bias else -1)
    ins.append(g.tensor("h", (cfg.batch, cfg.n_out), np.int8, quant=out_q, is_variable=True))
    cell_q = (2.0**cfg.cell_log2, 0)
    ins.append(g.tensor("c", (cfg.batch, cfg.n_cell), np.int16, quant=cell_q, is_variable=True))
    ins += [norms[k][0] if k in norms else -1 for k in gates] if cfg.layer_norm else [-1] * 4
    return ins


def _intermediates(g: SubgraphBuilder, layer_norm: bool) -> list[int]:
    """The converter's five: the gates' pre-activations (int16 with layer norm; else float32
    without quantization, as TFLite does not read them) and the int8 hidden state."""
    gates = [
        g.tensor(f"gate_{k}", (), np.int16, quant=(NORM_GATE_SCALE, 0))
        if layer_norm
        else g.tensor(f"gate_{k}", (), np.float32)
        for k in "ifco"
    ]
    return [*gates, g.tensor("hidden", (), np.int8, quant=HIDDEN_Q)]


def build_integer_lstm(cfg: Cfg, op: str) -> bytes:
    """A one-op full-integer model: the sequence LSTM (rank-3 input) or one LSTM step."""
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    g = b.main
    seq = op == "UNIDIRECTIONAL_SEQUENCE_LSTM"
    lead = (cfg.time, cfg.batch) if cfg.time_major else (cfg.batch, cfg.time)
    x = g.input("x", (*lead, cfg.n_in) if seq else (cfg.batch, cfg.n_in), np.int8, quant=INPUT_Q)
    ins = _inputs(g, cfg, rng)
    out_q = PROJ_STATE_Q if cfg.projection else STATE_Q
    y = g.tensor("y", (*lead, cfg.n_out) if seq else (cfg.batch, cfg.n_out), np.int8, quant=out_q)
    options = dict(
        fused_activation_function="TANH", cell_clip=cfg.cell_clip, proj_clip=cfg.proj_clip
    )
    if seq:
        options["time_major"] = cfg.time_major
    g.op(op, [x, *ins], [y], intermediates=_intermediates(g, cfg.layer_norm), **options)
    g.output(y)
    return b.build()


def _feeds(shape: tuple[int, ...], seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.integers(-128, 128, shape, dtype=np.int8)] for _ in range(INVOKES)]


def assert_same(expected: list, got: list) -> None:
    for step, (e_outs, g_outs) in enumerate(zip(expected, got, strict=True)):
        for k, (e, g) in enumerate(zip(e_outs, g_outs, strict=True)):
            assert g.shape == e.shape and g.dtype == e.dtype, f"invoke {step} output {k}"
            diff = np.abs(g.astype(np.int32) - e.astype(np.int32)).max(initial=0)
            assert diff <= QUANT_STEPS, f"invoke {step} output {k}: {diff} quanta from LiteRT"
            # the cases must exercise the cell: outputs that never move prove nothing
            assert np.unique(e).size > 2, f"invoke {step} output {k} is (nearly) constant"


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS.keys())
def test_unidirectional_sequence_lstm_integer(cfg: Cfg) -> None:
    model = build_integer_lstm(cfg, "UNIDIRECTIONAL_SEQUENCE_LSTM")
    lead = (cfg.time, cfg.batch) if cfg.time_major else (cfg.batch, cfg.time)
    assert_same(*run_both_invokes(model, _feeds((*lead, cfg.n_in), seed=2)))


FULL_CONFIGS = {
    k: replace(CONFIGS[k], batch=3)
    for k in ("plain", "cifg", "peephole", "projection", "layer_norm_cifg_peephole_projection")
}


@pytest.mark.parametrize("cfg", FULL_CONFIGS.values(), ids=FULL_CONFIGS.keys())
def test_lstm_integer(cfg: Cfg) -> None:
    model = build_integer_lstm(cfg, "LSTM")
    assert_same(*run_both_invokes(model, _feeds((cfg.batch, cfg.n_in), seed=3)))


def test_integer_lstm_needs_its_intermediates() -> None:
    """An int8 LSTM without the converter's five intermediates is refused with a reason (the
    8x8->8 form, twelve intermediates, is not run here)."""
    b = ModelBuilder()
    g = b.main
    cfg = BASE
    x = g.input("x", (cfg.batch, cfg.time, cfg.n_in), np.int8, quant=INPUT_Q)
    ins = _inputs(g, cfg, np.random.default_rng(0))
    y = g.tensor("y", (cfg.batch, cfg.time, cfg.n_out), np.int8, quant=STATE_Q)
    g.op("UNIDIRECTIONAL_SEQUENCE_LSTM", [x, *ins], [y], fused_activation_function="TANH")
    g.output(y)
    interp = Interpreter(read_model(b.build()))
    with pytest.raises(ModelError, match="5 intermediates"):
        interp.invoke([np.zeros((cfg.batch, cfg.time, cfg.n_in), np.int8)])


def test_cifg_lstm_integer_refuses_a_cell_scale_outside_tanh() -> None:
    """Outside ApplyTanh's range TFLite's CIFG kernel reads a scratch buffer no step wrote."""
    cfg = replace(BASE, cifg=True, cell_log2=-16)
    model = build_integer_lstm(cfg, "UNIDIRECTIONAL_SEQUENCE_LSTM")
    with pytest.raises(ModelError, match="nothing wrote"):
        Interpreter(read_model(model)).invoke([np.zeros((cfg.batch, cfg.time, cfg.n_in), np.int8)])


def test_lstm_integer_refuses_a_coarse_cell_scale() -> None:
    """LSTM's Prepare (unlike the sequence op's) wants a cell state scale of at most 2^-9."""
    model = build_integer_lstm(replace(BASE, cell_log2=-8), "LSTM")
    with pytest.raises(ModelError, match="at most 2"):
        Interpreter(read_model(model)).invoke([np.zeros((BASE.batch, BASE.n_in), np.int8)])
