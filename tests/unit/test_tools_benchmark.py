"""benchmark: TFLite's statistics and lines, the run loop's stopping rules, memory, the
delegation summary, op profiling, and a round trip through the parser."""

from __future__ import annotations

import io
import json
import math
import time

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import JobError, ModelError
from delegate_runtime.tools import benchmark as bm
from delegate_runtime.tools import benchmark_format as fmt
from delegate_runtime.tools.benchmark import BenchmarkOptions, run_benchmark
from delegate_runtime.tools.benchmark_parser import parse_benchmark_output
from delegate_runtime.tools.progress import Reporter
from delegate_runtime.tools.session_info import delegation_summary
from delegate_runtime.tools.stats import Stat, cpp_double

FAST = dict(num_runs=3, min_secs=0.0, warmup_runs=1, warmup_min_secs=0.0)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """x[1,8] -> FULLY_CONNECTED(4) -> SOFTMAX."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 8), np.float32)
    w = g.const("w", np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32))
    bias = g.const("b", np.zeros(4, np.float32))
    h = g.tensor("h", (1, 4), np.float32)
    y = g.tensor("prob", (1, 4), np.float32)
    g.op("FULLY_CONNECTED", [x, w, bias], [h])
    g.op("SOFTMAX", [h], [y], beta=1.0)
    g.output(y)
    path = tmp_path_factory.mktemp("models") / "tiny.tflite"
    path.write_bytes(b.build())
    return str(path)


# -- statistics as TFLite computes them ---------------------------------------------


def test_stat_std_is_truncated_population_std():
    s = Stat.of([10, 20, 30, 41])
    mean = sum(s.values) / 4
    exact = math.sqrt(sum((v - mean) ** 2 for v in s.values) / 4)
    assert s.std == int(math.sqrt(int(exact**2)))
    assert isinstance(s.std, int)


def test_stat_percentiles_index_count_times_p_over_100():
    s = Stat.of(range(100, 0, -1))  # 100..1
    assert (s.percentile(5), s.percentile(50), s.percentile(95)) == (6, 51, 96)


@pytest.mark.parametrize(
    "values, line",
    [
        ([], "count=0 p5=0 median=0 p95=0"),
        ([5], "count=1 curr=5 p5=5 median=5 p95=5"),
        ([7, 7, 7], "count=3 curr=7(all same) p5=7 median=7 p95=7"),
        ([3, 1, 2], "count=3 first=3 curr=2 min=1 max=3 avg=2 std=0 p5=1 median=2 p95=3"),
        (
            [1041010, 1043222, 1030111],
            "count=3 first=1041010 curr=1030111 min=1030111 max=1043222 avg=1.03811e+06 "
            "std=5730 p5=1030111 median=1041010 p95=1043222",
        ),
    ],
    ids=["empty", "single", "all_same", "plain", "exponent"],
)
def test_stat_line(values, line):
    assert Stat.of(values).format() == line


def test_cpp_double_matches_ostream_defaults():
    assert [cpp_double(v) for v in (0.5, 1.0, 150.0, 8047.453, 1041760.0)] == [
        "0.5",
        "1",
        "150",
        "8047.45",
        "1.04176e+06",
    ]


def test_reference_lines():
    assert fmt.running(50, 1.0, 150.0) == (
        "Running benchmark for at least 50 iterations and at least 1 seconds but terminate "
        "if exceeding 150 seconds."
    )
    assert fmt.timings(1012210, 9716, 8047.45, 7927.52) == (
        "Inference timings in us: Init: 1012210, First inference: 9716, Warmup (avg): "
        "8047.45, Inference (avg): 7927.52"
    )
    assert fmt.memory_delta(271.453, 283.973) == (
        "Memory footprint delta from the start of the tool (MB): init=271.453 overall=283.973"
    )
    assert fmt.initialized(1012210) == "Initialized session in 1012.21ms."
    assert fmt.with_prefix("x") == "INFO: x" and fmt.with_prefix("") == ""


# -- the run loop ------------------------------------------------------------------------


class _SlowSession:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.calls = 0

    def invoke(self, inputs):
        self.calls += 1
        time.sleep(self.seconds)
        return []


def test_loop_runs_at_least_num_runs():
    s = _SlowSession(0.0)
    stat = bm._loop(s, [], 7, 0.0, 10.0, Reporter())
    assert stat.count == s.calls == 7


def test_loop_runs_at_least_min_secs():
    s = _SlowSession(0.01)
    start = time.perf_counter()
    stat = bm._loop(s, [], 1, 0.1, 10.0, Reporter())
    assert time.perf_counter() - start >= 0.1
    assert stat.count >= 5


def test_loop_stops_at_max_secs():
    s = _SlowSession(0.02)
    stat = bm._loop(s, [], 1000, 0.0, 0.1, Reporter())
    assert 2 <= stat.count < 20


def test_loop_reports_progress():
    seen = []
    reporter = Reporter(lambda stage, done, total: seen.append((stage, done, total)))
    reporter.start("benchmark", 3)
    bm._loop(_SlowSession(0.0), [], 3, 0.0, 10.0, reporter)
    assert seen == [
        ("benchmark", 0, 3),
        ("benchmark", 1, 3),
        ("benchmark", 2, 3),
        ("benchmark", 3, 3),
    ]


# -- whole benchmarks on the CPU reference ------------------------------------------


def test_benchmark_cpu_result_and_log(tiny_model):
    out = io.StringIO()
    r = run_benchmark(tiny_model, BenchmarkOptions(**FAST), out=out)
    assert out.getvalue() == r.log
    lines = r.log.splitlines()
    assert lines[0] == f"INFO: Loaded model {tiny_model}"
    assert lines[1].startswith("INFO: The input model file size (MB): ")
    assert lines[2].startswith("INFO: Initialized session in ")
    assert sum(line.startswith("INFO: count=") for line in lines) == 2
    assert any(line.startswith("INFO: Inference timings in us: Init: ") for line in lines)
    assert r.inference.count >= 3 and len(r.runs_us) == r.inference.count
    assert r.min_us <= r.inference.median_us <= r.max_us
    assert r.avg_us == pytest.approx(sum(r.runs_us) / len(r.runs_us))
    assert r.first_inference_us == r.warmup.first_us
    assert r.model_size_bytes > 0 and len(r.model_sha256) == 64
    assert r.delegation is None and r.device["kind"] == "cpu"
    json.dumps(r.to_dict())  # JSON-able


def test_benchmark_memory_is_measured(tiny_model):
    r = run_benchmark(tiny_model, BenchmarkOptions(report_peak_memory=True, **FAST))
    m = r.memory
    assert m.host_start_bytes > 0 and m.host_end_bytes > 0
    assert m.peak_mb is not None and m.peak_mb * 1024 * 1024 >= m.host_start_bytes
    assert m.overall_mb == pytest.approx((m.host_end_bytes - m.host_start_bytes) / 2**20)
    assert "Overall peak memory footprint (MB) via periodic monitoring: " in r.log


def test_benchmark_output_round_trips_through_the_parser(tiny_model):
    ours = run_benchmark(tiny_model, BenchmarkOptions(report_peak_memory=True, **FAST))
    parsed = parse_benchmark_output(ours.log)
    for attr in ("count", "first_us", "min_us", "max_us", "std_us", "p5_us", "median_us", "p95_us"):
        assert getattr(parsed.inference, attr) == getattr(ours.inference, attr), attr
    assert parsed.avg_us == pytest.approx(ours.avg_us, rel=1e-5)
    assert parsed.init_us == ours.init_us
    assert parsed.first_inference_us == ours.first_inference_us
    assert parsed.memory.peak_mb == pytest.approx(ours.memory.peak_mb, rel=1e-5)
    assert parsed.model_path == tiny_model


def test_op_profile_tables_and_json(tiny_model):
    r = run_benchmark(tiny_model, BenchmarkOptions(enable_op_profiling=True, **FAST))
    nodes = r.op_profile["nodes"]
    assert [n["node_type"] for n in nodes] == ["FULLY_CONNECTED", "SOFTMAX"]
    assert nodes[1]["name"] == "[prob]:1" and nodes[0]["backend"] == "cpu"
    assert r.op_profile["num_runs"] == r.inference.count  # warm-up runs are not profiled
    assert "============================== Run Order ==============================" in r.log
    assert "Number of nodes executed: 2" in r.log
    parsed = parse_benchmark_output(r.log).op_profile
    assert [n["name"] for n in parsed["nodes"]] == ["[h]:0", "[prob]:1"]
    assert sum(n["pct"] for n in parsed["nodes"]) == pytest.approx(100.0, abs=0.01)


def test_bad_model_is_a_model_error(tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ModelError):
        run_benchmark(str(bad), BenchmarkOptions(**FAST))


def test_missing_model_is_a_model_error(tmp_path):
    with pytest.raises(ModelError):
        run_benchmark(str(tmp_path / "missing.tflite"), BenchmarkOptions(**FAST))


def test_negative_runs_are_a_job_error(tiny_model):
    with pytest.raises(JobError):
        run_benchmark(tiny_model, BenchmarkOptions(num_runs=-1))


# -- delegation (a stand-in for the GPU session) --------------------------------------


class _FakeGpu:
    def __init__(self, delegated: int, total: int):
        self.delegation = {
            "nodes_delegated": delegated,
            "nodes_total": total,
            "partitions": 1,
            "unsupported": [("CUMSUM", "Operation is not supported.")] if delegated < total else [],
        }
        self.device_facts = {"vendor": "ACME", "name": "FakeCL", "driver_version": "1.2.3"}
        self.memory_bytes = 4096

    def invoke(self, inputs):
        return []


@pytest.fixture
def fake_gpu(monkeypatch):
    holder = {}

    def fake_open(model, delegate, **kw):
        holder["kw"] = kw
        return holder["session"]

    monkeypatch.setattr(bm, "open_session", fake_open)
    return holder


def test_full_delegation_lines_and_device_figures(tiny_model, fake_gpu):
    fake_gpu["session"] = _FakeGpu(2, 2)
    r = run_benchmark(tiny_model, BenchmarkOptions(use_gpu=True, precision="fp16", **FAST))
    assert fake_gpu["kw"]["precision"] == "fp16"
    assert fake_gpu["kw"]["enable_quant"] is True
    assert (
        "INFO: Replacing 2 out of 2 node(s) with delegate (TfLiteGpuDelegateV2) node, yielding 1 partitions"
        in r.log
    )
    assert fmt.applied(True, 1) in r.log
    assert r.delegation["fully_delegated"] is True
    assert r.memory.device_bytes == 4096
    assert r.versions["driver_version"] == "1.2.3" and r.device["name"] == "FakeCL"
    assert parse_benchmark_output(r.log).delegation["nodes_delegated"] == 2


def test_partial_delegation_is_reported(tiny_model, fake_gpu):
    fake_gpu["session"] = _FakeGpu(1, 2)
    r = run_benchmark(tiny_model, BenchmarkOptions(use_gpu=True, **FAST))
    assert "INFO: CUMSUM: Operation is not supported." in r.log
    assert "partially executed by the delegate w/ 1 delegate kernels." in r.log
    parsed = parse_benchmark_output(r.log).delegation
    assert parsed["fully_delegated"] is False
    assert parsed["unsupported"] == [{"op": "CUMSUM", "reason": "Operation is not supported."}]


def test_require_full_delegation_fails_on_fallback(tiny_model, fake_gpu):
    fake_gpu["session"] = _FakeGpu(1, 2)
    with pytest.raises(ModelError, match="Disallowed CPU fallback"):
        run_benchmark(
            tiny_model, BenchmarkOptions(use_gpu=True, require_full_delegation=True, **FAST)
        )


def test_serialization_token_defaults_to_the_model_hash(tiny_model, fake_gpu, tmp_path):
    fake_gpu["session"] = _FakeGpu(2, 2)
    r = run_benchmark(
        tiny_model, BenchmarkOptions(use_gpu=True, serialize_dir=str(tmp_path), **FAST)
    )
    assert fake_gpu["kw"]["serialization_dir"] == str(tmp_path)
    assert fake_gpu["kw"]["model_token"] == r.model_sha256


@pytest.mark.parametrize(
    "raw",
    [
        {
            "nodes_delegated": 3,
            "nodes_total": 4,
            "partitions": [0],
            "unsupported": {"CUMSUM": "no"},
        },
        {
            "delegated_nodes": 3,
            "total_nodes": 4,
            "num_partitions": 1,
            "unsupported_ops": [{"op": "CUMSUM", "reason": "no"}],
        },
    ],
    ids=["dict_of_reasons", "alternate_names"],
)
def test_delegation_summary_normalises(raw):
    class S:
        delegation = raw

    d = delegation_summary(S())
    assert d["nodes_delegated"] == 3 and d["nodes_total"] == 4 and d["partitions"] == 1
    assert d["fully_delegated"] is False
    assert d["unsupported"] == [{"op": "CUMSUM", "reason": "no"}]


# -- how the figures were measured (issue: figures a lab can trust) ----------------------


def test_every_result_records_how_it_was_measured(tiny_model):
    out = io.StringIO()
    r = run_benchmark(tiny_model, BenchmarkOptions(**{**FAST, "num_runs": 40}), out=out)
    m = r.to_dict()["measurement"]
    assert m["timing"] == {"path": "shipped", "profile": "none"}
    assert len(m["fingerprint"]) == 16
    assert m["config"]["option.use_gpu"] == {"value": False, "source": "option"}
    u = m["uncertainty"]
    assert u["runs"] == r.inference.count and u["median_us"] == r.inference.median_us
    lo, hi = u["ci95_us"]
    assert lo <= u["median_us"] <= hi
    assert u["warmup_runs"] == r.warmup.count >= 1
    assert u["cpu_time_per_inference_us"] > 0
    assert m["conditions"]["allowed_cpus"] >= 1 and "after" in m["conditions"]
    assert "Measured on the shipped path, configuration " + m["fingerprint"] in out.getvalue()


def test_warm_up_goes_on_until_two_windows_agree(tiny_model, monkeypatch):
    """A session whose first 30 runs are slow (a cold cache) is warmed past them."""
    calls = {"n": 0}
    real_invoke = None

    def slow_then_fast(self, inputs):
        calls["n"] += 1
        if calls["n"] <= 30:
            time.sleep(0.002)
        return real_invoke(self, inputs)

    from delegate_runtime.interpreter import Interpreter

    real_invoke = Interpreter.invoke
    monkeypatch.setattr(Interpreter, "invoke", slow_then_fast)
    r = run_benchmark(tiny_model, BenchmarkOptions(**FAST))
    u = r.measurement["uncertainty"]
    assert u["stable"] is True
    assert r.warmup.count > 30  # the slow runs were warm-up, not timed
    assert max(r.inference.runs_us) < 2000


def test_the_op_profile_is_a_pass_after_the_timed_runs(tiny_model, monkeypatch):
    """The timed runs run no op hook; the profile comes from runs of its own."""
    from delegate_runtime.interpreter import Interpreter

    hooked_runs = []
    real_invoke = Interpreter.invoke

    def spy(self, inputs):
        hooked_runs.append(self.op_hook is not None)
        return real_invoke(self, inputs)

    monkeypatch.setattr(Interpreter, "invoke", spy)
    r = run_benchmark(tiny_model, BenchmarkOptions(enable_op_profiling=True, **FAST))
    profiled = r.op_profile["num_runs"]
    timed_and_warm = r.inference.count + r.warmup.count
    assert hooked_runs == [False] * timed_and_warm + [True] * profiled
    assert r.measurement["timing"]["profile"] == f"separate pass ({profiled} runs)"


def test_a_gpu_timed_session_never_profiles(tiny_model):
    """On OpenCL (PoCL here) the timed session is the shipped one; the profiling session
    is opened for the profile's pass alone."""
    pytest.importorskip("pyopencl")
    from delegate_runtime.gpu.opencl.runtime import list_devices

    if not list_devices():
        pytest.skip("no OpenCL device")
    r = run_benchmark(tiny_model, BenchmarkOptions(use_gpu=True, enable_op_profiling=True, **FAST))
    config = r.measurement["config"]
    assert config["gpu.session.profiling"] == {"value": False, "source": "session"}
    assert config["option.use_gpu"]["value"] is True
    assert {n["backend"] for n in r.op_profile["nodes"]} == {"gpu"}
    assert r.measurement["conditions"]["platform"]
