"""The reader and validator of untrusted `.tflite` files: each rule, one case, and the
ModelError names the tensor or operator at fault."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from model_surgery import (
    ExternalBufferBuilder,
    fields_of,
    patch,
    tensor_field,
)

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.reader import Limits, load_model
from delegate_runtime.validate import MAX_CALL_DEPTH


def add_model(builder: type[ModelBuilder] = ModelBuilder, **op_kw: object) -> ModelBuilder:
    """x + w -> y, with w a constant: tensors 0 x, 1 w, 2 y."""
    b = builder()
    g = b.main
    x = g.input("x", (2, 3))
    w = g.const("w", np.arange(6, dtype=np.float32).reshape(2, 3))
    y = g.tensor("y", (2, 3))
    g.op("ADD", [x, w], [y], **op_kw)
    g.output(y)
    return b


def good() -> bytes:
    return add_model().build()


def test_good_model_reads() -> None:
    m = read_model(good())
    assert [t.name for t in m.main.tensors] == ["x", "w", "y"]
    assert m.main.operators[0].op == "ADD"
    assert not m.main.tensors[1].data.flags.writeable


# -- file level -------------------------------------------------------------------------


def _with_version(v: int) -> bytes:
    return patch(good(), fields_of(good(), "model.version")[0], v)


def _with_no_subgraphs() -> bytes:
    return patch(good(), fields_of(good(), "subgraphs.length")[0], 0)


FILE_CASES: dict[str, tuple[Callable[[], bytes], str]] = {
    "empty": (lambda: b"", "too small"),
    "seven_bytes": (lambda: good()[:7], "too small"),
    "bad_identifier": (lambda: good()[:4] + b"ONNX" + good()[8:], "file identifier b'ONNX'"),
    "schema_version_2": (lambda: _with_version(2), "schema version 2 is not supported"),
    "schema_version_huge": (lambda: _with_version(2**32 - 1), "schema version 4294967295"),
    "no_subgraphs": (_with_no_subgraphs, "no subgraphs"),
    "root_offset_past_end": (
        lambda: patch(good(), fields_of(good(), "root_offset")[0], 2**31),
        "malformed",
    ),
    "truncated_half": (lambda: good()[: len(good()) // 2], "malformed|past the end|exceeds"),
}


@pytest.mark.parametrize("case", FILE_CASES, ids=FILE_CASES.keys())
def test_file_level_rules(case: str) -> None:
    make, message = FILE_CASES[case]
    with pytest.raises(ModelError, match=message):
        read_model(make())


def test_file_size_cap() -> None:
    with pytest.raises(ModelError, match="over the 100 cap"):
        read_model(good(), Limits(max_file_bytes=100))


def test_load_model_missing_file(tmp_path) -> None:
    with pytest.raises(ModelError, match="cannot read model"):
        load_model(tmp_path / "nope.tflite")


def test_load_model_reads_a_file(tmp_path) -> None:
    path = tmp_path / "m.tflite"
    path.write_bytes(good())
    assert load_model(path).sha256 and load_model(path).size_bytes == len(good())


# -- indices ----------------------------------------------------------------------------


def _op_index(kind: str, position: int, value: int) -> bytes:
    data = good()
    return patch(data, fields_of(data, kind)[position], value)


INDEX_CASES: dict[str, tuple[Callable[[], bytes], str]] = {
    "operator_input": (
        lambda: _op_index("operator.inputs", 1, 99),
        r"operator #0 \(ADD\) input: index 99 out of range \[0, 3\)",
    ),
    "operator_input_minus_2": (
        lambda: _op_index("operator.inputs", 0, -2),
        r"operator #0 \(ADD\) input: index -2 out of range",
    ),
    "operator_output_minus_1": (
        lambda: _op_index("operator.outputs", 0, -1),
        r"operator #0 \(ADD\) output: index -1 out of range",
    ),
    "subgraph_input": (lambda: _op_index("subgraph.inputs", 0, 3), "subgraph 0 input: index 3"),
    "subgraph_output": (
        lambda: _op_index("subgraph.outputs", 0, -1),
        "subgraph 0 output: index -1",
    ),
    "opcode": (
        lambda: patch(add_mul(), fields_of(add_mul(), "operator.opcode")[0], 5),
        r"operator #1 opcode: index 5 out of range \[0, 2\)",
    ),
    "buffer": (
        lambda: patch(good(), tensor_field(good(), "tensor.buffer", 0, 1), 77),
        r"tensor 1 'w' buffer: index 77 out of range",
    ),
    "tensor_count": (
        lambda: _op_index("tensors.length", 0, 2**30),
        "tensors: vector length 1073741824 exceeds the file",
    ),
    "signature_subgraph": (
        lambda: _signature_patch("signature.subgraph", 3),
        "signature 'sig' subgraph: index 3 out of range",
    ),
    "signature_tensor": (
        lambda: _signature_patch("signature.tensor", 42),
        r"signature 'sig' inputs: index 42 out of range \[0, 2\)",
    ),
}


def _signature_patch(kind: str, value: int) -> bytes:
    """Signature 'sig' on subgraph 1 (index and tensor stored: neither is the default 0)."""
    b = add_model()
    other = b.subgraph("other")
    other.input("u", (2,))
    v = other.input("v", (2,))
    other.output(v)
    b.signature("sig", other, {"v": v}, {"out": v})
    data = b.build()
    return patch(data, fields_of(data, kind)[0], value)


def add_mul() -> bytes:
    """y = x + w; z = y * w: two opcodes, so operator #1 stores opcode index 1."""
    b = add_model()
    z = b.main.tensor("z", (2, 3))
    b.main.op("MUL", [2, 1], [z])
    b.main.outputs = [z]
    return b.build()


@pytest.mark.parametrize("case", INDEX_CASES, ids=INDEX_CASES.keys())
def test_index_out_of_range(case: str) -> None:
    make, message = INDEX_CASES[case]
    with pytest.raises(ModelError, match=message):
        read_model(make())


def _buffers_length(value: Callable[[int], int]) -> bytes:
    data = good()
    return patch(data, fields_of(data, "buffers.length")[0], value(len(data)))


def test_table_vector_needs_four_bytes_per_element() -> None:
    """Regression: a vector of n tables only had to fit n bytes (6 s of garbage reads)."""
    with pytest.raises(ModelError, match=r"buffers: vector length \d+ exceeds the file"):
        read_model(_buffers_length(lambda n: n // 4 + 1))


def test_unreferenced_buffers_are_never_read() -> None:
    """Regression: every buffer was read up front, so a hostile count cost its length."""
    model = read_model(_buffers_length(lambda n: n // 4))
    np.testing.assert_array_equal(model.main.tensors[1].data, np.arange(6).reshape(2, 3))


def test_optional_input_minus_1_is_allowed() -> None:
    """The reader keeps -1 (absent); whether the op may lack that input is validation's."""
    data = _op_index("operator.inputs", 1, -1)
    assert read_model(data, validate=False).main.operators[0].inputs == (0, -1)


# -- tensors and buffers ----------------------------------------------------------------


def _builder_with(shape: tuple[int, ...], **tensor_kw: object) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, **tensor_kw)
    g.output(x)
    return b.build()


def _const_shape_mismatch() -> bytes:
    b = add_model()
    b.main.tensors[1].shape = (5,)  # the buffer still holds 6 floats
    return b.build()


def _external(offset_delta: int = 0, size_delta: int = 0) -> bytes:
    data = add_model(ExternalBufferBuilder).build()
    off, size = fields_of(data, "buffer.offset")[0], fields_of(data, "buffer.size")[0]
    stored_off = int.from_bytes(data[off.pos : off.pos + 8], "little")
    data = patch(data, off, stored_off + offset_delta)
    return patch(data, size, 24 + size_delta)


def _data_length(value: int) -> bytes:
    data = good()
    return patch(data, fields_of(data, "buffer.data.length")[0], value)


TENSOR_CASES: dict[str, tuple[Callable[[], bytes], Limits, str]] = {
    "buffer_size_mismatch": (
        _const_shape_mismatch,
        Limits(),
        r"tensor 1 'w': buffer 1 holds 24 bytes but shape \[5\] of float32 needs 20",
    ),
    "buffer_data_length_past_end": (
        lambda: _data_length(2**31 - 1),
        Limits(),
        "buffer 1: vector length 2147483647 exceeds the file",
    ),
    "buffer_data_length_near_end": (
        lambda: _data_length(len(good()) - 8),
        Limits(),
        "buffer 1 data runs past the end of the file",
    ),
    "external_offset_past_end": (
        lambda: _external(offset_delta=10_000),
        Limits(),
        r"tensor 1 'w': buffer 1 at offset \d+ \+ 24 bytes runs past the end",
    ),
    "external_size_past_end": (
        lambda: _external(size_delta=2**40),
        Limits(),
        "runs past the end of the file",
    ),
    "external_size_short": (
        lambda: _external(size_delta=-4),
        Limits(),
        "holds 20 bytes but shape",
    ),
    "rank_cap": (
        lambda: _builder_with((1,) * 9),
        Limits(),
        r"tensor 0 'x': rank 9 exceeds the cap of 8",
    ),
    "rank_cap_configured": (
        lambda: _builder_with((1, 2, 3)),
        Limits(max_rank=2),
        "rank 3 exceeds the cap of 2",
    ),
    "element_cap": (
        lambda: _builder_with((2**16, 2**16)),
        Limits(),
        r"tensor 0 'x': 4294967296 elements exceed the cap",
    ),
    "element_cap_configured": (
        lambda: _builder_with((10, 11)),
        Limits(max_tensor_elements=100),
        "110 elements exceed the cap of 100",
    ),
    "total_element_cap": (good, Limits(max_total_elements=10), "tensors total over 10 elements"),
    # 2 GiB of int64 in 2**28 elements: within the element cap, over the byte cap
    "byte_cap": (
        lambda: _builder_with((2**14, 2**14), dtype=np.int64),
        Limits(),
        r"tensor 0 'x': 2147483648 bytes \(\[16384, 16384\] int64\) exceed the cap of "
        r"1073741824 bytes per tensor",
    ),
    "byte_cap_configured": (
        lambda: _builder_with((10, 11), dtype=np.int16),
        Limits(max_tensor_bytes=200),
        "220 bytes .* exceed the cap of 200 bytes per tensor",
    ),
    "total_byte_cap": (good, Limits(max_total_bytes=10), "tensors total over 10 bytes"),
    "negative_dimension": (
        lambda: _builder_with((2, -3)),
        Limits(),
        r"tensor 0 'x': negative dimension in shape \[2, -3\]",
    ),
    "unsupported_type": (
        lambda: patch(_typed(), tensor_field(_typed(), "tensor.type", 0, 0), 17),
        Limits(),
        "tensor type INT4 is not supported",
    ),
    "unknown_type": (
        lambda: patch(_typed(), tensor_field(_typed(), "tensor.type", 0, 0), 99),
        Limits(),
        "tensor type 99 is not supported",
    ),
}


def _typed() -> bytes:
    """A model whose input is int8, so its type field is stored (float32 is the default)."""
    return _builder_with((2,), dtype=np.int8)


@pytest.mark.parametrize("case", TENSOR_CASES, ids=TENSOR_CASES.keys())
def test_tensor_and_buffer_rules(case: str) -> None:
    make, limits, message = TENSOR_CASES[case]
    with pytest.raises(ModelError, match=message):
        read_model(make(), limits)


def test_external_buffer_reads() -> None:
    m = read_model(add_model(ExternalBufferBuilder).build())
    np.testing.assert_array_equal(m.main.tensors[1].data, np.arange(6).reshape(2, 3))


QUANT_CASES = {
    "per_channel_count": (
        Quant([0.1, 0.2, 0.3], 0, axis=1),
        "3 per-channel scales do not match dimension 1",
    ),
    "per_channel_axis": (
        Quant([0.1, 0.2], 0, axis=5),
        "per-channel scales do not match dimension 5",
    ),
    "zero_point_count": (Quant([0.1, 0.2], [0, 0, 0], axis=0), "2 scales but 3 zero points"),
    "negative_scale": (Quant(-0.5, 0), "scale must be finite and non-negative"),
    "nan_scale": (Quant(float("nan"), 0), "scale must be finite"),
}


@pytest.mark.parametrize("case", QUANT_CASES, ids=QUANT_CASES.keys())
def test_quantization_rules(case: str) -> None:
    quant, message = QUANT_CASES[case]
    b = ModelBuilder()
    x = b.main.input("x", (2, 4), np.int8, quant=quant)
    b.main.output(x)
    with pytest.raises(ModelError, match=rf"tensor 0 'x'.*{message}"):
        read_model(b.build())


# -- graph structure --------------------------------------------------------------------


def _graph_case(mutate: Callable[[ModelBuilder], None]) -> Callable[[], bytes]:
    def make() -> bytes:
        b = add_model()
        mutate(b)
        return b.build()

    return make


def _cycle(b: ModelBuilder) -> None:
    """y = x + z; z = y + w: each op needs the other's output."""
    g = b.main
    z = g.tensor("z", (2, 3))
    g.ops[0].inputs = [0, z]
    g.op("ADD", [2, 1], [z])


def _consumer_first(b: ModelBuilder) -> None:
    g = b.main
    z = g.tensor("z", (2, 3))
    g.op("ADD", [2, 1], [z])
    g.ops.reverse()
    g.outputs = [z]


GRAPH_CASES: dict[str, tuple[Callable[[], bytes], str]] = {
    "cycle": (
        _graph_case(_cycle),
        r"operator #0 \(ADD v1\): input tensor 3 'z' is produced later \(a cycle or a wrong order\)",
    ),
    "used_before_produced": (
        _graph_case(_consumer_first),
        r"operator #0 \(ADD v1\): input tensor 2 'y' is produced later",
    ),
    "never_produced": (
        _graph_case(
            lambda b: setattr(b.main.ops[0], "inputs", [0, b.main.tensor("ghost", (2, 3))])
        ),
        r"input tensor 3 'ghost' is never produced",
    ),
    "output_is_constant": (
        _graph_case(lambda b: setattr(b.main.ops[0], "outputs", [1])),
        r"operator #0 \(ADD v1\): output tensor 1 'w' is a constant",
    ),
    "written_twice": (
        _graph_case(lambda b: b.main.op("ADD", [0, 1], [2])),
        r"operator #1 \(ADD v1\): output tensor 2 'y' is written twice",
    ),
    "overwrites_input": (
        _graph_case(lambda b: setattr(b.main.ops[0], "outputs", [0])),
        r"output tensor 0 'x' is written twice",
    ),
    "subgraph_output_never_produced": (
        _graph_case(lambda b: b.main.outputs.append(b.main.tensor("lost", (1,)))),
        r"subgraph 0 'main': output tensor 3 'lost' is never produced",
    ),
}


@pytest.mark.parametrize("case", GRAPH_CASES, ids=GRAPH_CASES.keys())
def test_graph_rules(case: str) -> None:
    make, message = GRAPH_CASES[case]
    with pytest.raises(ModelError, match=message):
        read_model(make())


# -- subgraph calls ---------------------------------------------------------------------


def _if_model(then_index: int = 1, else_index: int = 2) -> bytes:
    b = ModelBuilder()
    g = b.main
    c, x, z = g.input("cond", (), np.bool_), g.input("x", (2,)), g.tensor("z", (2,))
    for name in ("then", "else"):
        sg = b.subgraph(name)
        sx = sg.input("x", (2,))
        sg.output(sx)
    g.op("IF", [c, x], [z], then_subgraph_index=then_index, else_subgraph_index=else_index)
    g.output(z)
    return b.build()


def _if_chain(depth: int) -> bytes:
    """Subgraph k runs IF into subgraph k+1, `depth` levels of calls below main."""
    b = ModelBuilder()
    sgs = [b.main] + [b.subgraph(f"level{k}") for k in range(1, depth + 1)]
    for k, sg in enumerate(sgs):
        c, x = sg.input("cond", (), np.bool_), sg.input("x", (2,))
        if k == depth:
            sg.output(x)
            continue
        z = sg.tensor("z", (2,))
        sg.op("IF", [c, c, x], [z], then_subgraph_index=k + 1, else_subgraph_index=k + 1)
        sg.output(z)
    return b.build()


def test_subgraph_cap() -> None:
    with pytest.raises(ModelError, match="model has 3 subgraphs, over the 2 cap"):
        read_model(_if_model(), Limits(max_subgraphs=2))


def test_if_subgraph_index_out_of_range() -> None:
    with pytest.raises(
        ModelError, match=r"operator #0 \(IF v1\): then_subgraph_index=7 is not a subgraph"
    ):
        read_model(_if_model(then_index=7))


def test_if_branch_arity() -> None:
    with pytest.raises(ModelError, match="branch subgraph 'main' input count is 2, expected 1"):
        read_model(_if_model(else_index=0))


def test_call_nesting_at_the_cap_reads() -> None:
    read_model(_if_chain(MAX_CALL_DEPTH - 1))


def test_call_nesting_over_the_cap() -> None:
    with pytest.raises(ModelError, match=f"nests subgraph calls {MAX_CALL_DEPTH + 1} deep"):
        read_model(_if_chain(MAX_CALL_DEPTH))


def test_long_subgraph_chain_is_no_recursion_error() -> None:
    """Regression: the cycle check recursed once per subgraph (RecursionError at ~1000)."""
    with pytest.raises(ModelError, match="nests subgraph calls"):
        read_model(_if_chain(1100), Limits(max_subgraphs=2000))


# -- ops the runtime lacks ----------------------------------------------------------------


def test_unknown_builtin_code_is_named() -> None:
    data = add_mul()
    data = patch(data, fields_of(data, "opcode.builtin_code")[0], 10_000)
    model = read_model(data)
    with pytest.raises(ModelError, match=r"operator #1 \(UNKNOWN_BUILTIN_10000 v1\)"):
        Interpreter(model)


def test_unsupported_version_is_named() -> None:
    with pytest.raises(
        ModelError, match=r"operator #0 \(ADD v99\): op ADD version 99 is not supported"
    ):
        Interpreter(read_model(add_model(version=99).build()))


def test_unimplemented_op_is_named() -> None:
    b = ModelBuilder()
    g = b.main
    x, y = g.input("x", (4,)), g.tensor("y", (4,))
    g.op("CONCAT_EMBEDDINGS", [x, x, x], [y])  # in the schema; no TFLite kernel
    g.output(y)
    with pytest.raises(
        ModelError, match=r"CONCAT_EMBEDDINGS v1\): op CONCAT_EMBEDDINGS is not implemented"
    ):
        Interpreter(read_model(b.build()))


def test_every_problem_is_listed_at_once() -> None:
    b = add_model(version=42)
    b.main.op("ADD", [2, 1], [b.main.tensor("z", (2, 3))], version=43)
    with pytest.raises(ModelError) as err:
        Interpreter(read_model(b.build()))
    assert "ADD v42" in str(err.value) and "ADD v43" in str(err.value)
