"""Partitions too small for the GPU stay on the CPU (gpu/placement.py): which move, what
the session says and records, that the outputs are LiteRT's, and where the rule holds
(on GPUs at its default; everywhere when set; never under --require_full_delegation).

The CPU here is PoCL's device, which the rule leaves alone at its default, so the tests
set it (the option, or DEVICEFARM_GPU_MIN_WORK as a lab would)."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import JobError, ModelError, UsageError
from delegate_runtime.gpu.cpu_threads import fastest
from delegate_runtime.gpu.switches import Switches
from delegate_runtime.tools.config_record import configuration, fingerprint
from tests.conftest import require
from tests.ops.conftest import run_litert
from tests.ops.test_gpu_cpu_runs import session  # max_delegated_partitions=0, its log
from tests.ops.test_gpu_ops import opencl_device  # noqa: F401  (the fixture)

FEATURES, UNITS = 256, 64
FC_MACS = FEATURES * UNITS  # the first partition's work
ADD_ELEMENTS = UNITS  # the second's

pytestmark = pytest.mark.usefixtures("opencl_device")


def fc_ceil_add_model() -> bytes:
    """FULLY_CONNECTED (16,384 multiply-adds), CEIL (no GPU delegate takes it), then ADD
    (64 output elements): two GPU partitions of very different work around a CPU node."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, FEATURES))
    w = g.const(
        "w", np.random.default_rng(1).uniform(-0.1, 0.1, (UNITS, FEATURES)), dtype=np.float32
    )
    h, c, y = (g.tensor(n, (1, UNITS)) for n in ("h", "c", "y"))
    g.op("FULLY_CONNECTED", [x, w, -1], [h])
    g.op("CEIL", [h], [c])
    g.op("ADD", [c, h], [y])
    g.output(y)
    return b.build()


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).uniform(-3, 3, (1, FEATURES)).astype(np.float32)


def test_the_partition_below_the_minimum_runs_on_the_cpu(x: np.ndarray) -> None:
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    s, log = session(fc_ceil_add_model(), min_gpu_work=FC_MACS)
    d = s.delegation
    assert d.partitions == [[0]] and d.below_min_work == [[2]]
    assert d.to_dict()["below_min_work"] == {"nodes": 1, "partitions": 1, "min_work": FC_MACS}
    assert [run.nodes for run in s.cpu_runs] == [[1, 2]]  # CEIL and the moved ADD: one run
    assert (
        "INFO: 1 supported operations in 1 partition(s) will run on the CPU: each does less "
        f"work than the GPU's minimum of {FC_MACS} multiply-adds or output elements" in log
    )
    assert "INFO: 1 operations will run on the GPU, and the remaining 2 operations" in log
    np.testing.assert_allclose(s.invoke([x])[0], run_litert(fc_ceil_add_model(), [x])[0], 1e-5)


def test_a_model_below_the_minimum_runs_whole_on_litert(x: np.ndarray) -> None:
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    s, log = session(fc_ceil_add_model(), min_gpu_work=FC_MACS + 1)
    assert s.delegation.partitions == [] and s.delegation.delegated_nodes == 0
    assert s.executors == [] and s.cpu_fallback == "litert"
    assert "No operations will run on the GPU, and all 3 operations will run on the CPU." in log
    assert s.device_facts["model"]  # the results still name the device the job asked for
    np.testing.assert_allclose(s.invoke([x])[0], run_litert(fc_ceil_add_model(), [x])[0], 1e-5)


def test_at_its_default_the_rule_leaves_a_cpu_opencl_device_alone() -> None:
    s, _ = session(fc_ceil_add_model())
    assert not s.device_info.is_gpu  # PoCL: the delegate is what the farm tests here
    assert s.delegation.partitions == [[0], [2]] and s.delegation.below_min_work == []


def test_set_in_the_environment_it_holds_on_every_device() -> None:
    switches = Switches.from_env({"DEVICEFARM_GPU_MIN_WORK": str(FC_MACS)})
    s, _ = session(fc_ceil_add_model(), switches=switches)
    assert s.delegation.partitions == [[0]] and s.delegation.below_min_work == [[2]]


def test_a_bad_minimum_is_refused_naming_the_variable() -> None:
    with pytest.raises(UsageError, match=r"\$DEVICEFARM_GPU_MIN_WORK must be a whole number"):
        Switches.from_env({"DEVICEFARM_GPU_MIN_WORK": "2e6"})


def test_the_record_says_what_the_rule_moved() -> None:
    moved, _ = session(fc_ceil_add_model(), min_gpu_work=FC_MACS)
    kept, _ = session(fc_ceil_add_model(), min_gpu_work=0)
    moved_record, kept_record = configuration({}, moved), configuration({}, kept)
    assert moved_record["gpu.session.below_min_work"] == {"value": 1, "source": "session"}
    assert "gpu.session.below_min_work" not in kept_record
    assert fingerprint(moved_record) != fingerprint(kept_record)


def test_require_full_delegation_puts_every_partition_on_the_gpu(tmp_path) -> None:
    from delegate_runtime.tools.benchmark import BenchmarkOptions, run_benchmark

    path = tmp_path / "m.tflite"
    path.write_bytes(fc_ceil_add_model())
    options = BenchmarkOptions(
        use_gpu=True, num_runs=2, warmup_runs=1, require_full_delegation=True
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEVICEFARM_GPU_MIN_WORK", str(10**9))
        opts = options.gpu_session_options(read_model(path.read_bytes()))
    assert opts["min_gpu_work"] == 0
    with pytest.raises(ModelError, match="Disallowed CPU fallback"):  # CEIL: not the rule
        run_benchmark(str(path), options, out=io.StringIO())


class _Timed:
    """An interpreter stand-in whose invoke takes `seconds` (fastest's choice alone)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def get_input_details(self) -> list[dict]:
        return [{"index": 0, "shape": (1, 4), "dtype": np.float32}]

    def get_output_details(self) -> list[dict]:
        return [{"index": 1}]

    def set_tensor(self, index: int, value: np.ndarray) -> None:
        pass

    def invoke(self) -> None:
        time.sleep(self.seconds)

    def get_tensor(self, index: int) -> np.ndarray:
        return np.zeros(4, np.float32)


def test_a_small_run_keeps_the_thread_count_that_ran_it_fastest() -> None:
    slow, quick = _Timed(0.002), _Timed(0.0)
    assert fastest([slow, quick], [16, 1]) == (quick, 1)
    assert fastest([quick, slow], [16, 1]) == (quick, 16)
    assert fastest([slow], [16]) == (slow, 16)  # one candidate: not timed


def test_the_canary_checks_the_gpu_whatever_the_minimum(monkeypatch) -> None:
    """The canary's model is tiny; the placement rule must not move it off the GPU it
    checks (worker_agent/runners/tools.py)."""
    from worker_agent.devices import DeviceInfo
    from worker_agent.health import canary_model
    from worker_agent.runners.opencl import OpenclRunner

    monkeypatch.setenv("DEVICEFARM_GPU_MIN_WORK", str(10**9))
    seen = []
    runner = OpenclRunner(DeviceInfo("opencl:pocl:cpu", "opencl", facts={}))
    monkeypatch.setattr(runner, "check_canary_session", seen.append)
    data, inputs = canary_model()
    runner.canary(data, list(inputs))
    assert seen[0].delegation.fully_delegated and not seen[0].delegation.below_min_work


def test_a_small_run_is_timed_on_one_thread_only_against_a_large_pool() -> None:
    """cpu_runs.plan_cpu_runs: below the minimum work, one thread is tried against a pool of
    at least trial_min_pool threads (and kept where faster); a smaller pool is kept as is."""
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    from delegate_runtime.gpu.cpu_runs import plan_cpu_runs

    model = read_model(fc_ceil_add_model())

    def threads(pool: int, min_pool: int) -> int:
        [run] = plan_cpu_runs(model, [], threads=pool, small_work=10**9, trial_min_pool=min_pool)
        return run.threads

    assert threads(2, 8) == 2
    assert threads(8, 8) in (1, 8)
    assert threads(8, 9) == 8
    s, _ = session(fc_ceil_add_model(), min_gpu_work=10**9)
    assert configuration({}, s)["gpu.session.cpu_threads"]["value"] == [s.cpu_runs[0].threads]


def test_a_bad_input_to_a_model_run_whole_on_litert_gets_our_error(x: np.ndarray) -> None:
    """The whole-model LiteRT path lets set_tensor check the arrays; a refusal falls back
    to the session's own checks, which name the input."""
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    s, _ = session(fc_ceil_add_model(), min_gpu_work=FC_MACS + 1)
    with pytest.raises(JobError, match="input 0 'x' must be float32, got float64"):
        s.invoke([x.astype(np.float64)])
    with pytest.raises(JobError, match=r"input 0 'x' must have shape \[1, 256\], got \[1, 10\]"):
        s.invoke([x[:, :10]])
    with pytest.raises(JobError, match="model takes 1 inputs, 2 given"):
        s.invoke([x, x])
    strided = np.stack([x, x], axis=2)[:, :, 0]  # every other float: not contiguous
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(s.invoke([strided])[0], s.invoke([x])[0])


def test_an_input_that_is_no_array_gets_our_error_on_the_litert_path() -> None:
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    s, _ = session(fc_ceil_add_model(), min_gpu_work=FC_MACS + 1)
    with pytest.raises(JobError, match="input 0 'x' must be float32, got object"):
        s.invoke([None])


def test_the_stored_delegation_says_what_stayed_on_the_cpu() -> None:
    """What a result row stores (tools/session_info.py): the nodes the rule moved, only
    where it moved some."""
    from delegate_runtime.tools.session_info import delegation_summary

    moved, _ = session(fc_ceil_add_model(), min_gpu_work=FC_MACS)
    stored = delegation_summary(moved)
    assert (stored["nodes_delegated"], stored["nodes_total"]) == (1, 3)
    assert stored["below_min_work"] == {"nodes": 1, "partitions": 1, "min_work": FC_MACS}
    kept, _ = session(fc_ceil_add_model(), min_gpu_work=0)
    assert "below_min_work" not in delegation_summary(kept)
