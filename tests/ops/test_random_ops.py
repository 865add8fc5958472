"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL against LiteRT.

With explicit seeds LiteRT's numbers are reproducible (Philox4x32-10 seeded by the op's
seed and seed2, carried across invokes): ours must equal them bit for bit. With both seeds
0 LiteRT seeds from the OS, so those cases check shape, dtype and distribution instead,
for LiteRT and for us alike.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import litert_interpreter, run_litert, run_ours

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter

RNG = np.random.default_rng(3)
RANDOM_OPS = ("RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL")


def build_random(
    op: str,
    shape: tuple[int, ...],
    seed: int,
    seed2: int,
    runtime_shape: bool = False,
    out_dtype: type = np.float32,
    shape_dtype: type = np.int32,
) -> bytes:
    b = ModelBuilder()
    g = b.main
    if runtime_shape:
        s = g.input("shape", (len(shape),), shape_dtype)
    else:
        s = g.const("shape", np.array(shape, shape_dtype))
    y = g.tensor("y", shape, out_dtype)
    g.op(op, [s], [y], seed=seed, seed2=seed2)
    g.output(y)
    return b.build()


def build_multinomial(
    batch: int,
    classes: int,
    samples: int,
    seed: int,
    seed2: int,
    out_dtype: type = np.int64,
    runtime_samples: bool = False,
) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("logits", (batch, classes), np.float32)
    n = g.input("n", (), np.int32) if runtime_samples else g.const("n", np.int32(samples))
    y = g.tensor("y", (batch, samples), out_dtype)
    g.op("MULTINOMIAL", [x, n], [y], seed=seed, seed2=seed2)
    g.output(y)
    return b.build()


def assert_bitwise_equal(expected: np.ndarray, got: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), (
        f"{got.ravel()[:8]} != LiteRT {expected.ravel()[:8]}"
    )


# -- explicit seeds: LiteRT's numbers exactly ------------------------------------------

SEEDED = {
    "seed_only": ((3, 5), 42, 0),
    "seed2_only": ((2, 2, 3), 0, 7),
    "both_seeds": ((17,), 1, 2),
    "negative_seed": ((4, 4), -5, 123456789),
    "big_seeds": ((1, 9), 2**31 - 1, -(2**31)),
    "odd_count": ((7,), 9, 9),  # normals come in pairs: the last pair is half used
    "many": ((64, 50), 1234, 5678),
}


@pytest.mark.parametrize("case", SEEDED, ids=SEEDED.keys())
@pytest.mark.parametrize("op", RANDOM_OPS)
def test_seeded_random_equals_litert(op: str, case: str) -> None:
    shape, seed, seed2 = SEEDED[case]
    model = build_random(op, shape, seed, seed2)
    assert_bitwise_equal(run_litert(model, [])[0], run_ours(model, [])[0])


@pytest.mark.parametrize("op", RANDOM_OPS)
def test_seeded_random_with_a_runtime_shape(op: str) -> None:
    model = build_random(op, (2, 3), 5, 6, runtime_shape=True)
    shape = np.int32([3, 4])
    assert_bitwise_equal(run_litert(model, [shape])[0], run_ours(model, [shape])[0])


@pytest.mark.parametrize("op", [*RANDOM_OPS, "MULTINOMIAL"])
def test_seeded_random_goes_on_across_invokes(op: str) -> None:
    """The generator is the op's, seeded once: each invoke draws new numbers."""
    if op == "MULTINOMIAL":
        model, inputs = build_multinomial(2, 4, 6, 5, 6), [RNG.standard_normal((2, 4), np.float32)]
    else:
        model, inputs = build_random(op, (3, 3), 11, 12), []
    ref, ours = litert_interpreter(model), Interpreter(read_model(model))
    outs = []
    for _ in range(3):
        for d, x in zip(ref.get_input_details(), inputs, strict=True):
            ref.set_tensor(d["index"], x)
        ref.invoke()
        expected = ref.get_tensor(ref.get_output_details()[0]["index"])
        got = ours.invoke(inputs)[0]
        assert_bitwise_equal(expected, got)
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1])


def _logits(batch: int, classes: int) -> np.ndarray:
    return RNG.standard_normal((batch, classes)).astype(np.float32)


MULTINOMIAL_CASES = {
    "int64": (2, 5, 7, 3, 4, np.int64),
    "int32": (3, 10, 20, 123, 0, np.int32),
    "one_sample": (1, 3, 1, 0, 9, np.int64),
    "negative_seed": (4, 6, 13, -2, 77, np.int32),
    "one_class": (2, 1, 5, 8, 8, np.int64),
    "many_samples": (2, 4, 300, 10, 20, np.int64),
}


@pytest.mark.parametrize("case", MULTINOMIAL_CASES, ids=MULTINOMIAL_CASES.keys())
def test_seeded_multinomial_equals_litert(case: str) -> None:
    batch, classes, samples, seed, seed2, out = MULTINOMIAL_CASES[case]
    model = build_multinomial(batch, classes, samples, seed, seed2, out)
    logits = _logits(batch, classes)
    assert_bitwise_equal(run_litert(model, [logits])[0], run_ours(model, [logits])[0])


def test_multinomial_skips_non_finite_logits() -> None:
    """-inf and NaN logits are never drawn; a row with no finite logit gives `classes`."""
    logits = np.float32(
        [[0.5, -np.inf, 1.0, np.nan], [np.inf, 0.0, 0.0, 2.0], [-np.inf, np.nan, -np.inf, np.inf]]
    )
    model = build_multinomial(3, 4, 9, 31, 32)
    assert_bitwise_equal(run_litert(model, [logits])[0], run_ours(model, [logits])[0])


def test_multinomial_with_a_runtime_sample_count() -> None:
    model = build_multinomial(2, 3, 4, 1, 1, runtime_samples=True)
    inputs = [_logits(2, 3), np.int32(6)]
    assert_bitwise_equal(run_litert(model, inputs)[0], run_ours(model, inputs)[0])


# -- seeds 0: non-deterministic in LiteRT; shape, dtype and distribution ----------------

UNSEEDED_N = 20000


@pytest.mark.parametrize("runner", ["litert", "ours"])
def test_unseeded_uniform_is_uniform(runner: str) -> None:
    model = build_random("RANDOM_UNIFORM", (UNSEEDED_N,), 0, 0)
    x = (run_litert if runner == "litert" else run_ours)(model, [])[0]
    assert x.shape == (UNSEEDED_N,) and x.dtype == np.float32
    assert x.min() >= 0.0 and x.max() < 1.0
    # 10 equal bins of 2000 expected counts: 4.5 standard deviations of slack each
    counts = np.histogram(x, bins=10, range=(0.0, 1.0))[0]
    assert np.all(np.abs(counts - UNSEEDED_N / 10) < 4.5 * np.sqrt(UNSEEDED_N * 0.09))


@pytest.mark.parametrize("runner", ["litert", "ours"])
def test_unseeded_normal_is_standard_normal(runner: str) -> None:
    model = build_random("RANDOM_STANDARD_NORMAL", (100, 200), 0, 0)
    x = (run_litert if runner == "litert" else run_ours)(model, [])[0]
    assert x.shape == (100, 200) and x.dtype == np.float32
    assert abs(x.mean()) < 5 / np.sqrt(x.size)
    assert abs(x.std() - 1.0) < 0.03
    assert abs(np.mean(np.abs(x) < 1.0) - 0.6827) < 0.02


@pytest.mark.parametrize("runner", ["litert", "ours"])
def test_unseeded_multinomial_follows_the_softmax(runner: str) -> None:
    logits = np.float32([[0.0, np.log(2.0), np.log(7.0)]])  # probabilities 0.1, 0.2, 0.7
    model = build_multinomial(1, 3, 5000, 0, 0)
    x = (run_litert if runner == "litert" else run_ours)(model, [logits])[0]
    assert x.shape == (1, 5000) and x.dtype == np.int64
    freq = np.bincount(x[0], minlength=3) / 5000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.03)


@pytest.mark.parametrize("op", RANDOM_OPS)
def test_unseeded_runs_differ(op: str) -> None:
    """Both seeds 0: each interpreter seeds itself from the OS, as LiteRT does."""
    model = build_random(op, (16,), 0, 0)
    assert not np.array_equal(run_ours(model, [])[0], run_ours(model, [])[0])


# -- bad models ---------------------------------------------------------------------


def assert_both_refuse(model: bytes, inputs: list, match: str, litert_says: str) -> None:
    with pytest.raises((RuntimeError, ValueError)) as refusal:
        run_litert(model, inputs)
    assert litert_says in str(refusal.value)
    with pytest.raises(ModelError, match=match):
        run_ours(model, inputs)


@pytest.mark.parametrize("op", RANDOM_OPS)
def test_random_refuses_an_int32_output(op: str) -> None:
    model = build_random(op, (2, 2), 1, 1, out_dtype=np.int32)
    assert_both_refuse(model, [], "not float32", "Unsupported output datatype")


@pytest.mark.parametrize("op", RANDOM_OPS)
def test_random_refuses_an_int64_shape(op: str) -> None:
    model = build_random(op, (2, 2), 1, 1, runtime_shape=True, shape_dtype=np.int64)
    assert_both_refuse(model, [np.int64([2, 2])], "1-D int32", "shape->type != kTfLiteInt32")


def test_multinomial_refuses_rank_1_logits() -> None:
    b = ModelBuilder()
    g = b.main
    x, y = g.input("logits", (4,), np.float32), g.tensor("y", (1, 3), np.int64)
    g.op("MULTINOMIAL", [x, g.const("n", np.int32(3))], [y], seed=1, seed2=1)
    g.output(y)
    assert_both_refuse(
        b.build(), [_logits(1, 4)[0]], "2-D float32", "NumDimensions(logits_tensor) != 2"
    )


def test_multinomial_refuses_a_negative_sample_count() -> None:
    model = build_multinomial(1, 3, 2, 1, 1, runtime_samples=True)
    assert_both_refuse(model, [_logits(1, 3), np.int32(-1)], "num_samples >= 0", "num_samples >= 0")


def test_multinomial_refuses_a_float_output() -> None:
    model = build_multinomial(1, 3, 2, 1, 1, out_dtype=np.float32)
    assert_both_refuse(model, [_logits(1, 3)], "neither int32 nor int64", "Unsupported output")


def test_random_refuses_a_shape_over_the_cap_before_allocating() -> None:
    """Ours alone: LiteRT would try to allocate the 40 GB."""
    model = build_random("RANDOM_UNIFORM", (2, 2), 1, 1, runtime_shape=True)
    with pytest.raises(ModelError, match="over the cap"):
        run_ours(model, [np.int32([100000, 100000])])
