"""The benchmark_model output parser, on hand-written samples of every variant and on our
own benchmark's output."""

from __future__ import annotations

import pytest

from delegate_runtime.tools.benchmark_parser import (
    BenchmarkParseError,
    parse_benchmark_output,
    parse_stat_line,
    strip_prefix,
)

MODERN_GPU = """\
INFO: STARTING!
INFO: Log parameter values verbosely: [0]
INFO: Graph: [/data/local/tmp/mobilenet.tflite]
INFO: Use gpu: [1]
INFO: Loaded model /data/local/tmp/mobilenet.tflite
INFO: Created TensorFlow Lite delegate for GPU.
INFO: Replacing 31 out of 31 node(s) with delegate (TfLiteGpuDelegateV2) node, yielding 1 partitions for the whole graph.
INFO: Explicitly applied GPU delegate, and the model graph will be completely executed by the delegate.
INFO: The input model file size (MB): 16.9008
INFO: Initialized session in 1012.21ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=62 first=9716 curr=7859 min=7585 max=9716 avg=8047.45 std=389 p5=7610 median=7952 p95=8929

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=126 first=7975 curr=7957 min=7584 max=8711 avg=7927.52 std=199 p5=7638 median=7906 p95=8339

INFO: Inference timings in us: Init: 1012210, First inference: 9716, Warmup (avg): 8047.45, Inference (avg): 7927.52
INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your one's own risk.
INFO: Memory footprint delta from the start of the tool (MB): init=271.453 overall=283.973
INFO: Overall peak memory footprint (MB) via periodic monitoring: 290.359
"""

NO_PREFIX = "\n".join(line.removeprefix("INFO: ") for line in MODERN_GPU.splitlines())

LOGCAT = "\n".join(
    line.replace("INFO: ", "I/tflite  ( 4242): ", 1) for line in MODERN_GPU.splitlines()
)

OLD_BUILD = """\
STARTING!
Num runs: [50]
Graph: [model.tflite]
Loaded model model.tflite
resolved reporter
Initialized session in 3.431ms
Running benchmark for at least 1 iterations and at least 0.5 seconds
count=203 first=3112 curr=2403 min=2301 max=3112 avg=2459.71 std=103

Running benchmark for at least 50 iterations and at least 1 seconds
count=412 first=2398 curr=2411 min=2290 max=3551 avg=2427.3 std=88

Average inference timings in us: Warmup: 2459.71, Init: 3431, Inference: 2427.3
Peak memory footprint (MB): init=1.23 overall=4.56
"""

ALL_SAME = """\
INFO: Loaded model tiny.tflite
INFO: Initialized session in 0.5ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=1 curr=12 p5=12 median=12 p95=12

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=50 curr=7(all same) p5=7 median=7 p95=7

INFO: Inference timings in us: Init: 500, First inference: 12, Warmup (avg): 12, Inference (avg): 7
"""

ALL_SAME_SPACED = ALL_SAME.replace("curr=7(all same)", "curr=7 (all same)")

EXPONENT = """\
INFO: Loaded model big.tflite
INFO: Initialized session in 2043.5ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=1 curr=1204331 p5=1204331 median=1204331 p95=1204331

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=50 first=1041010 curr=1043222 min=1030111 max=1062000 avg=1.04176e+06 std=7012 p5=1031000 median=1041500 p95=1058000

INFO: Inference timings in us: Init: 2043500, First inference: 1204331, Warmup (avg): 1.20433e+06, Inference (avg): 1.04176e+06
"""

PARTIAL = """\
INFO: Loaded model fallback.tflite
ERROR: Following operations are not supported by GPU delegate:
CUMSUM: Operation is not supported.
3 operations will run on the GPU, and the remaining 1 operations will run on the CPU.
INFO: Replacing 3 out of 4 node(s) with delegate (TfLiteGpuDelegateV2) node, yielding 1 partitions.
INFO: Explicitly applied GPU delegate, and the model graph will be partially executed by the delegate w/ 1 delegate kernels.
INFO: The input model file size (MB): 0.00156
INFO: Initialized session in 120.4ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=300 first=400 curr=350 min=340 max=400 avg=352.1 std=5 p5=341 median=350 p95=360

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=600 first=351 curr=349 min=339 max=420 avg=350.5 std=4 p5=342 median=349 p95=358

INFO: Inference timings in us: Init: 120400, First inference: 400, Warmup (avg): 352.1, Inference (avg): 350.5
"""

NONE_ON_GPU = """\
Following operations are not supported by GPU delegate:
CUMSUM: Operation is not supported.
No operations will run on the GPU, and all 1 operations will run on the CPU.
Loaded model cumsum.tflite
Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
count=10 first=5 curr=4 min=4 max=5 avg=4.1 std=0 p5=4 median=4 p95=5

Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
count=50 first=5 curr=4 min=4 max=6 avg=4.3 std=0 p5=4 median=4 p95=5
"""

OLD_WARNING = """\
WARNING: op code #42 cannot be handled by this delegate.
Loaded model old.tflite
Running benchmark for at least 1 iterations and at least 0.5 seconds
count=10 first=5 curr=4 min=4 max=5 avg=4.1 std=0

Running benchmark for at least 50 iterations and at least 1 seconds
count=50 first=5 curr=4 min=4 max=6 avg=4.3 std=0
"""

_TABLE = (
    "============================== {title} ==============================\n"
    "\t             [node type]\t  [first]\t [avg ms]\t     [%]\t  [cdf%]\t  [mem KB]\t[times called]\t[Name]\n"
    "\t                 CONV_2D\t    0.074\t    0.058\t 80.000%\t 80.000%\t     0.000\t        1\t[conv]:0\n"
    "\t                 SOFTMAX\t    0.020\t    0.015\t 20.000%\t100.000%\t     0.000\t        1\t[prob]:1\n"
    "\n"
)
PROFILED = (
    EXPONENT
    + "INFO: Profiling Info for Benchmark Initialization:\n"
    + _TABLE.format(title="Run Order").replace("CONV_2D", "AllocateTensors")
    + "INFO: Operator-wise Profiling Info for Regular Benchmark Runs:\n"
    + _TABLE.format(title="Run Order")
    + _TABLE.format(title="Top by Computation Time")
    + "Number of nodes executed: 2\n"
    "============================== Summary by node type ==============================\n"
    "\t             [Node type]\t  [count]\t  [avg ms]\t    [avg %]\t    [cdf %]\t  [mem KB]\t[times called]\n"
    "\t                 CONV_2D\t        1\t     0.058\t    80.000%\t    80.000%\t     0.000\t        1\n"
    "\t                 SOFTMAX\t        1\t     0.015\t    20.000%\t   100.000%\t     0.000\t        1\n"
    "\n"
    "Timings (microseconds): count=50 first=94 curr=73 min=70 max=120 avg=73.2 std=8\n"
    "Memory (bytes): count=0\n"
    "2 nodes observed\n"
)
OLD_PROFILED = EXPONENT + (
    "============================== Run Order ==============================\n"
    "\t             [node type]\t  [start]\t  [first]\t [avg ms]\t     [%]\t  [cdf%]\t  [mem KB]\t[times called]\t[Name]\n"
    "\t                 CONV_2D\t    0.000\t    0.074\t    0.058\t 80.000%\t 80.000%\t     0.000\t        1\tconv\n"
    "\n"
)

# name -> (text, expected figures)
CASES = {
    "modern_gpu": (
        MODERN_GPU,
        dict(
            count=126,
            avg_us=7927.52,
            std_us=199,
            p95_us=8339,
            warmup_count=62,
            init_us=1012210,
            first_inference_us=9716,
            init_mb=271.453,
            overall_mb=283.973,
            peak_mb=290.359,
            model_size_bytes=16900800,
            fully_delegated=True,
            nodes_delegated=31,
            partitions=1,
            model_path="/data/local/tmp/mobilenet.tflite",
        ),
    ),
    "no_prefix": (
        NO_PREFIX,
        dict(count=126, avg_us=7927.52, p5_us=7638, init_mb=271.453, fully_delegated=True),
    ),
    "logcat_prefix": (LOGCAT, dict(count=126, median_us=7906, peak_mb=290.359)),
    "old_build_no_percentiles": (
        OLD_BUILD,
        dict(
            count=412,
            avg_us=2427.3,
            std_us=88,
            p5_us=None,
            median_us=None,
            init_us=3431,
            first_inference_us=3112,
            init_mb=1.23,
            overall_mb=4.56,
            model_path="model.tflite",
        ),
    ),
    "all_same": (
        ALL_SAME,
        dict(
            count=50,
            avg_us=7.0,
            std_us=0,
            min_us=7,
            max_us=7,
            first_us=7,
            warmup_count=1,
            first_inference_us=12,
            p5_us=7,
        ),
    ),
    "all_same_spaced": (ALL_SAME_SPACED, dict(count=50, avg_us=7.0, min_us=7, max_us=7)),
    "exponent_avg": (
        EXPONENT,
        dict(count=50, avg_us=1.04176e06, std_us=7012, min_us=1030111, init_us=2043500),
    ),
    "partial_delegation": (
        PARTIAL,
        dict(
            count=600,
            fully_delegated=False,
            nodes_delegated=3,
            nodes_total=4,
            partitions=1,
            unsupported=[{"op": "CUMSUM", "reason": "Operation is not supported."}],
        ),
    ),
    "no_ops_on_gpu": (
        NONE_ON_GPU,
        dict(count=50, fully_delegated=False, nodes_delegated=0, nodes_total=1),
    ),
    "old_delegate_warning": (
        OLD_WARNING,
        dict(
            count=50,
            fully_delegated=False,
            unsupported=[{"op": "op code #42", "reason": "cannot be handled by this delegate"}],
        ),
    ),
    "op_profiling_tables": (PROFILED, dict(count=50, nodes_executed=2, profile_rows=2)),
    "op_profiling_old_start_column": (OLD_PROFILED, dict(count=50, profile_rows=1)),
}


def _figure(result, key):
    d = result.to_dict()
    if key in d:
        return d[key]
    if key == "warmup_count":
        return result.warmup.count
    if key == "first_us":
        return result.inference.first_us
    if key in ("init_mb", "overall_mb", "peak_mb"):
        return d["memory"][key]
    if key in ("fully_delegated", "nodes_delegated", "nodes_total", "partitions", "unsupported"):
        return d["delegation"][key]
    if key == "nodes_executed":
        return d["op_profile"]["nodes_executed"]
    if key == "profile_rows":
        return len(d["op_profile"]["nodes"])
    raise KeyError(key)


@pytest.mark.parametrize("name", list(CASES))
def test_variant(name):
    text, expected = CASES[name]
    result = parse_benchmark_output(text)
    assert result.source == "benchmark_model"
    assert result.log == text
    for key, want in expected.items():
        got = _figure(result, key)
        if isinstance(want, float):
            assert got == pytest.approx(want), key
        else:
            assert got == want, key


def test_profile_rows_ignore_the_initialization_section():
    result = parse_benchmark_output(PROFILED)
    nodes = result.op_profile["nodes"]
    assert [n["node_type"] for n in nodes] == ["CONV_2D", "SOFTMAX"]
    assert nodes[0] == {
        "node_type": "CONV_2D",
        "first_ms": 0.074,
        "avg_ms": 0.058,
        "pct": 80.0,
        "cdf_pct": 80.0,
        "mem_kb": 0.0,
        "times_called": 1,
        "name": "[conv]:0",
    }
    assert [r["node_type"] for r in result.op_profile["by_type"]] == ["CONV_2D", "SOFTMAX"]


def test_old_profile_keeps_the_start_column():
    row = parse_benchmark_output(OLD_PROFILED).op_profile["nodes"][0]
    assert row["start_ms"] == 0.0 and row["avg_ms"] == 0.058 and row["name"] == "conv"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "INFO: Loaded model m.tflite\nERROR: Failed to invoke the interpreter\n",
        MODERN_GPU.split("INFO: Running benchmark for at least 50")[0],
    ],
    ids=["empty", "failed", "warmup_only"],
)
def test_incomplete_output_is_an_error(text):
    with pytest.raises(BenchmarkParseError):
        parse_benchmark_output(text)


def test_failure_message_names_the_tool_error():
    with pytest.raises(BenchmarkParseError, match="Failed to invoke"):
        parse_benchmark_output("ERROR: Failed to invoke the interpreter\n")


@pytest.mark.parametrize(
    "line, prefix_free",
    [
        ("INFO: count=1 curr=5", "count=1 curr=5"),
        ("I/tflite  ( 1234): Loaded model x", "Loaded model x"),
        ("06-01 12:00:00.123  4242  4242 I tflite  : Loaded model x", "Loaded model x"),
        ("plain line", "plain line"),
    ],
)
def test_strip_prefix(line, prefix_free):
    assert strip_prefix(line) == prefix_free


def test_stat_line_count_zero():
    stats = parse_stat_line("count=0 p5=0 median=0 p95=0")
    assert stats.count == 0 and stats.avg_us is None
