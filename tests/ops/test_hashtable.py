"""HASHTABLE, HASHTABLE_IMPORT, HASHTABLE_FIND and HASHTABLE_SIZE against LiteRT."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import litert_interpreter, run_litert, run_ours

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, SubgraphBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.strings import strings_array

STR = np.dtype(object)
#: TensorType codes: the builder cannot write RESOURCE, so tests patch it in.
INT64, STRING, RESOURCE = 4, 5, 13
HANDLE = "handle"


def retype(model: bytes, prefix: str, type_code: int) -> bytes:
    """Rewrite the TensorType of tensors whose name starts with `prefix`, in place."""
    import tflite

    buf = bytearray(model)
    m = tflite.Model.GetRootAs(bytes(buf), 0)
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for k in range(sg.TensorsLength()):
            t = sg.Tensors(k)
            if t.Name().decode().startswith(prefix):
                buf[t._tab.Pos + t._tab.Offset(6)] = type_code
    return bytes(buf)


def table(g: SubgraphBuilder, name: str, table_id: int, key_type: int, value_type: int) -> int:
    h = g.tensor(f"{HANDLE}_{name}", (1,), np.int32)
    g.op("HASHTABLE", [], [h], table_id=table_id, key_dtype=key_type, value_dtype=value_type)
    return h


def _dtype(code: int) -> np.dtype:
    return STR if code == STRING else np.dtype(np.int64)


def _const(g: SubgraphBuilder, name: str, values: list, code: int) -> int:
    if code == STRING:
        return g.const(name, strings_array(values), dtype=STR)
    return g.const(name, np.int64(values))


def build_lookup_model(
    key_type: int,
    keys: list,
    values: list,
    n_queries: int,
    default: list,
    imports: int = 1,
    with_size: bool = True,
) -> bytes:
    """table = HASHTABLE; IMPORT(keys, values) `imports` times (each later import with
    other values); out = FIND(queries, default) [; size = SIZE]."""
    value_type = STRING if key_type == INT64 else INT64
    b = ModelBuilder()
    g = b.main
    q = g.input("queries", (n_queries,), _dtype(key_type))
    h = table(g, "t", 7, key_type, value_type)
    for i in range(imports):
        vals = values if i == 0 else values[::-1]
        g.op(
            "HASHTABLE_IMPORT",
            [h, _const(g, f"k{i}", keys, key_type), _const(g, f"v{i}", vals, value_type)],
            [],
        )
    out = g.tensor("found", (n_queries,), _dtype(value_type))
    g.op("HASHTABLE_FIND", [h, q, _const(g, "default", default, value_type)], [out])
    outs = [out]
    if with_size:
        size = g.tensor("size", (1,), np.int64)
        g.op("HASHTABLE_SIZE", [h], [size])
        outs.append(size)
    g.output(*outs)
    return retype(b.build(), HANDLE, RESOURCE)


def assert_same_as_litert(model: bytes, inputs: list) -> None:
    expected, got = run_litert(model, inputs), run_ours(model, inputs)
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype} != LiteRT {e.dtype}"
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != LiteRT {e.shape}"
        assert g.tolist() == e.tolist(), f"output {i}: {g.tolist()} != LiteRT {e.tolist()}"


CASES = {
    "int64_to_string": (
        INT64,
        [3, -1, 2**40, 0],
        [b"three", b"minus one", b"big", b""],
        [2**40, 5, 3, 0, -1],
        [b"?"],
    ),
    "string_to_int64": (
        STRING,
        [b"cat", b"dog", b"", "é".encode()],
        [1, -2, 2**50, 4],
        [b"dog", b"bird", b"", b"cat", "é".encode()],
        [-7],
    ),
    "repeated_key_keeps_first": (INT64, [1, 2, 1], [b"a", b"b", b"c"], [1, 2], [b"-"]),
    "default_is_its_first_element": (STRING, [b"x"], [10], [b"y", b"x"], [5, 6, 7]),
}


@pytest.mark.parametrize("case", CASES, ids=CASES.keys())
def test_hashtable_find_and_size(case: str) -> None:
    key_type, keys, values, queries, default = CASES[case]
    model = build_lookup_model(key_type, keys, values, len(queries), default)
    query = strings_array(queries) if key_type == STRING else np.int64(queries)
    assert_same_as_litert(model, [query])


def test_hashtable_second_import_changes_nothing() -> None:
    model = build_lookup_model(INT64, [1, 2], [b"one", b"two"], 2, [b""], imports=2)
    assert_same_as_litert(model, [np.int64([2, 1])])


def test_hashtable_find_keeps_the_queries_shape() -> None:
    b = ModelBuilder()
    g = b.main
    q = g.input("queries", (2, 3), np.int64)
    h = table(g, "t", 1, INT64, STRING)
    keys, vals = _const(g, "k", [1, 2, 3], INT64), _const(g, "v", [b"a", b"b", b"c"], STRING)
    g.op("HASHTABLE_IMPORT", [h, keys, vals], [])
    out = g.tensor("found", (2, 3), STR)
    g.op("HASHTABLE_FIND", [h, q, _const(g, "d", [b"z"], STRING)], [out])
    g.output(out)
    model = retype(b.build(), HANDLE, RESOURCE)
    assert_same_as_litert(model, [np.int64([[1, 4, 3], [2, 2, 0]])])


def build_init_once_model() -> bytes:
    """The converter's pattern: a CALL_ONCE init subgraph creates and fills table 3; the
    main subgraph names table 3 again and looks up its input."""
    b = ModelBuilder()
    g = b.main
    init = b.subgraph("init")
    h0 = table(init, "init", 3, STRING, INT64)
    keys = _const(init, "k", [b"red", b"green", b"blue"], STRING)
    init.op("HASHTABLE_IMPORT", [h0, keys, _const(init, "v", [0, 1, 2], INT64)], [])
    q = g.input("colour", (4,), STR)
    g.op("CALL_ONCE", [], [], init_subgraph_index=init.index)
    h = table(g, "main", 3, STRING, INT64)
    out, size = g.tensor("id", (4,), np.int64), g.tensor("size", (1,), np.int64)
    g.op("HASHTABLE_FIND", [h, q, _const(g, "d", [-1], INT64)], [out])
    g.op("HASHTABLE_SIZE", [h], [size])
    g.output(out, size)
    return retype(b.build(), HANDLE, RESOURCE)


@pytest.mark.parametrize("invokes", [1, 3])
def test_hashtable_filled_once_by_an_init_subgraph(invokes: int) -> None:
    model = build_init_once_model()
    ref, ours = litert_interpreter(model), Interpreter(read_model(model))
    query = strings_array([b"blue", b"pink", b"red", b"green"])
    for k in range(invokes):
        ref.set_tensor(ref.get_input_details()[0]["index"], query)
        ref.invoke()
        expected = [ref.get_tensor(d["index"]) for d in ref.get_output_details()]
        got = ours.invoke([query])
        assert [g.tolist() for g in got] == [e.tolist() for e in expected], f"invoke {k}"


# -- bad models ----------------------------------------------------------------------


def litert_refusal(model: bytes, inputs: list) -> str:
    """LiteRT's error message for `model` (at allocation or invoke); '' if it runs."""
    try:
        it = litert_interpreter(model)
        for d, x in zip(it.get_input_details(), inputs, strict=True):
            it.set_tensor(d["index"], x)
        it.invoke()
    except (RuntimeError, ValueError) as e:
        return str(e)
    return ""


def test_hashtable_refuses_int32_keys() -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1,), np.int64)
    h = table(g, "t", 1, 2, STRING)  # INT32 keys: TFLite's tables hold none
    size = g.tensor("size", (1,), np.int64)
    g.op("HASHTABLE_SIZE", [h], [size])
    y = g.tensor("y", (1,), np.int64)
    g.op("ADD", [x, size], [y])
    g.output(y)
    model = retype(b.build(), HANDLE, RESOURCE)
    assert "HASHTABLE) failed to prepare" in litert_refusal(model, [np.int64([1])])
    with pytest.raises(ModelError, match="int64 -> string or string -> int64"):
        run_ours(model, [np.int64([1])])


def test_hashtable_find_before_import_is_refused() -> None:
    b = ModelBuilder()
    g = b.main
    q = g.input("q", (2,), np.int64)
    h = table(g, "t", 1, INT64, STRING)
    out = g.tensor("found", (2,), STR)
    g.op("HASHTABLE_FIND", [h, q, _const(g, "d", [b"?"], STRING)], [out])
    g.output(out)
    model = retype(b.build(), HANDLE, RESOURCE)
    assert "need to be initialized" in litert_refusal(model, [np.int64([1, 2])])
    with pytest.raises(ModelError, match="imported"):
        run_ours(model, [np.int64([1, 2])])


def test_hashtable_find_with_the_other_key_type_is_refused() -> None:
    """Table 1 maps int64 -> string; a find of string keys for int64 values is refused."""
    b = ModelBuilder()
    g = b.main
    q = g.input("q", (1,), STR)
    h = table(g, "t", 1, INT64, STRING)
    keys, vals = _const(g, "k", [1], INT64), _const(g, "v", [b"a"], STRING)
    g.op("HASHTABLE_IMPORT", [h, keys, vals], [])
    out = g.tensor("found", (1,), np.int64)
    g.op("HASHTABLE_FIND", [h, q, _const(g, "d", [0], INT64)], [out])
    g.output(out)
    model = retype(b.build(), HANDLE, RESOURCE)
    assert "keys->type != key_type_" in litert_refusal(model, [strings_array([b"a"])])
    with pytest.raises(ModelError, match="maps int64 -> string"):
        run_ours(model, [strings_array([b"a"])])


def test_hashtable_import_of_mismatched_shapes_is_refused() -> None:
    b = ModelBuilder()
    g = b.main
    q = g.input("q", (1,), np.int64)
    h = table(g, "t", 1, INT64, STRING)
    keys, vals = _const(g, "k", [1, 2], INT64), _const(g, "v", [b"a"], STRING)
    g.op("HASHTABLE_IMPORT", [h, keys, vals], [])
    out = g.tensor("found", (1,), STR)
    g.op("HASHTABLE_FIND", [h, q, _const(g, "d", [b""], STRING)], [out])
    g.output(out)
    model = retype(b.build(), HANDLE, RESOURCE)
    assert "HaveSameShapes" in litert_refusal(model, [np.int64([1])])
    with pytest.raises(ModelError, match="differ"):
        run_ours(model, [np.int64([1])])
