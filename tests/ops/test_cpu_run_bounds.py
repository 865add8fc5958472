"""Which CPU runs LiteRT may run (gpu/cpu_run_bounds.py): loops its constants bound and
integers that are data go to LiteRT; unbounded loops and runtime sizes stay on the
reference, which the job's limits reach. The outputs against LiteRT's own run."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu.cpu_run_bounds import MAX_LOOP_TRIPS, loop_trips, unbounded
from delegate_runtime.gpu.delegate import GpuSession
from tests.conftest import require
from tests.ops.conftest import run_litert
from tests.ops.test_gpu_ops import opencl_device  # noqa: F401  (the fixture)

I32 = np.iinfo(np.int32)


def counting_loop(
    start: int | None = 0,
    limit: int = 16,
    step: int = 1,
    compare: str = "LESS",
    activation: int = 0,
) -> bytes:
    """A WHILE over (i, acc): acc += 0.5 * acc + 1 while `compare`(i, limit), i += step;
    i starts at the constant `start` (None: a model input)."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4))
    i = g.input("i0", (), np.int32) if start is None else g.const("i0", np.int32(start))
    i_out, y = g.tensor("i_out", (), np.int32), g.tensor("y", (1, 4))
    cond = b.subgraph("cond")
    ci, _ = cond.input("i", (), np.int32), cond.input("acc", (1, 4))
    go = cond.tensor("go", (), np.bool_)
    bound = cond.const("limit", np.int32(limit))
    args = [bound, ci] if compare.startswith("GREATER") else [ci, bound]
    cond.op(compare, args, [go])
    cond.output(go)
    body = b.subgraph("body")
    bi, acc = body.input("i", (), np.int32), body.input("acc", (1, 4))
    bo, half, more = (
        body.tensor(n, s) for n, s in (("i1", ()), ("half", (1, 4)), ("acc1", (1, 4)))
    )
    body.tensors[bo].dtype = np.dtype(np.int32)
    body.op(
        "ADD", [bi, body.const("step", np.int32(step))], [bo], fused_activation_function=activation
    )
    body.op("MUL", [acc, body.const("k", np.float32(0.5))], [half])
    body.op("ADD", [half, body.const("one", np.float32(1))], [more])
    body.output(bo, more)
    g.op("WHILE", [i, x], [i_out, y], cond_subgraph_index=1, body_subgraph_index=2)
    g.output(y)
    return b.build()


def trips(data: bytes) -> int | None:
    model = read_model(data)
    return loop_trips(model, 0, model.main.operators[0])


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, 16),
        ({"start": 3, "limit": 10, "step": 2}, 4),  # 3 5 7 9
        ({"compare": "LESS_EQUAL", "limit": 10, "step": 5}, 3),  # 0 5 10
        ({"compare": "GREATER", "limit": 4}, 4),  # 4 > i
        ({"compare": "GREATER_EQUAL", "limit": 4}, 5),
        ({"start": 20}, 0),
        ({"start": None}, None),  # a counter starting at a runtime value
        ({"step": 0}, None),
        ({"step": -1}, None),
        ({"activation": 3}, None),  # RELU6 on the step caps the counter below the limit
        ({"start": I32.max - 3, "limit": I32.max - 1, "step": 5}, None),  # would wrap around
    ],
    ids=["less", "from3by2", "less_equal", "greater", "greater_equal", "none", "runtime_start",
         "step0", "step_down", "relu6_step", "wraps"],
)  # fmt: skip
def test_loop_trips(kwargs, want) -> None:
    assert trips(counting_loop(**kwargs)) == want


def test_a_loop_over_the_trip_cap_stays_on_the_reference() -> None:
    model = read_model(counting_loop(limit=MAX_LOOP_TRIPS + 1))
    assert "iterations, over the" in unbounded(model, [0])
    assert unbounded(read_model(counting_loop(limit=MAX_LOOP_TRIPS)), [0]) == ""


def test_an_unbounded_loop_stays_on_the_reference() -> None:
    from tests.fuzz.hostile import while_endless

    data, _ = while_endless()
    assert unbounded(read_model(data), [0]).startswith("WHILE: no constant bounds")


@pytest.mark.usefixtures("opencl_device")
def test_a_bounded_loop_runs_on_litert_as_litert_runs_it() -> None:
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    log = io.StringIO()
    s = GpuSession(read_model(counting_loop()), log=log)
    assert [run.runtime for run in s.cpu_runs] == ["litert"], log.getvalue()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 4)).astype(np.float32)
    np.testing.assert_allclose(s.invoke([x])[0], run_litert(counting_loop(), [x])[0], 1e-6)


def lookup_then(op: str) -> bytes:
    """Token ids (a runtime int32 input) into GATHER, then `op` reading the same ids: PAD
    as its paddings (a size) or ADD (data)."""
    b = ModelBuilder()
    g = b.main
    ids = g.input("ids", (2, 2), np.int32)
    table = g.const("table", np.arange(12, dtype=np.float32).reshape(6, 2))
    rows = g.tensor("rows", (2, 2, 2))
    g.op("GATHER", [table, ids], [rows], axis=0)
    if op == "PAD":
        out = g.tensor("padded", (2, 2, 2))
        g.op("PAD", [rows, ids], [out])
    else:
        out = g.tensor("sum", (2, 2), np.int32)
        g.op("ADD", [ids, ids], [out])
    g.output(rows, out)
    return b.build()


def test_ids_into_a_lookup_are_data_and_paddings_are_a_size() -> None:
    assert unbounded(read_model(lookup_then("ADD")), [0, 1]) == ""
    assert unbounded(read_model(lookup_then("PAD")), [0, 1]) == (
        "operator #1 (PAD v1) reads runtime integers (input 1): sizes the reference checks"
    )


def if_with_fill_branch() -> bytes:
    """IF whose then-branch FILLs a runtime-sized tensor: the branch runs inside LiteRT."""
    b = ModelBuilder()
    g = b.main
    flag = g.input("flag", (), np.bool_)
    dims = g.input("dims", (2,), np.int32)
    out = g.tensor("out", (2, 2))
    then = b.subgraph("then")
    tdims = then.input("dims", (2,), np.int32)
    filled = then.tensor("filled", (2, 2))
    then.op("FILL", [tdims, then.const("v", np.float32(1))], [filled])
    then.output(filled)
    other = b.subgraph("else")
    other.input("dims", (2,), np.int32)
    other.output(other.const("zeros", np.zeros((2, 2), np.float32)))
    g.op("IF", [flag, dims], [out], then_subgraph_index=1, else_subgraph_index=2)
    g.output(out)
    return b.build()


def test_a_branch_that_sizes_from_a_runtime_integer_stays_on_the_reference() -> None:
    why = unbounded(read_model(if_with_fill_branch()), [0])
    assert why == (
        "subgraph 1: operator #0 (FILL v1) reads runtime integers (input 0): sizes the "
        "reference checks"
    )


def call_once_with_fill() -> bytes:
    """CALL_ONCE whose init subgraph FILLs a tensor sized by a runtime-computed integer."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4))
    y = g.tensor("y", (1, 4))
    g.op("CALL_ONCE", [], [], init_subgraph_index=1)
    g.op("RELU", [x], [y])
    g.output(y)
    init = b.subgraph("init")
    dims = init.tensor("dims", (2,), np.int32)
    init.op(
        "ADD",
        [init.const("a", np.array([1, 2], np.int32)), init.const("b", np.array([1, 2], np.int32))],
        [dims],
    )
    filled = init.tensor("filled", (2, 4))
    init.op("FILL", [dims, init.const("v", np.float32(1))], [filled])
    return b.build()


def test_a_call_once_init_that_sizes_from_a_runtime_integer_stays_on_the_reference() -> None:
    why = unbounded(read_model(call_once_with_fill()), [0, 1])
    assert why == (
        "subgraph 1: operator #1 (FILL v1) reads runtime integers (input 0): sizes the "
        "reference checks"
    )


def one_op_on_runtime_ints(op: str, position: int) -> bytes:
    """`op` reading a runtime int32 tensor at input `position`, constants elsewhere."""
    b = ModelBuilder()
    g = b.main
    ints = g.input("ints", (2,), np.int32)

    def const(name: str, value: object) -> int:
        return g.const(name, np.asarray(value, np.float32 if name in ("on", "off") else np.int32))

    inputs = {
        ("RESHAPE", 0): lambda: [ints, const("shape", [2, 1])],
        ("RESHAPE", 1): lambda: [const("x", [0, 1, 2, 3]), ints],
        ("ONE_HOT", 0): lambda: [ints, const("depth", 3), const("on", 1), const("off", 0)],
        ("ONE_HOT", 1): lambda: [const("indices", [0, 1]), ints, const("on", 1), const("off", 0)],
        ("TOPK_V2", 0): lambda: [ints, const("k", 1)],
    }[(op, position)]()
    out = g.tensor("out", (2, 2))
    g.op(op, inputs, [out])
    g.output(out)
    return b.build()


@pytest.mark.parametrize(
    ("op", "position", "sizes"),
    [
        ("RESHAPE", 0, False),  # the tensor reshaped
        ("RESHAPE", 1, True),  # the new shape
        ("ONE_HOT", 0, False),  # the indices
        ("ONE_HOT", 1, True),  # the depth
        ("TOPK_V2", 0, False),  # the values ranked
    ],
)
def test_which_runtime_integers_may_size_a_tensor(op, position, sizes) -> None:
    why = unbounded(read_model(one_op_on_runtime_ints(op, position)), [0])
    assert bool(why) is sizes
    if sizes:
        assert f"reads runtime integers (input {position})" in why
