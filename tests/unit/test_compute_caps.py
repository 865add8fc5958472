"""The compute and memory caps a hostile model meets before and while it runs: multiply-
adds per op and per model (delegate_runtime/macs.py, checked when the model is read) and
the bytes a subgraph holds at once (the interpreter)."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.macs import op_macs
from delegate_runtime.reader import Limits


def fully_connected(rows: int, depth: int, units: int) -> bytes:
    """x [rows, depth] times runtime weights w [units, depth]: a file of a few hundred
    bytes that declares rows * units * depth multiply-adds."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (rows, depth))
    w = g.input("w", (units, depth))
    y = g.tensor("y", (rows, units))
    g.op("FULLY_CONNECTED", [x, w, -1], [y])
    g.output(y)
    return b.build()


def test_a_kilobyte_fully_connected_asking_for_a_teramac_is_refused_before_it_runs():
    raw = fully_connected(16384, 4096, 16384)  # each tensor within the byte caps
    assert len(raw) < 1024
    with pytest.raises(
        ModelError,
        match=r"FULLY_CONNECTED.*: 1099511627776 multiply-adds "
        r"exceed the cap of 100000000000 per op",
    ):
        read_model(raw)


def test_the_model_total_is_capped_too():
    raw = fully_connected(64, 64, 64)  # 262144 multiply-adds
    model = read_model(raw)
    sg = model.main
    assert op_macs(sg, sg.operators[0]) == 64 * 64 * 64
    with pytest.raises(ModelError, match="total 262144 multiply-adds, over the cap of 1000 "):
        read_model(raw, Limits(max_model_macs=1000))


@pytest.mark.parametrize(
    ("op", "w_shape", "out_shape", "want"),
    [
        ("CONV_2D", (8, 3, 3, 4), (1, 10, 10, 8), 10 * 10 * 8 * 3 * 3 * 4),
        ("DEPTHWISE_CONV_2D", (1, 3, 3, 4), (1, 10, 10, 4), 10 * 10 * 4 * 3 * 3),
    ],
)
def test_convolutions_count_a_window_per_output(op, w_shape, out_shape, want):
    """The textbook counts (MobileNet v1 comes to its published 569 M this way)."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 12, 12, 4))
    w = g.const("w", np.zeros(w_shape, np.float32))
    y = g.tensor("y", out_shape)
    extra = {"depth_multiplier": 1} if op == "DEPTHWISE_CONV_2D" else {}
    g.op(op, [x, w, -1], [y], padding=1, stride_h=1, stride_w=1, **extra)
    g.output(y)
    sg = read_model(b.build()).main
    assert op_macs(sg, sg.operators[0]) == want


def test_the_bytes_a_subgraph_holds_at_once_are_capped_while_it_runs():
    """Three 4 MiB tensors made one after another, each still needed at the end: the
    third passes a 10 MiB cap, and the error names the op that passed it."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1024, 1024))
    a, c, d = (g.tensor(n, (1024, 1024)) for n in "acd")
    g.op("RELU", [x], [a])
    g.op("RELU", [a], [c])
    g.op("RELU", [c], [d])
    g.output(a, c, d)
    model = read_model(b.build())
    x_in = np.ones((1024, 1024), np.float32)
    assert len(Interpreter(model).invoke([x_in])) == 3  # the default cap: 3 GiB
    capped = Interpreter(model, limits=Limits(max_total_bytes=10 << 20))
    with pytest.raises(ModelError, match=r"RELU.*total 12\.0 MiB, over the cap of 10\.0 MiB"):
        capped.invoke([x_in])


def test_what_is_freed_no_longer_counts():
    """A chain whose tensors die as it goes holds two at a time, however long it is."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1024, 1024))
    for i in range(6):
        y = g.tensor(f"t{i}", (1024, 1024))
        g.op("RELU", [x], [y])
        x = y
    g.output(x)
    model = read_model(b.build())
    out = Interpreter(model, limits=Limits(max_total_bytes=10 << 20)).invoke(
        [np.ones((1024, 1024), np.float32)]
    )
    assert out[0].shape == (1024, 1024)
