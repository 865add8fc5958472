"""Each flag the runner builds is a flag the official tools define.

The oracle is the official sources' flag names, copied here with their paths in
google-ai-edge/LiteRT (each provider's `CreateFlags`, run_eval.cc's and
benchmark_model.cc's `GetFlags`): not farm_core.delegate_flags' table, which is what is
checked. A flag the runner wrote that is not here would be left unconsumed by the real
tool ("Unconsumed cmdline flags"), which then runs with its defaults.
"""

from __future__ import annotations

import pytest

from farm_core.configs import canonical, parse_config
from farm_core.delegate_flags import FLAG_TABLE
from worker_agent.android import invocations

#: tflite/tools/delegates/<x>_delegate_provider.cc, CreateFlags (copied 2026-12, LiteRT main).
OFFICIAL = {
    "tflite/tools/delegates/gpu_delegate_provider.cc": {
        "use_gpu", "gpu_precision_loss_allowed", "gpu_experimental_enable_quant",
        "gpu_inference_for_sustained_speed", "gpu_backend", "gpu_wait_type",
    },
    "tflite/tools/delegates/nnapi_delegate_provider.cc": {
        "use_nnapi", "nnapi_execution_preference", "nnapi_execution_priority",
        "nnapi_accelerator_name", "disable_nnapi_cpu", "nnapi_allow_fp16",
        "nnapi_allow_dynamic_dimensions", "nnapi_use_burst_mode", "nnapi_support_library_path",
    },
    "tflite/tools/delegates/hexagon_delegate_provider.cc": {
        "use_hexagon", "hexagon_lib_path", "hexagon_profiling",
    },
    "tflite/tools/delegates/xnnpack_delegate_provider.cc": {
        "use_xnnpack", "xnnpack_force_fp16", "xnnpack_weight_cache_file_path",
        "xnnpack_runtime_flags",
    },
    "tflite/tools/delegates/default_execution_provider.cc": {
        "help", "num_threads", "max_delegated_partitions", "min_nodes_per_partition",
        "delegate_serialize_dir", "delegate_serialize_token", "first_delegate_node_index",
        "last_delegate_node_index",
    },
    "tflite/tools/benchmark/benchmark_model.cc": {
        "num_runs", "min_secs", "max_secs", "run_delay", "run_frequency", "num_threads",
        "use_caching", "benchmark_name", "output_prefix", "warmup_runs", "warmup_min_secs",
        "verbose", "dry_run", "report_peak_memory_footprint",
        "memory_footprint_check_interval_ms",
    },
    "tflite/tools/benchmark/benchmark_tflite_model.cc": {
        "graph", "input_layer", "input_layer_shape", "input_layer_value_range",
        "input_layer_value_files", "allow_fp16", "require_full_delegation",
        "enable_op_profiling",
    },
    "tflite/tools/evaluation/tasks/inference_diff/run_eval.cc": {
        "model_file", "output_file_path", "num_runs", "num_interpreter_threads", "delegate",
    },
}  # fmt: skip
PROVIDERS = {p for p in OFFICIAL if "/delegates/" in p}
BENCHMARK_MODEL = set().union(*(OFFICIAL[p] for p in OFFICIAL if "run_eval" not in p))
RUN_EVAL = OFFICIAL["tflite/tools/evaluation/tasks/inference_diff/run_eval.cc"].union(
    *(OFFICIAL[p] for p in PROVIDERS)
)
#: run_eval.cc's --delegate values (ParseStringToDelegateType).
EVAL_DELEGATES = {"", "nnapi", "gpu", "hexagon", "xnnpack", "coreml"}

CONFIGS = [
    "cpu", "gpu-fp32", "gpu-fp16", "cpu:threads=4", "xnnpack", "xnnpack:threads=4;fp16=true",
    "gpu:backend=cl", "gpu:backend=gl;precision=fp16", "gpu:quant=false",
    "gpu:sustained=true", "gpu:serialize=true", "nnapi",
    "nnapi:accelerator=google-edgetpu;preference=sustained_speed;fp16=true",
    "hexagon", "hexagon:profiling=true",
]  # fmt: skip
MODEL = "/data/local/tmp/devicefarm/" + "a" * 64 + ".tflite"


def _names(argv: list[str]) -> list[str]:
    return [a[2:].split("=", 1)[0] for a in argv[1:]]


@pytest.mark.parametrize("config", CONFIGS)
def test_benchmark_model_flags_are_official(config: str) -> None:
    c = parse_config(config)[0]
    argv = invocations.benchmark_argv("/t/benchmark_model", MODEL, c, {"num_threads": 2})
    assert set(_names(argv)) - BENCHMARK_MODEL == set()
    assert all(a.startswith("--") and "=" in a for a in argv[1:])  # Flags::Parse's form


@pytest.mark.parametrize("config", CONFIGS)
def test_profile_pass_flags_are_official(config: str) -> None:
    argv = invocations.profile_argv("/t/benchmark_model", MODEL, parse_config(config)[0], {})
    assert set(_names(argv)) - BENCHMARK_MODEL == set()


@pytest.mark.parametrize("config", CONFIGS)
def test_run_eval_flags_are_official(config: str) -> None:
    argv = invocations.run_eval_argv("/t/run_eval", MODEL, parse_config(config)[0], 5)
    assert set(_names(argv)) - RUN_EVAL == set()
    delegate = next(a for a in argv if a.startswith("--delegate="))
    assert delegate.removeprefix("--delegate=") in EVAL_DELEGATES


@pytest.mark.parametrize("rule", FLAG_TABLE, ids=lambda r: f"{r.delegate}.{r.option}.{r.flag}")
def test_table_cites_the_file_that_defines_its_flag(rule) -> None:
    assert rule.flag in OFFICIAL[rule.source]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("gpu-fp16", ["--use_gpu=true", "--gpu_precision_loss_allowed=true"]),
        ("gpu-fp32", ["--use_gpu=true", "--gpu_precision_loss_allowed=false"]),
        ("cpu", ["--use_gpu=false"]),
        ("gpu:backend=gl", ["--use_gpu=true", "--gpu_precision_loss_allowed=false",
                            "--gpu_backend=gl"]),
        ("gpu:serialize=true", ["--use_gpu=true", "--gpu_precision_loss_allowed=false",
                                "--delegate_serialize_dir=/data/local/tmp/devicefarm/serialized",
                                "--delegate_serialize_token=" + "a" * 64]),
        ("nnapi:accelerator=qti-dsp;preference=low_power;fp16=true",
         ["--use_nnapi=true", "--nnapi_accelerator_name=qti-dsp",
          "--nnapi_execution_preference=low_power", "--nnapi_allow_fp16=true"]),
        ("hexagon", ["--use_hexagon=true", "--hexagon_lib_path=/data/local/tmp"]),
        ("xnnpack:threads=4", ["--use_xnnpack=true", "--num_threads=4"]),
    ],
)  # fmt: skip
def test_delegate_flags_of_a_configuration(config: str, expected: list[str]) -> None:
    argv = invocations.benchmark_argv("/t/b", MODEL, parse_config(config)[0], {"num_threads": 2})
    tail = argv[6:-1]  # after graph, runs and times; before the peak-memory flag
    assert [a for a in tail if not a.startswith("--num_threads=2")] == expected
    # a configuration's own thread count wins over the campaign's
    assert argv.count("--num_threads=2") == (0 if "threads" in canonical(config) else 1)
