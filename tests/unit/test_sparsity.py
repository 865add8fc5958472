"""Sparse constant tensors: sparsify/densify round trips, the reader's view of them, and
each malformed SparsityParameters rule as its own case (a ModelError naming the tensor)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.reader import Limits
from delegate_runtime.sparsity import (
    DENSE,
    SPARSE_CSR,
    DimMetadata,
    Sparsity,
    densify,
    sparsify,
    summary,
)

D, S = DENSE, SPARSE_CSR


def sparse_dense(shape: tuple[int, ...], seed: int = 0, density: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape).astype(np.float32)
    return values * (rng.random(shape) < density)


# (shape, formats, traversal order, block map, block size, index type)
ROUND_TRIPS = [
    ((4, 6), [D, S], None, (), (), np.int32),
    ((4, 6), [S, S], None, (), (), np.uint8),
    ((4, 6), [S, D], [1, 0], (), (), np.uint16),
    ((4, 6), [D, D], None, (), (), np.int32),
    ((4, 6), [D, S, D], None, (1,), (3,), np.uint8),
    ((4, 6), [S, S, D, D], None, (0, 1), (2, 2), np.int32),
    ((8, 1, 1, 32), [D, D, D, S], None, (), (), np.uint8),
    ((3, 4, 5), [S, D, S], [2, 0, 1], (), (), np.uint16),
    ((2, 3, 4, 4), [D, S, D, S, D], [0, 3, 1, 2, 4], (3,), (2,), np.int32),
    ((300,), [S], None, (), (), np.uint16),
    ((0, 4), [D, S], None, (), (), np.int32),
]


@pytest.mark.parametrize(
    "shape,formats,order,block_map,block_size,index_type",
    ROUND_TRIPS,
    ids=[f"{c[0]}-{''.join(f[0] for f in c[1])}-{c[2]}-{c[3]}" for c in ROUND_TRIPS],
)
def test_round_trip(shape, formats, order, block_map, block_size, index_type) -> None:
    dense = sparse_dense(shape)
    values, sp = sparsify(dense, formats, order, block_map, block_size, index_type)
    np.testing.assert_array_equal(densify(values, shape, sp, "t"), dense)


def test_all_zero_sparse_stores_nothing() -> None:
    values, sp = sparsify(np.zeros((3, 5), np.float32), [D, S])
    assert values.size == 0 and sp.num_values == 0
    np.testing.assert_array_equal(densify(values, (3, 5), sp, "t"), np.zeros((3, 5)))


def test_repeated_coordinate_keeps_the_later_value() -> None:
    """TFLite writes values in order, so a coordinate stored twice holds the later one."""
    sp = Sparsity(
        (0,), (), (DimMetadata(S, 0, np.array([0, 3], np.int32), np.array([1, 1, 2])),), 3
    )
    got = densify(np.array([5.0, 7.0, 9.0], np.float32), (4,), sp, "t")
    np.testing.assert_array_equal(got, [0, 7, 9, 0])


def test_summary_gives_dense_and_stored_sizes() -> None:
    values, sp = sparsify(np.eye(8, dtype=np.float32), [D, S], index_type=np.uint8)
    line = summary("w", (8, 8), np.dtype(np.float32), sp)
    assert "256 bytes dense, 49 stored (81% saved)" in line  # 8 values, 9 + 8 index bytes


# -- the reader ---------------------------------------------------------------------------


def sparse_model(dense: np.ndarray, sp: Sparsity, values: np.ndarray) -> bytes:
    """DENSIFY of a sparse constant 'w_sparse' (tensor 0)."""
    b = ModelBuilder()
    g = b.main
    w = g.sparse_const("w_sparse", dense.shape, values, sp)
    y = g.tensor("y", dense.shape, dense.dtype)
    g.op("DENSIFY", [w], [y])
    g.output(y)
    return b.build()


def test_reader_densifies_and_records_sparsity() -> None:
    dense = sparse_dense((6, 8), seed=3)
    values, sp = sparsify(dense, [D, S, D], block_map=(1,), block_size=(2,))
    t = read_model(sparse_model(dense, sp, values)).main.tensors[0]
    np.testing.assert_array_equal(t.data, dense)
    assert not t.data.flags.writeable
    assert t.sparsity.num_values == values.size
    assert t.sparsity.traversal_order == (0, 1, 2) and t.sparsity.block_map == (1,)


def test_sparsity_of_a_runtime_tensor_is_ignored_as_in_tflite() -> None:
    dense = sparse_dense((2, 3))
    values, sp = sparsify(dense, [D, S])
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (2, 3))
    g.tensors[x].sparsity = replace(sp, traversal_order=(5, 5))  # nonsense, never read
    y = g.tensor("y", (2, 3))
    g.op("RELU", [x], [y])
    g.output(y)
    assert read_model(b.build()).main.tensors[x].sparsity is None


BASE = sparse_dense((4, 6), seed=1, density=0.5)
BASE_VALUES, BASE_SP = sparsify(BASE, [D, S])
BLOCK_VALUES, BLOCK_SP = sparsify(BASE, [D, S, D], block_map=(1,), block_size=(3,))


def _level(sp: Sparsity, i: int, **changes: object) -> Sparsity:
    dims = list(sp.dims)
    dims[i] = replace(dims[i], **changes)
    return replace(sp, dims=tuple(dims))


def _csr(sp: Sparsity) -> DimMetadata:
    return sp.dims[1]


#: (what, sparsity, values, message): each rule the reader enforces.
BAD = [
    ("traversal not a permutation", replace(BASE_SP, traversal_order=(0, 0)), None, "permutation"),
    ("traversal out of range", replace(BASE_SP, traversal_order=(0, 7)), None, "permutation"),
    ("traversal too short", replace(BASE_SP, traversal_order=(0,)), None, "traversal order of 1"),
    (
        "fewer metadata than levels",
        replace(BASE_SP, dims=BASE_SP.dims[:1]),
        None,
        "1 dimension metadata",
    ),
    ("block map without block levels", replace(BASE_SP, block_map=(1,)), None, "block map"),
    ("block map missing", replace(BLOCK_SP, block_map=()), None, "block map"),
    ("block map out of range", replace(BLOCK_SP, block_map=(2,)), None, "block map"),
    (
        "block levels out of order",
        replace(
            sparsify(BASE, [D, D, D, D], block_map=(0, 1), block_size=(2, 3))[1],
            traversal_order=(0, 1, 3, 2),
        ),
        sparsify(BASE, [D, D, D, D], block_map=(0, 1), block_size=(2, 3))[0],
        "block dimensions",
    ),
    ("block size not dividing", _level(BLOCK_SP, 2, dense_size=4), None, "not a multiple"),
    ("block size zero", _level(BLOCK_SP, 2, dense_size=0), None, "positive size"),
    ("sparse block level", _level(BLOCK_SP, 2, format=S), None, "must be DENSE"),
    ("dense size mismatch", _level(BASE_SP, 0, dense_size=5), None, "DENSE of size 5"),
    ("segments missing", _level(BASE_SP, 1, segments=None), None, "lacks its segments"),
    ("indices missing", _level(BASE_SP, 1, indices=None), None, "lacks its segments or indices"),
    (
        "too few segment bounds",
        _level(BASE_SP, 1, segments=_csr(BASE_SP).segments[:-1]),
        None,
        "segment bounds",
    ),
    (
        "segments decreasing",
        _level(BASE_SP, 1, segments=np.array([0, 5, 3, 9, 12], np.int32)),
        None,
        "never decrease",
    ),
    (
        "segments not starting at 0",
        _level(BASE_SP, 1, segments=_csr(BASE_SP).segments + 1),
        None,
        "start at 0",
    ),
    (
        "segments past the indices",
        _level(
            BASE_SP,
            1,
            segments=np.append(_csr(BASE_SP).segments[:-1], 200).astype(np.int32),
        ),
        None,
        "segments end at 200",
    ),
    (
        "index past the dimension",
        _level(
            BASE_SP, 1, indices=np.concatenate([[6], _csr(BASE_SP).indices[1:]]).astype(np.int32)
        ),
        None,
        "index 6 is outside",
    ),
    (
        "index past the dimension (uint8)",
        _level(BASE_SP, 1, indices=np.full(_csr(BASE_SP).indices.size, 255, np.uint8)),
        None,
        "index 255 is outside",
    ),
    (
        "negative index",
        _level(BASE_SP, 1, indices=-_csr(BASE_SP).indices - 1),
        None,
        "outside its dimension",
    ),
    ("one value too many", BASE_SP, np.append(BASE_VALUES, np.float32(1)), "buffer holds"),
    ("one value too few", BASE_SP, BASE_VALUES[:-1], "buffer holds"),
]


@pytest.mark.parametrize("what,sp,values,message", BAD, ids=[c[0] for c in BAD])
def test_malformed_sparsity_is_a_model_error_naming_the_tensor(what, sp, values, message) -> None:
    values = BASE_VALUES if values is None else values
    data = sparse_model(BASE, sp, values)
    with pytest.raises(ModelError, match=message) as err:
        read_model(data)
    assert "'w_sparse'" in str(err.value), str(err.value)


def test_sparse_buffer_of_partial_values_is_a_model_error() -> None:
    b = ModelBuilder()
    g = b.main
    w = g.sparse_const("w_sparse", BASE.shape, BASE_VALUES.view(np.uint8)[:-1], BASE_SP)
    g.tensors[w].dtype = np.dtype(np.float32)  # 4-byte values, a byte short
    y = g.tensor("y", BASE.shape)
    g.op("DENSIFY", [w], [y])
    g.output(y)
    with pytest.raises(ModelError, match="no whole number of float32 values"):
        read_model(b.build())


def test_dense_sizes_past_the_element_cap_stop_before_any_work() -> None:
    """A tensor too large to densify is refused on its shape, as any other tensor."""
    side = 1 << 20
    sp = Sparsity(
        (0, 1),
        (),
        (
            DimMetadata(D, side),
            DimMetadata(S, 0, np.zeros(side + 1, np.int32), np.zeros(0, np.int32)),
        ),
    )
    b = ModelBuilder()
    g = b.main
    w = g.sparse_const("w_sparse", (side, side), np.zeros(0, np.float32), sp)
    y = g.tensor("y", (side, side))
    g.op("DENSIFY", [w], [y])
    g.output(y)
    with pytest.raises(ModelError, match="exceed the cap"):
        read_model(b.build(), Limits(max_tensor_elements=1 << 24))


def test_inspect_lists_sparse_tensors_with_their_sizes(tmp_path, capsys) -> None:
    import argparse

    from delegate_runtime.commands import inspect

    values, sp = sparsify(np.eye(8, dtype=np.float32), [D, S], index_type=np.uint8)
    path = tmp_path / "sparse.tflite"
    path.write_bytes(sparse_model(np.eye(8, dtype=np.float32), sp, values))
    args = argparse.Namespace(model=str(path), tensors=False, no_quant=False)
    assert inspect.run(args) == 0
    out = capsys.readouterr().out
    assert "1 sparse tensors: 256 bytes dense, 49 stored" in out
    assert "t0    w_sparse [8, 8] float32 levels D,S: 256 bytes dense, 49 stored (81% saved)" in out


def test_sparsify_refuses_an_index_type_too_small() -> None:
    with pytest.raises(ValueError, match="overflow"):
        sparsify(np.ones((2, 300), np.float32), [D, S], index_type=np.uint8)


# -- fuzzing: hostile sparsity is a ModelError, never another exception or a hang ---------

SPARSITY_FUZZ = settings(
    max_examples=int(os.environ.get("SPARSITY_FUZZ_EXAMPLES", "300")),
    deadline=None,
    database=None,
    derandomize=os.environ.get("CI", "").lower() in ("1", "true", "yes"),
    suppress_health_check=[HealthCheck.too_slow],
)
HOSTILE = st.one_of(st.integers(-3, 12), st.sampled_from([255, 256, 65535, 2**31 - 1, -(2**31)]))
INDEX_TYPES = st.sampled_from([np.int32, np.uint16, np.uint8])


def _hostile_vector(draw: st.DrawFn) -> np.ndarray | None:
    if draw(st.integers(0, 9)) == 0:
        return None
    values = draw(st.lists(HOSTILE, max_size=12))
    dtype = np.dtype(draw(INDEX_TYPES))
    info = np.iinfo(dtype)
    return np.array([v % (int(info.max) + 1) if dtype.kind == "u" else v for v in values], dtype)


@st.composite
def hostile_sparsity(draw: st.DrawFn) -> tuple[tuple[int, ...], Sparsity, int]:
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=1, max_size=3)))
    levels = draw(st.integers(0, len(shape) + 2))
    order = tuple(draw(st.lists(HOSTILE, min_size=levels, max_size=levels)))
    block_map = tuple(draw(st.lists(HOSTILE, max_size=2)))
    dims = []
    for _ in range(draw(st.integers(0, levels + 1))):
        if draw(st.booleans()):
            dims.append(DimMetadata(D, dense_size=draw(HOSTILE)))
        else:
            dims.append(DimMetadata(S, 0, _hostile_vector(draw), _hostile_vector(draw)))
    return shape, Sparsity(order, block_map, tuple(dims)), draw(st.integers(0, 40))


@SPARSITY_FUZZ
@given(hostile_sparsity())
def test_hostile_sparsity_reads_or_is_a_model_error(case) -> None:
    shape, sp, n_values = case
    b = ModelBuilder()
    g = b.main
    w = g.sparse_const("w_sparse", shape, np.arange(n_values, dtype=np.float32), sp)
    y = g.tensor("y", shape)
    g.op("DENSIFY", [w], [y])
    g.output(y)
    try:
        model = read_model(b.build())
    except ModelError as err:
        assert "'w_sparse'" in str(err)
        return
    assert model.main.tensors[w].data.shape == shape


FLIP_SEED = sparse_model(BASE, BLOCK_SP, BLOCK_VALUES)


@SPARSITY_FUZZ
@given(st.lists(st.tuples(st.integers(0, len(FLIP_SEED) - 1), st.integers(0, 255)), max_size=6))
def test_byte_overwrites_of_a_sparse_model_read_or_are_model_errors(writes) -> None:
    buf = bytearray(FLIP_SEED)
    for at, byte in writes:
        buf[at] = byte
    with contextlib.suppress(ModelError):
        Interpreter(read_model(bytes(buf)))


def test_gpu_fold_densifies_whatever_the_size(monkeypatch) -> None:
    """TFLite's delegate densifies every constant sparse tensor at preparation; the size cap
    that keeps other large static results as runtime ops does not apply to DENSIFY."""
    from delegate_runtime.gpu import fold

    values, sp = sparsify(BASE, [D, S])
    b = ModelBuilder()
    g = b.main
    x = g.input("x", BASE.shape)
    w = g.sparse_const("w_sparse", BASE.shape, values, sp)
    wd = g.tensor("w", BASE.shape)
    y = g.tensor("y", BASE.shape)
    g.op("DENSIFY", [w], [wd])
    g.op("ADD", [x, wd], [y])
    g.output(y)
    folded, count = fold.fold_constants(read_model(b.build()), max_elements=4)
    assert count == 1 and [op.op for op in folded.main.operators] == ["ADD"]
    np.testing.assert_array_equal(folded.main.tensors[wd].data, BASE)
