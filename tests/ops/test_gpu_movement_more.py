"""MIRROR_PAD, PADV2, TILE, PACK, UNPACK, SPLIT and SPLIT_V on our GPU delegate in fp32
and fp16, against LiteRT's reference kernels; and the conditions LiteRT's delegate
refuses, refused by ours with TFLite's reason.

Each model must be delegated whole. These ops only move values, so fp16 storage rounds
each value once and the comparison's fp16 tolerance covers it. LiteRT's GPU delegate
crashed the whole process (illegal instruction) on an UNPACK model; ours takes UNPACK on
every axis.
"""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.gpu.support import TYPE_SHAPE, supports
from tests.ops.oneop import Const, In, one_op
from tests.ops.test_gpu_beyond_vision import check_against_litert, uniform
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("opencl_device")


def support(model: bytes) -> tuple[bool, str]:
    """Whether our delegate takes the model's one op, and why not."""
    sg = read_model(model).subgraphs[0]
    return supports(sg.operators[0], sg)


def padded(shape: tuple, pads: list) -> tuple:
    return tuple(a + d + b for d, (a, b) in zip(shape, pads, strict=True))


# -- MIRROR_PAD and PADV2 -----------------------------------------------------------------------

#: case -> (input shape, paddings, mode); LiteRT takes REFLECT on 3-D and 4-D inputs, ours
#: SYMMETRIC and ranks 1 and 2 too
MIRROR_PAD_CASES = {
    "reflect-hw": ((1, 4, 5, 6), [[0, 0], [1, 2], [2, 1], [0, 0]], "REFLECT"),
    "reflect-every-dim-at-most": ((2, 3, 4, 5), [[1, 1], [2, 0], [0, 3], [4, 2]], "REFLECT"),
    "reflect-3d": ((4, 5, 6), [[1, 2], [3, 4], [0, 5]], "REFLECT"),
    "reflect-2d": ((5, 6), [[4, 1], [2, 5]], "REFLECT"),
    "symmetric-4d-at-most": ((1, 4, 5, 6), [[0, 0], [4, 1], [0, 5], [3, 6]], "SYMMETRIC"),
    "symmetric-1d": ((7,), [[7, 3]], "SYMMETRIC"),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", MIRROR_PAD_CASES)
def test_mirror_pad(case: str, precision: str) -> None:
    shape, pads, mode = MIRROR_PAD_CASES[case]
    x = uniform(f"mirror_{case}", -3, 3, shape)
    model, feeds = one_op(
        "MIRROR_PAD", [In(x), Const(pads)], [(padded(shape, pads), np.float32)], mode=mode
    )
    check_against_litert(model, feeds, precision)


#: case -> (input shape, paddings, pad value or None: PADV2 without its third input)
PADV2_CASES = {
    "hw": ((1, 4, 5, 6), [[0, 0], [1, 2], [2, 1], [0, 0]], -1.5),
    "every-dim": ((2, 3, 4, 5), [[1, 0], [0, 2], [3, 1], [2, 2]], 7.25),
    "3d": ((4, 5, 6), [[1, 1], [0, 2], [3, 0]], 0.5),
    "2d": ((5, 6), [[2, 1], [0, 3]], -4.0),
    "no-value-input": ((1, 4, 5, 6), [[0, 0], [2, 2], [1, 1], [0, 1]], None),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", PADV2_CASES)
def test_padv2(case: str, precision: str) -> None:
    shape, pads, value = PADV2_CASES[case]
    x = uniform(f"padv2_{case}", -3, 3, shape)
    args = [In(x), Const(pads)] + ([] if value is None else [Const(value, np.float32)])
    model, feeds = one_op("PADV2", args, [(padded(shape, pads), np.float32)])
    check_against_litert(model, feeds, precision)


def test_mirror_pad_v3_is_refused_as_litert_does() -> None:
    """LiteRT's PadOperationParser takes versions 1 and 2 (v3: int16 inputs)."""
    x = np.zeros((1, 4, 5, 6), np.int16)
    pads = [[0, 0], [1, 1], [1, 1], [0, 0]]
    model, _ = one_op(
        "MIRROR_PAD", [In(x), Const(pads)], [((1, 6, 7, 6), np.int16)], version=3, mode="REFLECT"
    )
    assert support(model) == (False, "Max version supported: 2. Requested version 3.")


def test_mirror_pad_too_large_for_one_mirror_is_refused() -> None:
    x = np.zeros((1, 4, 5, 6), np.float32)
    pads = [[0, 0], [4, 0], [0, 0], [0, 0]]  # REFLECT takes at most 3 on a dimension of 4
    model, _ = one_op(
        "MIRROR_PAD", [In(x), Const(pads)], [((1, 8, 5, 6), np.float32)], mode="REFLECT"
    )
    ok, why = support(model)
    assert not ok and "do not fit one mirror" in why


def test_padv2_runtime_value_is_refused_as_litert_does() -> None:
    x = np.zeros((1, 4, 5, 6), np.float32)
    value = np.zeros((), np.float32)
    pads = [[0, 0], [1, 1], [1, 1], [0, 0]]
    model, _ = one_op("PADV2", [In(x), Const(pads), In(value)], [((1, 6, 7, 6), np.float32)])
    assert support(model) == (
        False,
        "Expected 1 runtime input tensor(s), but node has 2 runtime input(s).",
    )


# -- TILE -------------------------------------------------------------------------------------

#: case -> (input shape, multiples, multiples' type)
TILE_CASES = {
    "hw": ((1, 4, 5, 6), (1, 2, 3, 1), np.int32),
    "every-dim": ((2, 3, 4, 5), (2, 1, 2, 3), np.int32),
    "3d": ((4, 5, 6), (1, 3, 2), np.int32),
    "2d": ((3, 4), (3, 2), np.int32),
    "1d": ((5,), (4,), np.int32),
    "int64-multiples": ((1, 4, 5, 6), (2, 1, 1, 2), np.int64),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", TILE_CASES)
def test_tile(case: str, precision: str) -> None:
    shape, multiples, mtype = TILE_CASES[case]
    x = uniform(f"tile_{case}", -3, 3, shape)
    out = tuple(d * m for d, m in zip(shape, multiples, strict=True))
    model, feeds = one_op("TILE", [In(x), Const(multiples, mtype)], [(out, np.float32)])
    check_against_litert(model, feeds, precision)


def test_tile_5d_is_refused_as_litert_does() -> None:
    """LiteRT's TILE check passes; its tensor rule refuses 5-D tensors, as ours."""
    x = np.zeros((1, 2, 3, 4, 5), np.float32)
    model, _ = one_op("TILE", [In(x), Const((1, 1, 1, 1, 2))], [((1, 2, 3, 4, 10), np.float32)])
    assert support(model) == (False, TYPE_SHAPE)


def test_tile_runtime_multiples_are_refused() -> None:
    """LiteRT refuses a second runtime input ("Expected 1 runtime input tensor(s)"); ours
    refuses it one step earlier, by its int32 type (the reason TFLite gives for the types)."""
    x = np.zeros((1, 4, 5, 6), np.float32)
    multiples = np.array([1, 2, 1, 1], np.int32)
    model, _ = one_op("TILE", [In(x), In(multiples)], [((1, 8, 5, 6), np.float32)])
    assert support(model) == (False, TYPE_SHAPE)


# -- PACK and UNPACK --------------------------------------------------------------------------

#: case -> (shape of each input, number of inputs, axis, which inputs are constants)
PACK_CASES = {
    "3d-axis0": ((3, 4, 5), 3, 0, ()),
    "3d-axis1": ((3, 4, 5), 3, 1, ()),
    "3d-axis2": ((3, 4, 5), 2, 2, ()),
    "3d-axis3": ((3, 4, 5), 4, 3, ()),
    "3d-axis-minus1": ((3, 4, 5), 2, -1, ()),
    "2d-axis1": ((4, 6), 5, 1, ()),
    "1d-axis0": ((6,), 3, 0, ()),
    "one-input": ((2, 3, 4), 1, 1, ()),
    "with-a-constant": ((2, 3, 4), 3, 2, (1,)),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", PACK_CASES)
def test_pack(case: str, precision: str) -> None:
    shape, n, axis, constants = PACK_CASES[case]
    xs = [uniform(f"pack_{case}_{k}", -3, 3, shape) for k in range(n)]
    args = [Const(x, np.float32) if k in constants else In(x) for k, x in enumerate(xs)]
    out = np.stack(xs, axis=axis).shape
    model, feeds = one_op("PACK", args, [(out, np.float32)], values_count=n, axis=axis)
    check_against_litert(model, feeds, precision)


#: case -> (input shape, axis)
UNPACK_CASES = {
    "4d-axis0": ((2, 3, 4, 5), 0),
    "4d-axis1": ((2, 3, 4, 5), 1),
    "4d-axis2": ((2, 3, 4, 5), 2),
    "4d-axis3": ((2, 3, 4, 5), 3),
    "4d-axis-minus2": ((2, 3, 4, 5), -2),
    "3d-axis1": ((4, 3, 6), 1),
    "2d-axis0": ((3, 7), 0),
    "1d-to-scalars": ((4,), 0),
    "one-output": ((1, 4, 5), 0),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", UNPACK_CASES)
def test_unpack(case: str, precision: str) -> None:
    shape, axis = UNPACK_CASES[case]
    x = uniform(f"unpack_{case}", -3, 3, shape)
    parts = [np.take(x, k, axis=axis) for k in range(shape[axis])]
    outs = [(p.shape, np.float32) for p in parts]
    model, feeds = one_op("UNPACK", [In(x)], outs, num=len(parts), axis=axis)
    check_against_litert(model, feeds, precision)


def unpack_add_pack_model() -> bytes:
    """UNPACK's four outputs, two of them summed and two scaled, PACKed back: a node with
    several outputs inside one partition, each read by another node."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (4, 3, 5))
    parts = [g.tensor(f"part{k}", (3, 5)) for k in range(4)]
    g.op("UNPACK", [x], parts, num=4, axis=0)
    total = g.tensor("total", (3, 5))
    g.op("ADD", [parts[0], parts[3]], [total])
    two = g.const("two", np.float32(2.0))
    doubled = g.tensor("doubled", (3, 5))
    g.op("MUL", [parts[1], two], [doubled])
    y = g.tensor("y", (3, 3, 5))
    g.op("PACK", [total, doubled, parts[2]], [y], values_count=3, axis=0)
    g.output(y)
    return b.build()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_unpack_add_pack_in_one_partition(precision: str) -> None:
    check_against_litert(
        unpack_add_pack_model(), [uniform("unpack_chain", -3, 3, (4, 3, 5))], precision
    )


def test_pack_of_int32_tensors_is_refused_as_litert_does() -> None:
    """LiteRT's PACK check passes; its tensor rule refuses runtime int32 tensors, as ours."""
    x = np.zeros((2, 3), np.int32)
    model, _ = one_op("PACK", [In(x), In(x)], [((2, 2, 3), np.int32)], values_count=2, axis=0)
    assert support(model) == (False, TYPE_SHAPE)


def test_unpack_5d_is_refused_as_litert_does() -> None:
    x = np.zeros((2, 1, 2, 3, 4), np.float32)
    outs = [((1, 2, 3, 4), np.float32)] * 2
    model, _ = one_op("UNPACK", [In(x)], outs, num=2, axis=0)
    assert support(model) == (False, TYPE_SHAPE)


# -- SPLIT and SPLIT_V ------------------------------------------------------------------------

#: case -> (input shape, axis, number of parts)
SPLIT_CASES = {
    "4d-channels": ((1, 4, 6, 8), 3, 4),
    "4d-height": ((1, 4, 6, 8), 1, 2),
    "4d-batch": ((4, 3, 2, 5), 0, 4),
    "4d-axis-minus2": ((1, 4, 6, 8), -2, 3),
    "2d-axis0": ((6, 4), 0, 3),
    "1d": ((12,), 0, 4),
    "one-part": ((1, 4, 6, 8), 3, 1),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", SPLIT_CASES)
def test_split(case: str, precision: str) -> None:
    shape, axis, n = SPLIT_CASES[case]
    x = uniform(f"split_{case}", -3, 3, shape)
    outs = [(p.shape, np.float32) for p in np.split(x, n, axis=axis)]
    model, feeds = one_op("SPLIT", [Const(np.int32(axis)), In(x)], outs, num_splits=n)
    check_against_litert(model, feeds, precision)


#: case -> (input shape, axis, size_splits)
SPLIT_V_CASES = {
    "4d-channels": ((1, 4, 6, 8), 3, (1, 3, 4)),
    "4d-width-minus-one": ((1, 4, 6, 8), 2, (2, -1, 3)),
    "4d-batch": ((3, 2, 2, 5), 0, (2, 1)),
    "3d-axis-minus1": ((4, 5, 7), -1, (3, 4)),
    "2d-axis0": ((5, 6), 0, (2, 3)),
    "one-part": ((2, 3, 4), 1, (3,)),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", SPLIT_V_CASES)
def test_split_v(case: str, precision: str) -> None:
    shape, axis, sizes = SPLIT_V_CASES[case]
    x = uniform(f"split_v_{case}", -3, 3, shape)
    real = list(sizes)
    if -1 in real:
        real[real.index(-1)] = shape[axis] - (sum(real) + 1)
    parts = np.split(x, np.cumsum(real)[:-1], axis=axis)
    outs = [(p.shape, np.float32) for p in parts]
    model, feeds = one_op(
        "SPLIT_V", [In(x), Const(sizes), Const(np.int32(axis))], outs, num_splits=len(sizes)
    )
    check_against_litert(model, feeds, precision)


def test_split_of_int32_is_refused_as_litert_does() -> None:
    """SPLIT v3 (int32 data): LiteRT's check passes, its tensor rule refuses, as ours."""
    x = np.zeros((2, 4), np.int32)
    outs = [((2, 2), np.int32)] * 2
    model, _ = one_op("SPLIT", [Const(np.int32(1)), In(x)], outs, version=3, num_splits=2)
    assert support(model) == (False, TYPE_SHAPE)


def test_split_v_5d_is_refused_as_litert_does() -> None:
    x = np.zeros((1, 2, 2, 3, 4), np.float32)
    outs = [((1, 2, 2, 3, 1), np.float32), ((1, 2, 2, 3, 3), np.float32)]
    model, _ = one_op("SPLIT_V", [In(x), Const((1, 3)), Const(np.int32(4))], outs, num_splits=2)
    assert support(model) == (False, TYPE_SHAPE)


# -- int8 models ------------------------------------------------------------------------------

#: The grid of every int8 tensor below: these ops move values, so the output keeps it.
Q8 = Quant(0.02, -5)


def int8_model(case: str) -> tuple[bytes, list[np.ndarray]]:
    """One int8 op (its int8 version) on an int8 input, every tensor on the Q8 grid."""
    rng = np.random.default_rng(len(case))
    x = rng.integers(-128, 128, (1, 4, 5, 6)).astype(np.int8)
    pads = [[0, 0], [1, 2], [2, 1], [1, 0]]
    pad_out = (1, 7, 8, 7)
    if case == "padv2":
        value = Const(np.int8(17), np.int8, Q8)  # raw: written as it is (0.44 on the grid)
        return one_op("PADV2", [In(x, Q8), Const(pads), value], [(pad_out, np.int8, Q8)], 2)
    if case == "mirror_pad":
        args = [In(x, Q8), Const(pads)]
        return one_op("MIRROR_PAD", args, [(pad_out, np.int8, Q8)], 2, mode="REFLECT")
    if case == "tile":
        args = [In(x, Q8), Const((2, 1, 2, 1))]
        return one_op("TILE", args, [((2, 4, 10, 6), np.int8, Q8)], 3)
    if case == "pack":
        args = [In(x[0], Q8), In(x[0, ::-1].copy(), Q8)]
        return one_op("PACK", args, [((4, 2, 5, 6), np.int8, Q8)], 2, values_count=2, axis=1)
    if case == "unpack":
        outs = [((1, 5, 6), np.int8, Q8)] * 4
        return one_op("UNPACK", [In(x, Q8)], outs, 2, num=4, axis=1)
    if case == "split":
        outs = [((1, 4, 5, 3), np.int8, Q8)] * 2
        return one_op("SPLIT", [Const(np.int32(3)), In(x, Q8)], outs, 2, num_splits=2)
    outs = [((1, 4, 2, 6), np.int8, Q8), ((1, 4, 3, 6), np.int8, Q8)]
    args = [In(x, Q8), Const((2, 3)), Const(np.int32(2))]
    return one_op("SPLIT_V", args, outs, 2, num_splits=2)


INT8_CASES = ("padv2", "mirror_pad", "tile", "pack", "unpack", "split", "split_v")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", INT8_CASES)
def test_int8(case: str, precision: str) -> None:
    model, feeds = int8_model(case)
    check_against_litert(model, feeds, precision)
