"""Inference diff: TFLite's input distribution and four-line format, error figures,
the worst element, and the reference choice."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import litert
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import JobError
from delegate_runtime.reader import read_model
from delegate_runtime.tools import diff as diff_mod
from delegate_runtime.tools.benchmark import BenchmarkOptions
from delegate_runtime.tools.diff import FloatStat, OutputDiff, format_diff, run_inference_diff
from delegate_runtime.tools.inputs import benchmark_inputs, diff_inputs, truncated_unit_normal
from delegate_runtime.tools.stats import Stat


def _model_bytes(dtype=np.float32) -> bytes:
    """x[1,16] -> ADD(x, 1.0) -> y; int8 models are quantized end to end."""
    b = ModelBuilder()
    g = b.main
    if dtype == np.int8:
        q = (0.05, 0)
        x = g.input("x", (1, 16), np.int8, quant=q)
        c = g.const("one", np.full((1, 16), 20, np.int8), quant=q)
        y = g.tensor("y", (1, 16), np.int8, quant=q)
    else:
        x = g.input("x", (1, 16), dtype)
        c = g.const("one", np.ones((1, 16), dtype))
        y = g.tensor("y", (1, 16), dtype)
    g.op("ADD", [x, c], [y])
    g.output(y)
    return b.build()


@pytest.fixture(scope="module")
def add_model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("diff") / "add.tflite"
    path.write_bytes(_model_bytes())
    return str(path)


# -- inputs ---------------------------------------------------------------------------


def test_truncated_normal_stays_in_unit_interval():
    u = truncated_unit_normal(np.random.default_rng(0), 20000)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01  # symmetric about the mean


@pytest.mark.parametrize(
    "dtype, lo, hi",
    [(np.float32, -1.0, 1.0), (np.int8, -128, 127)],
    ids=["float_in_minus1_1", "int8_over_its_range"],
)
def test_diff_inputs_ranges(dtype, lo, hi):
    model = read_model(_model_bytes(dtype))
    xs = np.concatenate([diff_inputs(model, np.random.default_rng(s))[0] for s in range(200)])
    assert xs.dtype == dtype
    assert xs.min() >= lo and xs.max() <= hi
    assert xs.min() < lo + 0.3 * (hi - lo) and xs.max() > hi - 0.3 * (hi - lo)


@pytest.mark.parametrize(
    "dtype, lo, hi", [(np.float32, -0.5, 0.5), (np.int8, -127, 127)], ids=["float", "int8"]
)
def test_benchmark_inputs_ranges(dtype, lo, hi):
    model = read_model(_model_bytes(dtype))
    xs = np.concatenate([benchmark_inputs(model, np.random.default_rng(s))[0] for s in range(50)])
    assert xs.dtype == dtype and xs.min() >= lo and xs.max() <= hi


# -- figures and format ---------------------------------------------------------------------


def test_output_diff_mean_and_worst_element():
    d = OutputDiff(0, "y")
    ref = np.zeros((2, 3), np.float32)
    d.add(0, ref, ref + 0.1)
    worse = ref.copy()
    worse[1, 2] = 0.6
    d.add(1, ref, worse)
    assert d.per_run.values == pytest.approx([0.1, 0.1])
    assert d.max_error == pytest.approx(0.6)
    assert d.worst == {"run": 1, "index": [1, 2], "reference": 0.0, "test": pytest.approx(0.6)}


def test_output_diff_nan_is_the_worst():
    d = OutputDiff(0, "y")
    d.add(0, np.zeros(3), np.array([0.0, np.nan, 5.0]))
    assert np.isnan(d.max_error) and d.worst["index"] == [1]


def test_output_diff_shape_mismatch_is_a_bug():
    with pytest.raises(RuntimeError, match="shape"):
        OutputDiff(0, "y").add(0, np.zeros(3), np.zeros(4))


def test_float_stat_population_std():
    s = FloatStat([1.0, 2.0, 3.0, 4.0])
    assert s.avg == 2.5 and s.std == pytest.approx(np.std([1, 2, 3, 4]))


def test_four_line_format():
    o = OutputDiff(0, "y", FloatStat([1.5e-5, 2.5e-5]))
    text = format_diff(2, Stat.of([84000, 84728]), Stat.of([7000, 7563]), [o])
    assert text == (
        "Num evaluation runs: 2\n"
        "Reference run latency: avg=84364(us), std_dev=364(us)\n"
        "Test run latency: avg=7281.5(us), std_dev=281(us)\n"
        "OutputDiff[0]: avg_error=2e-05, std_dev=5e-06\n"
    )


# -- whole runs -------------------------------------------------------------------------------


def test_cpu_against_reference_is_exact_and_json_adds_max_error(add_model):
    r = run_inference_diff(add_model, BenchmarkOptions(), num_runs=4, seed=3)
    lines = r.log.splitlines()
    assert lines[0] == "Num evaluation runs: 4"
    assert lines[1].startswith("Reference run latency: avg=")
    assert lines[3].startswith("OutputDiff[0]: avg_error=0, std_dev=0")
    d = r.to_dict()
    assert d["outputs"][0]["max_error"] == 0.0 and d["outputs"][0]["worst"]["run"] == 0
    assert d["reference_latency"]["count"] == 4 and len(d["test_latency"]["runs_us"]) == 4


def test_fp16_test_shows_its_rounding(add_model):
    r = run_inference_diff(add_model, BenchmarkOptions(precision="fp16"), num_runs=3, seed=1)
    out = r.outputs[0]
    assert 0 < out.max_error <= 2.0**-10 * 2  # half an fp16 ulp of values up to 2
    assert out.per_run.avg > 0


def test_reference_is_litert_when_installed(add_model):
    r = run_inference_diff(add_model, BenchmarkOptions(), num_runs=1, seed=0)
    expected = "litert" if litert.available() else "delegate_runtime cpu"
    assert r.reference.startswith(expected)


def test_reference_falls_back_to_ours(add_model, monkeypatch):
    monkeypatch.setattr(litert, "available", lambda: False)
    r = run_inference_diff(add_model, BenchmarkOptions(), num_runs=1, seed=0)
    assert r.reference.startswith("delegate_runtime cpu")


def test_same_seed_same_inputs(add_model, monkeypatch):
    seen = []
    real = diff_mod.diff_inputs
    monkeypatch.setattr(
        diff_mod, "diff_inputs", lambda m, rng: seen.append(real(m, rng)) or seen[-1]
    )
    run_inference_diff(add_model, BenchmarkOptions(), num_runs=1, seed=7)
    run_inference_diff(add_model, BenchmarkOptions(), num_runs=1, seed=7)
    np.testing.assert_array_equal(seen[0][0], seen[1][0])


def test_zero_runs_is_a_job_error(add_model):
    with pytest.raises(JobError):
        run_inference_diff(add_model, BenchmarkOptions(), num_runs=0)
