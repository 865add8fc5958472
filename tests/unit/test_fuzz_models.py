"""Fuzzing the reader: mutated models (the shared dev models and a few builder models) must
raise ModelError or read, and a model that reads must also make an Interpreter or raise
ModelError. Anything else is a bug in reader/validate/interpreter set-up.

Mutations: bit flips, byte overwrites, truncation and splices, hostile values in the fields
the reader trusts (indices, vector lengths, buffer offsets and sizes, types, versions: -1,
2**31 - 1, the file length, ...), and huge shapes. The case count is printed at the end.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_surgery import (
    DEV_MODELS_DIR,
    ExternalBufferBuilder,
    Field,
    dev_models,
    locate_fields,
    patch,
    structure_positions,
)

from delegate_runtime import Limits, read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import JobError, JobTimeout, ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.ops.alloc import check_alloc

#: Examples per mutation kind; five kinds make the total.
EXAMPLES_PER_KIND = int(os.environ.get("FUZZ_EXAMPLES_PER_KIND", "3000"))
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES_PER_KIND,
    deadline=None,
    database=None,
    derandomize=os.environ.get("CI", "").lower() in ("1", "true", "yes"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Values that break trust: -1 indices, sign flips, huge counts, "just past the end".
HOSTILE_INTS = (
    -1,
    -2,
    0,
    1,
    2,
    3,
    7,
    127,
    128,
    255,
    2**15,
    2**16,
    2**24,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**63 - 1,
)
HUGE_DIMS = (2**31 - 1, 2**30, 2**20, 2**16, 46341, 65537)

#: Outcomes over the whole module, printed at its end.
OUTCOMES: Counter[str] = Counter()
#: The slowest mutant: (seconds to read and set up, mutation kind).
SLOWEST: list[tuple[float, str]] = [(0.0, "")]


@dataclass
class Seed:
    name: str
    data: bytes
    fields: list[Field]
    structure: np.ndarray  #: byte positions outside constant data


# -- seeds ------------------------------------------------------------------------------


def _while_model() -> bytes:
    b = ModelBuilder()
    g = b.main
    i, x = g.input("i", (), np.int32), g.input("x", (3,))
    outs = [g.tensor("i_out", (), np.int32), g.tensor("x_out", (3,))]
    cond = b.subgraph("cond")
    ci = cond.input("i", (), np.int32)
    cond.input("x", (3,))
    less = cond.tensor("less", (), np.bool_)
    cond.op("LESS", [ci, cond.const("n", np.int32(4))], [less])
    cond.output(less)
    body = b.subgraph("body")
    bi, bx = body.input("i", (), np.int32), body.input("x", (3,))
    i1, x1 = body.tensor("i1", (), np.int32), body.tensor("x1", (3,))
    body.op("ADD", [bi, body.const("one", np.int32(1))], [i1])
    body.op("MUL", [bx, bx], [x1])
    body.output(i1, x1)
    g.op("WHILE", [i, x], outs, cond_subgraph_index=1, body_subgraph_index=2)
    g.output(*outs)
    b.signature("loop", g, {"i": i, "x": x}, {"x_out": outs[1]})
    return b.build()


def _lstm_model() -> bytes:
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 2, 3))

    def w(*shape: int) -> int:
        return g.const(f"w{len(g.tensors)}", rng.normal(size=shape).astype(np.float32))

    ins = [x, -1, w(4, 3), w(4, 3), w(4, 3), -1, w(4, 4), w(4, 4), w(4, 4)]
    ins += [-1, w(4), w(4), -1, w(4), w(4), w(4), -1, -1]
    h = g.tensor("h", (1, 4), is_variable=True)
    c = g.tensor("c", (1, 4), is_variable=True)
    y = g.tensor("y", (1, 2, 4))
    g.op("UNIDIRECTIONAL_SEQUENCE_LSTM", [*ins, h, c], [y], fused_activation_function="TANH")
    g.output(y)
    return b.build()


def _quantized_conv_model() -> bytes:
    b = ExternalBufferBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 2), np.int8, quant=Quant(0.05, -3))
    wq = Quant(np.float32([0.01, 0.02, 0.03]), 0, axis=0)
    w = g.const("w", np.ones((3, 2, 2, 2), np.int8), quant=wq)
    bias = g.const("b", np.zeros(3, np.int32), quant=Quant(np.float32([5e-4, 1e-3, 1.5e-3]), 0))
    y = g.tensor("y", (1, 4, 4, 3), np.int8, quant=Quant(0.1, 2))
    g.op("CONV_2D", [x, w, bias], [y], padding="SAME", stride_w=1, stride_h=1)
    g.output(y)
    return b.build()


BUILDER_SEEDS: dict[str, Callable[[], bytes]] = {
    "builder_while": _while_model,
    "builder_lstm": _lstm_model,
    "builder_external_quantized_conv": _quantized_conv_model,
}


@pytest.fixture(scope="module")
def seeds(
    request: pytest.FixtureRequest, record_testsuite_property: Callable[[str, object], None]
) -> Iterator[list[Seed]]:
    models = {p.stem: p.read_bytes() for p in dev_models()}
    models.update({name: make() for name, make in BUILDER_SEEDS.items()})
    yield [Seed(n, d, locate_fields(d), structure_positions(d)) for n, d in models.items()]
    total = sum(v for k, v in OUTCOMES.items() if k.startswith("total."))
    record_testsuite_property("fuzz_cases", total)
    detail = ", ".join(f"{k}={v}" for k, v in sorted(OUTCOMES.items()))
    detail += f"; slowest {SLOWEST[0][0] * 1e3:.0f} ms ({SLOWEST[0][1]})"
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\nfuzz: {total} mutated models from {len(models)} seeds ({detail})")


# -- the property ---------------------------------------------------------------------


def check(kind: str, data: bytes) -> None:
    """Read and set up `data`: ModelError is the only error allowed."""
    OUTCOMES[f"total.{kind}"] += 1
    start = time.perf_counter()
    try:
        _read_and_set_up(data)
    finally:
        SLOWEST[0] = max(SLOWEST[0], (time.perf_counter() - start, kind))


def _read_and_set_up(data: bytes) -> None:
    try:
        model = read_model(data)
    except ModelError:
        OUTCOMES["rejected_by_reader"] += 1
        return
    try:
        Interpreter(model)
    except ModelError:
        OUTCOMES["rejected_by_interpreter"] += 1
        return
    OUTCOMES["accepted"] += 1


def _position(draw: st.DrawFn, seed: Seed) -> int:
    """A byte position, mostly in the flatbuffer's structure rather than in weights."""
    if draw(st.integers(0, 4)) and seed.structure.size:
        return int(seed.structure[draw(st.integers(0, seed.structure.size - 1))])
    return draw(st.integers(0, len(seed.data) - 1))


# -- one test per mutation kind --------------------------------------------------------


@FUZZ_SETTINGS
@given(st.data())
def test_bit_flips(seeds: list[Seed], data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(seeds), label="seed")
    buf = bytearray(seed.data)
    for _ in range(data.draw(st.integers(1, 8), label="flips")):
        buf[_position(data.draw, seed)] ^= 1 << data.draw(st.integers(0, 7))
    check("bit_flips", bytes(buf))


@FUZZ_SETTINGS
@given(st.data())
def test_byte_overwrites(seeds: list[Seed], data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(seeds), label="seed")
    buf = bytearray(seed.data)
    for _ in range(data.draw(st.integers(1, 4), label="writes")):
        at = _position(data.draw, seed)
        fill = data.draw(
            st.one_of(
                st.binary(min_size=1, max_size=8),
                st.sampled_from(
                    [b"\xff" * 4, b"\x00" * 4, b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80"]
                ),
            )
        )
        buf[at : at + len(fill)] = fill
    check("byte_overwrites", bytes(buf[: len(seed.data)]))


@FUZZ_SETTINGS
@given(st.data())
def test_truncation_and_splices(seeds: list[Seed], data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(seeds), label="seed")
    n = len(seed.data)
    how = data.draw(st.sampled_from(["truncate", "drop_slice", "duplicate_slice", "append"]))
    a = data.draw(st.integers(0, n - 1))
    b = data.draw(st.integers(a, min(n, a + 4096)))
    if how == "truncate":
        mutant = seed.data[:a]
    elif how == "drop_slice":
        mutant = seed.data[:a] + seed.data[b:]
    elif how == "duplicate_slice":
        mutant = seed.data[:b] + seed.data[a:b] + seed.data[b:]
    else:
        mutant = seed.data + data.draw(st.binary(min_size=1, max_size=64))
    check(f"splice.{how}", mutant)


@FUZZ_SETTINGS
@given(st.data())
def test_hostile_field_values(seeds: list[Seed], data: st.DataObject) -> None:
    """-1 indices, offsets and lengths past the end, huge counts, in the trusted fields."""
    seed = data.draw(st.sampled_from(seeds), label="seed")
    mutant = seed.data
    n = len(seed.data)
    for _ in range(data.draw(st.integers(1, 3), label="fields")):
        field = data.draw(st.sampled_from(seed.fields), label="field")
        value = data.draw(
            st.one_of(
                st.sampled_from(HOSTILE_INTS + (n - 1, n, n + 1, n // 2)),
                st.integers(-(2**31), 2**32),
            ),
            label="value",
        )
        if field.fmt[-1] == "f":
            value = data.draw(st.sampled_from([float("nan"), float("inf"), -1.0, 0.0, 1e38]))
        mutant = patch(mutant, field, value)
    check("hostile_fields", mutant)


@FUZZ_SETTINGS
@given(st.data())
def test_huge_shapes(seeds: list[Seed], data: st.DataObject) -> None:
    """Every dimension of one to three tensors becomes huge (or -1, or 0)."""
    seed = data.draw(st.sampled_from(seeds), label="seed")
    shape_fields = [f for f in seed.fields if f.kind in ("tensor.shape", "tensor.shape_signature")]
    if not shape_fields:
        check("huge_shapes", seed.data)
        return
    mutant = seed.data
    for field in data.draw(st.lists(st.sampled_from(shape_fields), min_size=1, max_size=3)):
        mutant = patch(mutant, field, data.draw(st.sampled_from(HUGE_DIMS + (-1, 0))))
    check("huge_shapes", mutant)


SEED_NAMES = sorted(p.stem for p in DEV_MODELS_DIR.glob("*.tflite")) + sorted(BUILDER_SEEDS)


@pytest.mark.parametrize("name", SEED_NAMES)
def test_seed_reads(seeds: list[Seed], name: str) -> None:
    """Unmutated, every seed reads: the fuzz starts from valid models."""
    read_model(next(s.data for s in seeds if s.name == name))


# -- regressions ------------------------------------------------------------------------


def test_huge_declared_state_costs_no_memory_at_set_up() -> None:
    """Regression: a 300-byte model declaring a 1 GiB variable made the Interpreter copy
    a 1 GiB zero array up front (4 GiB, 13 s for complex128)."""
    import resource

    b = ModelBuilder()
    g = b.main
    x, y = g.input("x", (2,)), g.tensor("y", (2,))
    g.tensor("state", (1 << 14, 1 << 14), np.float32, is_variable=True)
    g.op("RELU", [x], [y])
    g.output(y)
    model = read_model(b.build())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    Interpreter(model).invoke([np.float32([1, -1])])
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 256


# -- hostile values at run time (issue 16): caps, deadline, cancel, MemoryError --------------


def _fill_model(n: int) -> bytes:
    b = ModelBuilder()
    g = b.main
    value = g.input("value", (), np.float32)
    y = g.tensor("y", (4,))
    g.op("FILL", [g.const("dims", np.array([n], np.int32)), value], [y])
    g.output(y)
    return b.build()


def _endless_while() -> bytes:
    b = ModelBuilder()
    g = b.main
    i = g.input("i", (), np.int32)
    out = g.tensor("i_out", (), np.int32)
    cond = b.subgraph("cond")
    cond.input("i", (), np.int32)
    cond.output(cond.const("yes", np.bool_(True)))
    body = b.subgraph("body")
    bi = body.input("i", (), np.int32)
    bo = body.tensor("i1", (), np.int32)
    body.op("ADD", [bi, body.const("one", np.int32(1))], [bo])
    body.output(bo)
    g.op("WHILE", [i], [out], cond_subgraph_index=1, body_subgraph_index=2)
    g.output(out)
    return b.build()


def test_kernel_output_over_the_interpreters_limits_is_a_model_error() -> None:
    model = read_model(_fill_model(16))
    assert Interpreter(model).invoke([np.float32(1)])[0].shape == (16,)
    small = Limits(max_tensor_elements=8)
    with pytest.raises(ModelError, match=r"FILL v1\): output: shape \[16\].*over the cap of 8"):
        Interpreter(model, limits=small).invoke([np.float32(1)])


def test_kernel_caps_apply_outside_an_interpreter() -> None:
    """Constant folding calls kernels directly: the reader's default limits hold there."""
    with pytest.raises(ModelError, match="over the cap"):
        check_alloc((1 << 20, 1 << 20), np.float32, "folded FILL")


def test_endless_while_stops_at_the_deadline() -> None:
    interpreter = Interpreter(read_model(_endless_while()))
    interpreter.deadline = time.monotonic() + 0.2
    start = time.monotonic()
    with pytest.raises(JobTimeout, match="ran past its time limit"):
        interpreter.invoke([np.int32(0)])
    assert time.monotonic() - start < 5


def test_cancel_check_stops_invoke() -> None:
    calls = []
    interpreter = Interpreter(
        read_model(_endless_while()), cancelled=lambda: calls.append(1) or len(calls) > 50
    )
    with pytest.raises(JobError, match="cancelled"):
        interpreter.invoke([np.int32(0)])


def test_memory_error_in_a_kernel_is_a_model_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError("Unable to allocate 16.0 GiB")

    interpreter = Interpreter(read_model(_fill_model(4)))
    monkeypatch.setattr(np, "full", no_memory)
    with pytest.raises(ModelError, match=r"FILL v1\) ran out of memory: Unable to allocate"):
        interpreter.invoke([np.float32(1)])


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_absent_required_filter_is_refused_at_load(op: str) -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 2))
    y = g.tensor("y", (1, 4, 4, 2))
    g.op(op, [x, -1, -1], [y], padding="SAME", stride_w=1, stride_h=1)
    g.output(y)
    with pytest.raises(ModelError, match=rf"\({op} v1\): input 1 is absent \(-1\) but required"):
        read_model(b.build())


def test_too_few_inputs_are_refused_at_load() -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 2))
    y = g.tensor("y", (1, 4, 4, 2))
    g.op("CONV_2D", [x], [y], padding="SAME", stride_w=1, stride_h=1)
    g.output(y)
    with pytest.raises(ModelError, match="has 1 inputs, needs at least 2"):
        read_model(b.build())
