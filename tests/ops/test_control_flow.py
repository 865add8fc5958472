"""WHILE, IF, CALL_ONCE (with resource variables) and multi-signature models against LiteRT."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_matches_litert

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, SubgraphBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from tests.ops.conftest import litert_interpreter

#: TensorType code of RESOURCE, which the builder cannot write: tests patch it in.
RESOURCE = 13


def _scalar(v: int) -> np.ndarray:
    return np.array(v, np.int32)


# -- WHILE ------------------------------------------------------------------------------


def _less_cond(b: ModelBuilder, extra: list[tuple[tuple[int, ...], type]]) -> SubgraphBuilder:
    """cond(i, n, *extra) = i < n."""
    cond = b.subgraph("cond")
    i, n = cond.input("i", (), np.int32), cond.input("n", (), np.int32)
    for k, (shape, dtype) in enumerate(extra):
        cond.input(f"extra{k}", shape, dtype)
    less = cond.tensor("less", (), np.bool_)
    cond.op("LESS", [i, n], [less])
    cond.output(less)
    return cond


def build_counting_while() -> bytes:
    """for i in range(i0, n): x = x * 1.5 + 1; outputs (i, x)."""
    b = ModelBuilder()
    g = b.main
    i, n, x = g.input("i", (), np.int32), g.input("n", (), np.int32), g.input("x", (3,))
    outs = [
        g.tensor("i_out", (), np.int32),
        g.tensor("n_out", (), np.int32),
        g.tensor("x_out", (3,)),
    ]
    cond = _less_cond(b, [((3,), np.float32)])
    body = b.subgraph("body")
    bi, bn, bx = body.input("i", (), np.int32), body.input("n", (), np.int32), body.input("x", (3,))
    one = body.const("one", _scalar(1))
    i1 = body.tensor("i1", (), np.int32)
    body.op("ADD", [bi, one], [i1])
    scaled, x1 = body.tensor("scaled", (3,)), body.tensor("x1", (3,))
    body.op("MUL", [bx, body.const("k", np.float32([1.5]))], [scaled])
    body.op("ADD", [scaled, body.const("c", np.float32([1.0]))], [x1])
    body.output(i1, bn, x1)
    g.op("WHILE", [i, n, x], outs, cond_subgraph_index=cond.index, body_subgraph_index=body.index)
    g.output(outs[0], outs[2])
    return b.build()


@pytest.mark.parametrize("start,stop", [(0, 0), (0, 1), (0, 5), (3, 10), (7, 2)])
def test_while_counting_loop(start: int, stop: int) -> None:
    x = np.float32([0.5, -1.0, 2.0])
    i, out = assert_matches_litert(build_counting_while(), [_scalar(start), _scalar(stop), x])
    assert i.reshape(-1)[0] == max(start, stop)


def _if_subgraphs(b: ModelBuilder, shape: tuple[int, ...]) -> tuple[SubgraphBuilder, ...]:
    """then(x, y) = x + y; else(x, y) = x * y."""
    branches = []
    for name, op in (("then", "ADD"), ("else", "MUL")):
        sg = b.subgraph(name)
        x, y, z = sg.input("x", shape), sg.input("y", shape), sg.tensor("z", shape)
        sg.op(op, [x, y], [z])
        sg.output(z)
        branches.append(sg)
    return tuple(branches)


def build_while_with_if() -> bytes:
    """A loop whose body branches: x = flag ? x + x : x * x, n times (calls nest twice)."""
    b = ModelBuilder()
    g = b.main
    shape = (2, 2)
    ins = [
        g.input("i", (), np.int32),
        g.input("n", (), np.int32),
        g.input("flag", (), np.bool_),
        g.input("x", shape),
    ]
    outs = [g.tensor(f"out{k}", g.tensors[t].shape, g.tensors[t].dtype) for k, t in enumerate(ins)]
    cond = _less_cond(b, [((), np.bool_), (shape, np.float32)])
    then_sg, else_sg = _if_subgraphs(b, shape)
    body = b.subgraph("body")
    bi, bn = body.input("i", (), np.int32), body.input("n", (), np.int32)
    bflag, bx = body.input("flag", (), np.bool_), body.input("x", shape)
    i1, x1 = body.tensor("i1", (), np.int32), body.tensor("x1", shape)
    body.op("ADD", [bi, body.const("one", _scalar(1))], [i1])
    body.op(
        "IF",
        [bflag, bx, bx],
        [x1],
        then_subgraph_index=then_sg.index,
        else_subgraph_index=else_sg.index,
    )
    body.output(i1, bn, bflag, x1)
    g.op("WHILE", ins, outs, cond_subgraph_index=cond.index, body_subgraph_index=body.index)
    g.output(outs[3])
    return b.build()


@pytest.mark.parametrize("flag", [True, False], ids=["double", "square"])
def test_while_body_calls_if(flag: bool) -> None:
    x = np.float32([[0.5, -1.0], [1.5, 0.9]])
    assert_matches_litert(build_while_with_if(), [_scalar(0), _scalar(3), np.bool_(flag), x])


# -- IF ---------------------------------------------------------------------------------


def build_if(shape: tuple[int, ...]) -> bytes:
    b = ModelBuilder()
    g = b.main
    c, x, y = g.input("cond", (), np.bool_), g.input("x", shape), g.input("y", shape)
    z = g.tensor("z", shape)
    then_sg, else_sg = _if_subgraphs(b, shape)
    g.op("IF", [c, x, y], [z], then_subgraph_index=then_sg.index, else_subgraph_index=else_sg.index)
    g.output(z)
    return b.build()


@pytest.mark.parametrize("shape", [(4,), (2, 3, 4)], ids=["1d", "3d"])
@pytest.mark.parametrize("cond", [True, False], ids=["then", "else"])
def test_if_branches(cond: bool, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(-2, 2, shape).astype(np.float32) for _ in range(2))
    out = assert_matches_litert(build_if(shape), [np.bool_(cond), x, y])[0]
    np.testing.assert_allclose(out, x + y if cond else x * y, rtol=1e-6)


def test_if_condition_must_be_one_bool() -> None:
    it = Interpreter(read_model(build_if((4,))))
    x = np.zeros(4, np.float32)
    with pytest.raises(ModelError, match="IF condition"):
        it.run_subgraph(0, [np.array([True, False]), x, x])


# -- CALL_ONCE and resource variables ----------------------------------------------------


def retype(model: bytes, names: set[str], type_code: int) -> bytes:
    """Rewrite the TensorType of the named tensors in place (the field is stored: int32)."""
    import tflite

    buf = bytearray(model)
    m = tflite.Model.GetRootAs(bytes(buf), 0)
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for k in range(sg.TensorsLength()):
            t = sg.Tensors(k)
            if t.Name().decode() in names:
                buf[t._tab.Pos + t._tab.Offset(6)] = type_code
    return bytes(buf)


def build_call_once_accumulator() -> bytes:
    """init: acc = [10, 20]; main: acc += x; return acc. Once means the sum carries on.

    The VAR_HANDLEs name no variable: ("", "") is one variable, shared by both subgraphs
    (the builder writes no string options yet)."""
    b = ModelBuilder()
    g = b.main
    init = b.subgraph("init")
    h0 = init.tensor("init_handle", (), np.int32)
    init.op("VAR_HANDLE", [], [h0])
    init.op("ASSIGN_VARIABLE", [h0, init.const("start", np.float32([10, 20]))], [])
    x = g.input("x", (2,))
    h, v, s = g.tensor("handle", (), np.int32), g.tensor("v", (2,)), g.tensor("s", (2,))
    g.op("CALL_ONCE", [], [], init_subgraph_index=init.index)
    g.op("VAR_HANDLE", [], [h])
    g.op("READ_VARIABLE", [h], [v])
    g.op("ADD", [v, x], [s])
    g.op("ASSIGN_VARIABLE", [h, s], [])
    g.output(s)
    return retype(b.build(), {"init_handle", "handle"}, RESOURCE)


@pytest.mark.parametrize("invokes", [1, 3])
def test_call_once_initialises_a_variable_once(invokes: int) -> None:
    model = build_call_once_accumulator()
    ref, ours = litert_interpreter(model), Interpreter(read_model(model))
    for k in range(invokes):
        x = np.float32([1.0, 0.5]) * (k + 1)
        ref.set_tensor(ref.get_input_details()[0]["index"], x)
        ref.invoke()
        expected = ref.get_tensor(ref.get_output_details()[0]["index"])
        np.testing.assert_allclose(ours.invoke([x])[0], expected, rtol=1e-6)


def test_read_before_assign_is_a_model_error() -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (2,))
    h, v, s = g.tensor("handle", (), np.int32), g.tensor("v", (2,)), g.tensor("s", (2,))
    g.op("VAR_HANDLE", [], [h])
    g.op("READ_VARIABLE", [h], [v])
    g.op("ADD", [v, x], [s])
    g.output(s)
    it = Interpreter(read_model(retype(b.build(), {"handle"}, RESOURCE)))
    with pytest.raises(ModelError, match="before any assign"):
        it.invoke([np.zeros(2, np.float32)])


# -- signatures -------------------------------------------------------------------------


def build_two_signatures() -> bytes:
    """'add' runs subgraph 0 (x + y); 'scale' runs subgraph 1 (x * 3)."""
    b = ModelBuilder()
    g = b.main
    x, y, z = g.input("x", (2, 3)), g.input("y", (2, 3)), g.tensor("z", (2, 3))
    g.op("ADD", [x, y], [z])
    g.output(z)
    s = b.subgraph("scale")
    sx, sz = s.input("v", (4,)), s.tensor("w", (4,))
    s.op("MUL", [sx, s.const("three", np.float32([3.0]))], [sz])
    s.output(sz)
    b.signature("add", g, {"lhs": x, "rhs": y}, {"sum": z})
    b.signature("scale", s, {"value": sx}, {"scaled": sz})
    return b.build()


SIGNATURE_INPUTS = {
    "add": {
        "lhs": np.full((2, 3), 1.5, np.float32),
        "rhs": np.arange(6, dtype=np.float32).reshape(2, 3),
    },
    "scale": {"value": np.float32([1, -2, 3, 0.25])},
}


@pytest.mark.parametrize("key", SIGNATURE_INPUTS)
def test_signatures_match_litert(key: str) -> None:
    model = build_two_signatures()
    inputs = SIGNATURE_INPUTS[key]
    expected = litert_interpreter(model).get_signature_runner(key)(**inputs)
    got = Interpreter(read_model(model)).invoke_signature(key, **inputs)
    assert got.keys() == expected.keys()
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-6)


# -- validation of the calls -------------------------------------------------------------


def test_while_body_arity_mismatch_is_named() -> None:
    model = bytearray(build_counting_while())
    b = ModelBuilder()
    g = b.main
    i, n, x = g.input("i", (), np.int32), g.input("n", (), np.int32), g.input("x", (3,))
    outs = [g.tensor(f"o{k}", (), np.int32) for k in range(3)]
    cond = _less_cond(b, [((3,), np.float32)])
    g.op("WHILE", [i, n, x], outs, cond_subgraph_index=cond.index, body_subgraph_index=cond.index)
    g.output(outs[0])
    with pytest.raises(ModelError, match=r"WHILE v1.*body subgraph 'cond' output count is 1"):
        read_model(b.build())
    assert model  # the well-formed model still reads
    read_model(bytes(model))


def test_subgraph_that_loops_on_itself_is_a_cycle() -> None:
    """Subgraph 1 is a WHILE body that runs a WHILE over itself: 1 -> 1."""
    b = ModelBuilder()
    g = b.main
    i, n = g.input("i", (), np.int32), g.input("n", (), np.int32)
    outs = [g.tensor("i_out", (), np.int32), g.tensor("n_out", (), np.int32)]
    body = b.subgraph("body")
    cond = _less_cond(b, [])
    bi, bn = body.input("i", (), np.int32), body.input("n", (), np.int32)
    bouts = [body.tensor("i1", (), np.int32), body.tensor("n1", (), np.int32)]
    body.op("WHILE", [bi, bn], bouts, cond_subgraph_index=cond.index, body_subgraph_index=1)
    body.output(*bouts)
    g.op("WHILE", [i, n], outs, cond_subgraph_index=cond.index, body_subgraph_index=body.index)
    g.output(*outs)
    with pytest.raises(ModelError, match=r"cycle: 0 -> 1 -> 1"):
        read_model(b.build())
