"""Every command line the runner builds, checked against the official tools' flag tables
(simulator/flags.py, each entry from LiteRT's sources), and the simulated tools parsing
flags as TFLite's Flags::Parse does."""

from __future__ import annotations

import pytest

from farm_core.configs import CONFIGS
from worker_agent.android import invocations
from worker_agent.android.profile_output import op_profile_rows
from worker_agent.android.simulator import SimulatedPhone
from worker_agent.android.simulator.flags import (
    BENCHMARK_MODEL_FLAGS,
    RUN_EVAL_FLAGS,
    TABLES,
    parse,
)
from worker_agent.android.simulator.shell import run_line

SHA = "ab" * 32
INPUT_SHA = "cd" * 32
TOOL = {name: invocations.tool_path(name, SHA) for name in TABLES}
MODEL = invocations.model_path(SHA)
SETTINGS = {
    "plain": {},
    "tuned": {"num_runs": 7, "min_secs": 0.5, "warmup_min_secs": 0.2, "num_threads": 4},
    "inputs": {
        "inputs": [
            {"layer": "image", "shape": [1, 224, 224, 3], "sha256": INPUT_SHA},
            {"layer": "serving_default_mask", "shape": [1, 10], "sha256": INPUT_SHA},
        ]
    },
}


def _benchmark(config: str, settings: str) -> list[str]:
    return invocations.benchmark_argv(
        TOOL["benchmark_model"], MODEL, CONFIGS[config], SETTINGS[settings]
    )


def _profile(config: str, settings: str) -> list[str]:
    return invocations.profile_argv(
        TOOL["benchmark_model"], MODEL, CONFIGS[config], SETTINGS[settings]
    )


def _run_eval(config: str) -> list[str]:
    return invocations.run_eval_argv(TOOL["run_eval"], MODEL, CONFIGS[config], 50)


def _check(argv: list[str], table: dict) -> dict:
    parsed = parse(argv, table)
    assert parsed.errors == [] and parsed.unconsumed == [], argv
    assert len(parsed.given) == len(argv) - 1  # every argument is a flag, none repeated
    return parsed.values


@pytest.mark.parametrize("settings", list(SETTINGS))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_benchmark_lines_use_only_official_flags(config: str, settings: str) -> None:
    v = _check(_benchmark(config, settings), BENCHMARK_MODEL_FLAGS)
    assert v["graph"] == MODEL and v["use_gpu"] == (config != "cpu")
    # the timed runs are the shipped path: never profiled (a separate pass profiles)
    assert v["enable_op_profiling"] is False and v["report_peak_memory_footprint"] is True
    assert not any("profiling" in a for a in _benchmark(config, settings))
    if config != "cpu":
        assert v["gpu_precision_loss_allowed"] == (config == "gpu-fp16")


@pytest.mark.parametrize("settings", list(SETTINGS))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_profile_pass_is_the_same_job_with_profiling(config: str, settings: str) -> None:
    timed = _check(_benchmark(config, settings), BENCHMARK_MODEL_FLAGS)
    v = _check(_profile(config, settings), BENCHMARK_MODEL_FLAGS)
    assert v["enable_op_profiling"] is True
    # what it runs is what was timed: model, delegate, precision, threads and inputs
    same = ("graph", "use_gpu", "gpu_precision_loss_allowed", "num_threads", "input_layer",
            "input_layer_shape", "input_layer_value_files", "warmup_runs")  # fmt: skip
    assert {k: v[k] for k in same} == {k: timed[k] for k in same}
    assert v["num_runs"] == min(timed["num_runs"], invocations.PROFILE_MAX_RUNS)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_run_eval_lines_use_only_official_flags(config: str) -> None:
    v = _check(_run_eval(config), RUN_EVAL_FLAGS)
    assert v["model_file"] == MODEL and v["num_runs"] == 50
    assert v["delegate"] == ("" if config == "cpu" else "gpu")


@pytest.mark.parametrize("config, allowed", [("gpu-fp16", True), ("gpu-fp32", False)])
def test_diff_precision_follows_the_configuration(config: str, allowed: bool) -> None:
    # The GPU provider defaults gpu_precision_loss_allowed to true: fp32 must say false.
    assert parse(_run_eval(config), RUN_EVAL_FLAGS).values["gpu_precision_loss_allowed"] is allowed


def test_user_inputs_on_the_benchmark_line() -> None:
    v = _check(_benchmark("gpu-fp16", "inputs"), BENCHMARK_MODEL_FLAGS)
    remote = invocations.input_path(INPUT_SHA)
    assert v["input_layer"] == "image,serving_default_mask"
    assert v["input_layer_shape"] == "1,224,224,3:1,10"
    assert v["input_layer_value_files"] == f"image:{remote},serving_default_mask:{remote}"


def test_a_converter_input_name_is_escaped_where_benchmark_model_splits_on_colons() -> None:
    # --input_layer splits on ',' only; --input_layer_value_files items on an unescaped ':'
    # (SplitInputLayerNameAndValueFile): a name's own ':' is written '::' there alone
    items = [{"layer": "serving_default_input_1:0", "shape": [1, 4], "sha256": INPUT_SHA}]
    argv = invocations.benchmark_argv(
        TOOL["benchmark_model"], MODEL, CONFIGS["gpu-fp16"], {"inputs": items}
    )
    v = _check(argv, BENCHMARK_MODEL_FLAGS)
    remote = invocations.input_path(INPUT_SHA)
    assert v["input_layer"] == "serving_default_input_1:0"
    assert v["input_layer_shape"] == "1,4"
    assert v["input_layer_value_files"] == f"serving_default_input_1::0:{remote}"


@pytest.mark.parametrize(
    "item",
    [
        {"layer": "a,b", "shape": [1], "sha256": INPUT_SHA},
        {"layer": "a b", "shape": [1], "sha256": INPUT_SHA},
        {"layer": "a", "shape": [], "sha256": INPUT_SHA},
        {"layer": "a", "shape": [1, -2], "sha256": INPUT_SHA},
        {"layer": "a", "shape": [1], "sha256": "../x"},
    ],
)
def test_bad_user_inputs_are_refused(item: dict) -> None:
    from delegate_runtime.errors import JobError

    with pytest.raises(JobError):
        invocations.benchmark_argv(
            TOOL["benchmark_model"], MODEL, CONFIGS["cpu"], {"inputs": [item]}
        )


@pytest.mark.parametrize(
    "arg, unconsumed, error",
    [
        ("--model_file_path=/m.tflite", True, False),  # not run_eval's flag
        ("--use_gpu", True, False),  # a flag needs '=value'
        ("--use_gpu=yes", False, True),  # bools: true/false/1/0 only
        ("--num_runs=abc", False, True),
        ("--num_runs=12abc", False, False),  # istringstream reads the leading 12
        ("--delegate=gpu", False, False),
    ],
)
def test_flags_parse_as_tflite_does(arg: str, unconsumed: bool, error: bool) -> None:
    table = {**RUN_EVAL_FLAGS}
    parsed = parse(["run_eval", arg], table)
    assert bool(parsed.unconsumed) == unconsumed and bool(parsed.errors) == error


class _Stream:
    def __init__(self) -> None:
        import threading

        self.data = b""
        self.closed = threading.Event()

    def write(self, data: bytes) -> None:
        self.data += data


def _run(phone: SimulatedPhone, line: str) -> tuple[int, str]:
    s = _Stream()
    status = run_line(phone, s, line)
    return status, s.data.decode()


@pytest.fixture
def phone() -> SimulatedPhone:
    p = SimulatedPhone("galaxy-s23")
    for name in TABLES:
        p.fs.write(f"/data/local/tmp/{name}", b"\x7fELF", mode=0o755)
    return p


def test_run_eval_with_the_old_flag_fails_as_the_real_one(phone: SimulatedPhone) -> None:
    status, out = _run(phone, "/data/local/tmp/run_eval --model_file_path=/data/local/tmp/m.tflite")
    assert status == 1
    assert "Unconsumed cmdline flags: --model_file_path=/data/local/tmp/m.tflite" in out
    assert "Could not run the task evaluation!" in out


def test_benchmark_with_a_bad_value_prints_usage_and_fails(phone: SimulatedPhone) -> None:
    status, out = _run(phone, "/data/local/tmp/benchmark_model --graph=/x --num_runs=many")
    assert status == 1 and "Failed to parse flag 'num_runs' against argv '--num_runs=many'" in out
    assert "usage: " in out and "Benchmarking failed." in out


def test_benchmark_warns_on_unknown_flags_and_needs_graph(phone: SimulatedPhone) -> None:
    status, out = _run(phone, "/data/local/tmp/benchmark_model --use_gpu --model=/x")
    assert status == 1 and "Unconsumed cmdline flags: --use_gpu --model=/x" in out
    assert "Please specify the name of your TF Lite input file with --graph" in out


def one_input_model(name: str) -> bytes:
    """y = x * 2 on (1, 4) floats, its input tensor called `name`."""
    import numpy as np

    from delegate_runtime.builder import ModelBuilder

    b = ModelBuilder()
    g = b.main
    x = g.input(name, (1, 4), np.float32)
    y = g.tensor("y", (1, 4), np.float32)
    g.op("MUL", [x, g.const("w", np.full((1, 4), 2.0, np.float32))], [y])
    g.output(y)
    return b.build()


VALUES = "/data/local/tmp/devicefarm/inputs/v.bin"
#: benchmark_model --graph=/m.tflite with one input, as the phone's tool reads the flags.
INPUT_LINES = {
    "escaped": ("--input_layer=in:0 --input_layer_shape=1,4 "
                f"--input_layer_value_files=in::0:{VALUES}"),
    "unescaped": ("--input_layer=in:0 --input_layer_shape=1,4 "
                  f"--input_layer_value_files=in:0:{VALUES}"),
    "escaped in --input_layer too": ("--input_layer=in::0 --input_layer_shape=1,4 "
                                     f"--input_layer_value_files=in::0:{VALUES}"),
    "another name": ("--input_layer=other --input_layer_shape=1,4 "
                     f"--input_layer_value_files=other:{VALUES}"),
    "not an input layer": ("--input_layer=in:0 --input_layer_shape=1,4 "
                           f"--input_layer_value_files=other:{VALUES}"),
    "two shapes for one name": ("--input_layer=in:0 --input_layer_shape=1,4:1,4 "
                                f"--input_layer_value_files=in::0:{VALUES}"),
    "value file missing": ("--input_layer=in:0 --input_layer_shape=1,4 "
                           "--input_layer_value_files=in::0:/data/local/tmp/none.bin"),
    "value file of the wrong size": ("--input_layer=in:0 --input_layer_shape=1,4 "
                                     f"--input_layer_value_files=in::0:{VALUES}8"),
    "rank differs": ("--input_layer=in:0 --input_layer_shape=4 "
                     f"--input_layer_value_files=in::0:{VALUES}"),
}  # fmt: skip
#: line -> (exit status, what the real tool prints: benchmark_tflite_model.cc, logging.h)
INPUT_OUTCOMES = {
    "escaped": (0, "count="),
    "unescaped": (1, f"ERROR: in:0:{VALUES} contains more than one delimiter."),
    "escaped in --input_layer too": (
        134, "FATAL: Cannot find the corresponding input_layer name(in:0) in --input_layer as in::0"
    ),
    "another name": (0, "WARN: Tensor # 0 is named in:0 but flags call it other"),
    "not an input layer": (
        134, "FATAL: Cannot find the corresponding input_layer name(other) in --input_layer as in:0"
    ),
    "two shapes for one name": (1, "must match the number of items in --input_layer (in:0, with 1 items)"),
    "value file missing": (
        134, "FATAL: Failed to read the input_layer_value_file:/data/local/tmp/none.bin"
    ),
    "value file of the wrong size": (
        134, f"FATAL: The size of {VALUES}8 is 8 bytes. It should be 16 bytes."
    ),
    "rank differs": (1, "ERROR: Input tensor #0 should have 2 dimensions!"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(INPUT_LINES))
def test_benchmark_reads_input_layer_flags_as_the_real_tool(
    phone: SimulatedPhone, case: str
) -> None:
    phone.fs.write("/data/local/tmp/m.tflite", one_input_model("in:0"))
    phone.fs.write(VALUES, b"\0" * 16, mkdirs=True)
    phone.fs.write(f"{VALUES}8", b"\0" * 8, mkdirs=True)
    line = (
        "/data/local/tmp/benchmark_model --graph=/data/local/tmp/m.tflite --num_runs=2 "
        f"--warmup_runs=1 --min_secs=0 --warmup_min_secs=0 {INPUT_LINES[case]}"
    )
    status, out = _run(phone, line)
    want_status, want_text = INPUT_OUTCOMES[case]
    assert (status, want_text in out) == (want_status, True), out


def test_profile_rows_name_the_backend() -> None:
    profile = {
        "nodes": [
            {"node_type": "TfLiteGpuDelegateV2", "name": "[out]:3", "avg_ms": 1.5,
             "first_ms": 2.0, "times_called": 1},
            {"node_type": "CUMSUM", "name": "[c]:4", "avg_ms": 0.2, "first_ms": 0.3,
             "times_called": 1},
        ]
    }  # fmt: skip
    rows = op_profile_rows(profile)
    assert [(r["node"], r["op"], r["backend"], r["avg_ms"]) for r in rows] == [
        ("[out]:3", "TfLiteGpuDelegateV2", "gpu", 1.5),
        ("[c]:4", "CUMSUM", "cpu", 0.2),
    ]
    assert op_profile_rows(None) == []
