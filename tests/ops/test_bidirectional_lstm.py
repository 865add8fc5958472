"""BIDIRECTIONAL_SEQUENCE_LSTM against LiteRT's reference kernels: float (v1) and hybrid
(int8 weights, v2 symmetric and v3 asymmetric inputs), merged or separate outputs, time
or batch major, CIFG, peepholes, projection, clipping and the aux-input forms. States are
variables, so each case invokes several times."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant, SubgraphBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from tests.ops.conftest import litert_interpreter, run_both_invokes

#: Float tolerances: LiteRT's sigmoid/tanh and sums differ from numpy's in the last bits.
RTOL, ATOL = 1e-5, 2e-6
#: Invokes per case: later ones see the states the earlier ones left.
INVOKES = 3
FLOAT, HYBRID, HYBRID_ASYM = "float", "hybrid", "hybrid_asym"
VERSIONS = {FLOAT: 1, HYBRID: 2, HYBRID_ASYM: 3}
#: Aux input modes: none; with aux weights (cross links); without (the backward input).
NO_AUX, CROSS, BW_INPUT = "no_aux", "cross_links", "aux_feeds_bw"


@dataclass(frozen=True)
class Cfg:
    batch: int = 2
    time: int = 3
    n_in: int = 3
    n_cell: int = 4
    kind: str = FLOAT
    merge: bool = False
    time_major: bool = False
    cifg: bool = False
    peephole: bool = False
    projection: bool = False
    proj_bias: bool = False
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    activation: str = "TANH"
    aux: str = NO_AUX
    aux_size: int = 2

    @property
    def n_out(self) -> int:
        return 3 if self.projection else self.n_cell

    @property
    def lead(self) -> tuple[int, int]:
        return (self.time, self.batch) if self.time_major else (self.batch, self.time)


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _matrix(g: SubgraphBuilder, rng, name: str, shape, kind: str) -> int:
    """A weight constant: float32, or int8 with a per-tensor scale (hybrid)."""
    w = rng.uniform(-0.6, 0.6, shape).astype(np.float32)
    if kind == FLOAT:
        return g.const(name, w)
    scale = float(np.abs(w).max()) / 127
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return g.const(name, q, quant=Quant(scale, 0))


def _cell(g: SubgraphBuilder, rng, prefix: str, c: Cfg) -> list[int]:
    """The 17 inputs of one cell (weights, peepholes, biases, projection), -1 where absent."""

    def skip(k: str) -> bool:
        return k == "i" and c.cifg

    def mat(name: str, *shape: int) -> int:
        return _matrix(g, rng, prefix + name, shape, c.kind)

    def vec(name: str, n: int) -> int:
        return g.const(prefix + name, rng.uniform(-0.5, 0.5, n).astype(np.float32))

    gates = ("i", "f", "c", "o")
    ins = [-1 if skip(k) else mat(f"wx_{k}", c.n_cell, c.n_in) for k in gates]
    ins += [-1 if skip(k) else mat(f"wh_{k}", c.n_cell, c.n_out) for k in gates]
    ins += [
        mat(f"peep_{k}", c.n_cell) if c.peephole and not skip(k) else -1 for k in ("i", "f", "o")
    ]
    ins += [-1 if skip(k) else vec(f"b_{k}", c.n_cell) for k in gates]
    ins.append(mat("proj_w", c.n_out, c.n_cell) if c.projection else -1)
    ins.append(vec("proj_b", c.n_out) if c.proj_bias else -1)
    return ins


def _aux_weights(g: SubgraphBuilder, rng, prefix: str, c: Cfg) -> list[int]:
    return [
        -1 if (k == "i" and c.cifg) else _matrix(g, rng, f"{prefix}aux_{k}", (c.n_cell, c.aux_size), c.kind)
        for k in ("i", "f", "c", "o")
    ]  # fmt: skip


def build(c: Cfg) -> bytes:
    """A one-op BIDIRECTIONAL_SEQUENCE_LSTM model with its 48 inputs."""
    rng = _rng("bidi lstm", c)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (*c.lead, c.n_in))
    ins = [x, *_cell(g, rng, "fw_", c), *_cell(g, rng, "bw_", c)]
    ins += [
        g.tensor("fw_h", (c.batch, c.n_out), is_variable=True),
        g.tensor("fw_c", (c.batch, c.n_cell), is_variable=True),
        g.tensor("bw_h", (c.batch, c.n_out), is_variable=True),
        g.tensor("bw_c", (c.batch, c.n_cell), is_variable=True),
    ]
    if c.aux == NO_AUX:
        ins += [-1] * 9
    else:
        ins.append(g.input("aux", (*c.lead, c.aux_size if c.aux == CROSS else c.n_in)))
        if c.aux == CROSS:
            ins += _aux_weights(g, rng, "fw_", c) + _aux_weights(g, rng, "bw_", c)
        else:
            ins += [-1] * 8
    assert len(ins) == 48
    if c.merge:
        outs = [g.tensor("y", (*c.lead, 2 * c.n_out))]
    else:
        outs = [g.tensor("y_fw", (*c.lead, c.n_out)), g.tensor("y_bw", (*c.lead, c.n_out))]
    g.op(
        "BIDIRECTIONAL_SEQUENCE_LSTM",
        ins,
        outs,
        version=VERSIONS[c.kind],
        fused_activation_function=c.activation,
        cell_clip=c.cell_clip,
        proj_clip=c.proj_clip,
        merge_outputs=c.merge,
        time_major=c.time_major,
        asymmetric_quantize_inputs=c.kind == HYBRID_ASYM,
    )
    g.output(*outs)
    return b.build()


def _feeds(c: Cfg) -> list[list[np.ndarray]]:
    rng = _rng("feeds", c)
    shapes = [(*c.lead, c.n_in)]
    if c.aux != NO_AUX:
        shapes.append((*c.lead, c.aux_size if c.aux == CROSS else c.n_in))
    return [[rng.uniform(-1, 1, s).astype(np.float32) for s in shapes] for _ in range(INVOKES)]


def assert_same(expected: list, got: list) -> None:
    for step, (e_outs, g_outs) in enumerate(zip(expected, got, strict=True)):
        assert len(e_outs) == len(g_outs)
        for k, (e, g) in enumerate(zip(e_outs, g_outs, strict=True)):
            assert g.shape == e.shape and g.dtype == e.dtype, f"invoke {step} output {k}"
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"invoke {step} out {k}")


BASE = Cfg()
TM = replace(BASE, time_major=True)
#: LiteRT's batch-major kernel steps the states by the merged output's row size: a merged
#: batch-major case takes batch 1 (with more, LiteRT reads and writes past its states).
MERGED_BM = replace(BASE, merge=True, batch=1)
FLOAT_CASES = {
    "plain": BASE,
    "merge_batch1": MERGED_BM,
    "time_major": TM,
    "time_major_merge": replace(TM, merge=True),
    "cifg": replace(BASE, cifg=True),
    "peephole": replace(BASE, peephole=True),
    "cifg_peephole_time_major": replace(TM, cifg=True, peephole=True),
    "projection": replace(BASE, projection=True),
    "projection_bias_merge_time_major": replace(TM, projection=True, proj_bias=True, merge=True),
    "clips": replace(BASE, projection=True, cell_clip=0.3, proj_clip=0.2),
    "relu": replace(BASE, activation="RELU"),
    "long_batch1": replace(BASE, batch=1, time=9, n_in=5, n_cell=6),
    "aux_cross": replace(BASE, aux=CROSS),
    "aux_cross_cifg_merge": replace(MERGED_BM, aux=CROSS, cifg=True, aux_size=4),
    "aux_cross_time_major": replace(TM, aux=CROSS, peephole=True),
    "aux_feeds_bw": replace(BASE, aux=BW_INPUT),
    "aux_feeds_bw_time_major_merge": replace(TM, aux=BW_INPUT, merge=True),
}


@pytest.mark.parametrize("c", FLOAT_CASES.values(), ids=FLOAT_CASES.keys())
def test_bidirectional_lstm_float(c: Cfg) -> None:
    assert_same(*run_both_invokes(build(c), _feeds(c)))


HYBRID_CASES = {
    "plain": replace(BASE, kind=HYBRID),
    "time_major_merge": replace(TM, kind=HYBRID, merge=True),
    "cifg_peephole": replace(BASE, kind=HYBRID, cifg=True, peephole=True),
    "projection_bias": replace(TM, kind=HYBRID, projection=True, proj_bias=True),
    "clips_merge_batch1": replace(
        MERGED_BM, kind=HYBRID, cell_clip=0.4, proj_clip=0.3, projection=True
    ),  # fmt: skip
    "aux_cross": replace(BASE, kind=HYBRID, aux=CROSS),
    "aux_feeds_bw_time_major": replace(TM, kind=HYBRID, aux=BW_INPUT),
    "asym_plain": replace(BASE, kind=HYBRID_ASYM),
    "asym_time_major_peephole": replace(TM, kind=HYBRID_ASYM, peephole=True),
    "asym_cifg_projection": replace(BASE, kind=HYBRID_ASYM, cifg=True, projection=True),
    "asym_aux_cross_time_major": replace(TM, kind=HYBRID_ASYM, aux=CROSS, merge=True),
    "asym_aux_cross_cifg_projection": replace(
        BASE, kind=HYBRID_ASYM, aux=CROSS, cifg=True, projection=True, proj_bias=True
    ),  # fmt: skip
}


@pytest.mark.parametrize("c", HYBRID_CASES.values(), ids=HYBRID_CASES.keys())
def test_bidirectional_lstm_hybrid(c: Cfg) -> None:
    assert_same(*run_both_invokes(build(c), _feeds(c)))


def test_bidirectional_lstm_hybrid_zero_input_keeps_the_recurrence() -> None:
    """An all-zero input is not quantized (TFLite skips it): only states and biases act."""
    c = replace(BASE, kind=HYBRID)
    feeds = _feeds(c)[:1] + [[np.zeros((*c.lead, c.n_in), np.float32)]]
    assert_same(*run_both_invokes(build(c), feeds))


# -- refusals ------------------------------------------------------------------------------


def _refused(model: bytes, c: Cfg, match: str) -> None:
    """LiteRT refuses `model` at allocation, and we refuse it naming the op."""
    with pytest.raises((ValueError, RuntimeError)):
        litert_interpreter(model).invoke()
    with pytest.raises(ModelError, match=match):
        Interpreter(read_model(model)).invoke(_feeds(c)[0])


def _with_inputs(c: Cfg, edit: dict[int, int | str]) -> bytes:
    """`build(c)` with some inputs replaced: an index of an earlier input, or -1."""
    model = read_model(build(c))
    b = ModelBuilder()
    g = b.main
    sg = model.main
    ids = []
    for t in sg.tensors:
        if t.is_constant:
            ids.append(g.const(t.name, np.array(t.data), quant=_quant(t)))
        elif t.index in sg.inputs:
            ids.append(g.input(t.name, t.shape, t.dtype))
        else:
            ids.append(g.tensor(t.name, t.shape, t.dtype, is_variable=t.is_variable))
    op = sg.operators[0]
    ins = [ids[t] if t >= 0 else -1 for t in op.inputs]
    for pos, value in edit.items():
        ins[pos] = value if value == -1 else ins[value]
    outs = [ids[t] for t in op.outputs]
    g.op(op.op, ins, outs, version=op.version, **_options(op.options))
    g.output(*outs)
    return b.build()


def _quant(t) -> Quant | None:
    q = t.quantization
    return None if q is None else Quant(float(q.scale[0]), int(q.zero_point[0]))


def _options(options: dict) -> dict:
    keep = ("fused_activation_function", "cell_clip", "proj_clip", "merge_outputs", "time_major",
            "asymmetric_quantize_inputs")  # fmt: skip
    return {k: v for k, v in options.items() if k in keep}


def test_backward_cell_of_another_size_is_refused() -> None:
    """TFLite checks the backward cell against the forward cell's sizes."""
    c = BASE
    b = ModelBuilder()
    g = b.main
    rng = _rng("sizes")
    x = g.input("x", (*c.lead, c.n_in))
    bw = replace(c, n_cell=5)
    ins = [x, *_cell(g, rng, "fw_", c), *_cell(g, rng, "bw_", bw)]
    ins += [
        g.tensor("fw_h", (c.batch, c.n_out), is_variable=True),
        g.tensor("fw_c", (c.batch, c.n_cell), is_variable=True),
        g.tensor("bw_h", (c.batch, bw.n_out), is_variable=True),
        g.tensor("bw_c", (c.batch, bw.n_cell), is_variable=True),
    ] + [-1] * 9
    outs = [g.tensor("y_fw", (*c.lead, c.n_out)), g.tensor("y_bw", (*c.lead, bw.n_out))]
    g.op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, outs, fused_activation_function="TANH")
    g.output(*outs)
    _refused(b.build(), c, r"BIDIRECTIONAL_SEQUENCE_LSTM v1\).*backward")


def test_input_gate_weights_without_recurrent_ones_are_refused() -> None:
    """Input-to-input weights without recurrent-to-input ones: neither CIFG nor not."""
    _refused(_with_inputs(BASE, {5: -1}), BASE, r"BIDIRECTIONAL_SEQUENCE_LSTM.*input gate")


def test_half_of_the_aux_weights_are_refused() -> None:
    """Forward aux weights without backward ones: LiteRT wants all or none."""
    c = replace(BASE, aux=CROSS)
    edit: dict[int, int | str] = {45: -1, 46: -1, 47: -1}
    _refused(_with_inputs(c, edit), c, r"BIDIRECTIONAL_SEQUENCE_LSTM.*aux weights")


def test_negative_cell_clip_is_refused() -> None:
    c = replace(BASE, cell_clip=-1.0)
    _refused(build(c), c, r"BIDIRECTIONAL_SEQUENCE_LSTM.*cell_clip")
