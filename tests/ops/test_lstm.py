"""LSTM kernels against LiteRT: UNIDIRECTIONAL_SEQUENCE_LSTM and LSTM (full and basic), one
case per configuration; states are variables, so each case invokes more than once."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, SubgraphBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.validate import MIN_INPUTS
from tests.ops.conftest import run_both_invokes

#: Float tolerances: LiteRT's LSTM uses its own sigmoid/tanh approximations and sum order.
RTOL, ATOL = 1e-5, 2e-6
#: Invokes per case: the second and third see the state the first one left.
INVOKES = 3


@dataclass(frozen=True)
class Cfg:
    batch: int = 2
    time: int = 3
    n_in: int = 4
    n_cell: int = 5
    peephole: bool = False
    projection: bool = False
    proj_bias: bool = False
    cifg: bool = False
    layer_norm: bool = False
    time_major: bool = False
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    activation: str = "TANH"
    diagonal: bool = False  #: recurrent weights are vectors (version 4)

    @property
    def n_out(self) -> int:
        return 3 if self.projection else self.n_cell


BASE = Cfg()
CONFIGS = {
    "plain": BASE,
    "time_major": replace(BASE, time_major=True),
    "peephole": replace(BASE, peephole=True),
    "projection": replace(BASE, projection=True),
    "projection_bias": replace(BASE, projection=True, proj_bias=True),
    "cifg": replace(BASE, cifg=True),
    "cifg_peephole": replace(BASE, cifg=True, peephole=True),
    "layer_norm": replace(BASE, layer_norm=True),
    "layer_norm_cifg_peephole_projection": replace(
        BASE, layer_norm=True, cifg=True, peephole=True, projection=True, proj_bias=True
    ),
    "cell_clip": replace(BASE, cell_clip=0.3),
    "proj_clip": replace(BASE, projection=True, proj_clip=0.2),
    "relu": replace(BASE, activation="RELU"),
    "diagonal_recurrent": replace(BASE, diagonal=True),
    "diagonal_recurrent_cifg_peephole": replace(BASE, diagonal=True, cifg=True, peephole=True),
    "batch1_long": replace(BASE, batch=1, time=12, n_in=7, n_cell=16),
    "everything_time_major": replace(
        BASE,
        time_major=True,
        peephole=True,
        projection=True,
        proj_bias=True,
        layer_norm=True,
        cell_clip=0.5,
        proj_clip=0.4,
    ),
}


def _weights(g: SubgraphBuilder, cfg: Cfg, rng: np.random.Generator) -> list[int]:
    """The 24 (or 20) weight inputs after the input, -1 where absent."""

    def const(name: str, *shape: int) -> int:
        return g.const(name, rng.uniform(-0.6, 0.6, shape).astype(np.float32))

    gates = ("i", "f", "c", "o")
    no_input = cfg.cifg
    recurrent_shape = (cfg.n_cell,) if cfg.diagonal else (cfg.n_cell, cfg.n_out)
    ins = [-1 if (k == "i" and no_input) else const(f"wx_{k}", cfg.n_cell, cfg.n_in) for k in gates]
    ins += [-1 if (k == "i" and no_input) else const(f"wh_{k}", *recurrent_shape) for k in gates]
    ins += [
        const(f"peep_{k}", cfg.n_cell) if cfg.peephole and not (k == "i" and no_input) else -1
        for k in ("i", "f", "o")
    ]
    ins += [-1 if (k == "i" and no_input) else const(f"b_{k}", cfg.n_cell) for k in gates]
    ins.append(const("proj_w", cfg.n_out, cfg.n_cell) if cfg.projection else -1)
    ins.append(const("proj_b", cfg.n_out) if cfg.proj_bias else -1)
    return ins


def _layer_norm(g: SubgraphBuilder, cfg: Cfg, rng: np.random.Generator) -> list[int]:
    if not cfg.layer_norm:
        return []
    return [
        -1
        if (k == "i" and cfg.cifg)
        else g.const(f"ln_{k}", rng.uniform(0.5, 1.5, cfg.n_cell).astype(np.float32))
        for k in ("i", "f", "c", "o")
    ]


def build_lstm(cfg: Cfg, op: str) -> bytes:
    """A one-op model: the sequence LSTM (rank-3 input) or the full LSTM step (rank 2)."""
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    g = b.main
    seq = op == "UNIDIRECTIONAL_SEQUENCE_LSTM"
    lead = (cfg.time, cfg.batch) if cfg.time_major else (cfg.batch, cfg.time)
    x = g.input("x", (*lead, cfg.n_in) if seq else (cfg.batch, cfg.n_in))
    weights = _weights(g, cfg, rng)
    h = g.tensor("h", (cfg.batch, cfg.n_out), is_variable=True)
    c = g.tensor("c", (cfg.batch, cfg.n_cell), is_variable=True)
    y = g.tensor("y", (*lead, cfg.n_out) if seq else (cfg.batch, cfg.n_out))
    options = dict(
        fused_activation_function=cfg.activation, cell_clip=cfg.cell_clip, proj_clip=cfg.proj_clip
    )
    version = 1
    if seq:
        options["time_major"] = cfg.time_major
    if cfg.diagonal:
        options["diagonal_recurrent_tensors"] = True
        version = 4
    g.op(op, [x, *weights, h, c, *_layer_norm(g, cfg, rng)], [y], version=version, **options)
    g.output(y)
    return b.build()


def build_basic_lstm(batch: int, n_in: int, n_out: int) -> bytes:
    """The 5-input basic LSTM (kernel_type BASIC, version 2) with its 4 outputs."""
    rng = np.random.default_rng(1)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (batch, n_in))
    h = g.input("h_prev", (batch, n_out))
    c = g.input("c_prev", (batch, n_out))
    w = g.const("w", rng.uniform(-0.5, 0.5, (4 * n_out, n_in + n_out)).astype(np.float32))
    bias = g.const("bias", rng.uniform(-0.5, 0.5, 4 * n_out).astype(np.float32))
    outs = [
        g.tensor("h", (batch, n_out)),
        g.tensor("c", (batch, n_out)),
        g.tensor("concat", (batch, n_in + n_out)),
        g.tensor("activ", (batch, 4 * n_out)),
    ]
    g.op("LSTM", [x, h, w, bias, c], outs, version=2, kernel_type="BASIC")
    g.output(*outs)
    return b.build()


def assert_same(expected: list, got: list) -> None:
    for step, (e_outs, g_outs) in enumerate(zip(expected, got, strict=True)):
        assert len(e_outs) == len(g_outs)
        for k, (e, g) in enumerate(zip(e_outs, g_outs, strict=True)):
            assert g.shape == e.shape and g.dtype == e.dtype, f"invoke {step} output {k}"
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"invoke {step} out {k}")


def _inputs(shapes: list[tuple[int, ...]], seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.uniform(-1, 1, s).astype(np.float32) for s in shapes] for _ in range(INVOKES)]


@pytest.mark.parametrize("cfg", CONFIGS.values(), ids=CONFIGS.keys())
def test_unidirectional_sequence_lstm(cfg: Cfg) -> None:
    model = build_lstm(cfg, "UNIDIRECTIONAL_SEQUENCE_LSTM")
    lead = (cfg.time, cfg.batch) if cfg.time_major else (cfg.batch, cfg.time)
    assert_same(*run_both_invokes(model, _inputs([(*lead, cfg.n_in)], seed=2)))


FULL_CONFIGS = {
    k: CONFIGS[k]
    for k in (
        "plain",
        "peephole",
        "projection_bias",
        "cifg",
        "layer_norm",
        "cell_clip",
        "proj_clip",
    )
}


@pytest.mark.parametrize("cfg", FULL_CONFIGS.values(), ids=FULL_CONFIGS.keys())
def test_lstm_full(cfg: Cfg) -> None:
    model = build_lstm(cfg, "LSTM")
    assert_same(*run_both_invokes(model, _inputs([(cfg.batch, cfg.n_in)], seed=3)))


@pytest.mark.parametrize("batch,n_in,n_out", [(1, 3, 4), (2, 5, 8)], ids=["b1", "b2"])
def test_lstm_basic(batch: int, n_in: int, n_out: int) -> None:
    model = build_basic_lstm(batch, n_in, n_out)
    shapes = [(batch, n_in), (batch, n_out), (batch, n_out)]
    assert_same(*run_both_invokes(model, _inputs(shapes, seed=4)))


def test_reset_variables_restarts_the_sequence() -> None:
    """After reset_variables the state is zero again: the first invoke repeats."""
    model = build_lstm(BASE, "UNIDIRECTIONAL_SEQUENCE_LSTM")
    it = Interpreter(read_model(model))
    x = _inputs([(BASE.batch, BASE.time, BASE.n_in)], seed=5)[0]
    first = it.invoke(x)[0]
    assert not np.allclose(it.invoke(x)[0], first)
    it.reset_variables()
    np.testing.assert_array_equal(it.invoke(x)[0], first)


@pytest.mark.parametrize("op,version", [("UNIDIRECTIONAL_SEQUENCE_LSTM", 2), ("LSTM", 3)])
def test_hybrid_versions_fail_before_running(op: str, version: int) -> None:
    """Hybrid (int8-weight) LSTM versions are not implemented: named at set-up."""
    b = ModelBuilder()
    x, y = b.main.input("x", (1, 2, 3)), b.main.tensor("y", (1, 2, 3))
    b.main.op(op, [x] * MIN_INPUTS[op], [y], version=version)  # enough inputs to pass validation
    b.main.output(y)
    with pytest.raises(ModelError, match=rf"{op} v{version}\): op {op} version {version} is not"):
        Interpreter(read_model(b.build()))
