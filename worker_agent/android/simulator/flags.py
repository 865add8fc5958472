"""The official tools' flags, one table per tool, and TFLite's `Flags::Parse`.

Each entry names the LiteRT source that defines it (paths under google-ai-edge/LiteRT's
`tflite/tools/`). Both tools also take the delegate providers' flags
(`delegates/tflite_execution_providers`); the default provider's and the GPU provider's
and the NNAPI, Hexagon and XNNPACK providers' are here (copied from their
`CreateFlags`); the others (external, stable delegate, Core ML) are not simulated, so the
simulator treats them as unknown: stricter than a phone, never more lenient.

`Flags::Parse` (command_line_flags.cc): an argument is a flag only as `--name=value`
(a bare `--use_gpu` is not); a value that does not parse (bool: true/false/1/0 only) is
an error ("Failed to parse flag 'name' against argv '...'") and the tool prints its usage
and fails; anything else is left unconsumed, and the tool only warns
("Unconsumed cmdline flags: ...") and runs with its defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

BENCHMARK_MODEL_CC = "tools/benchmark/benchmark_model.cc"
BENCHMARK_TFLITE_MODEL_CC = "tools/benchmark/benchmark_tflite_model.cc"
DEFAULT_PROVIDER_CC = "tools/delegates/default_execution_provider.cc"
GPU_PROVIDER_CC = "tools/delegates/gpu_delegate_provider.cc"
RUN_EVAL_CC = "tools/evaluation/tasks/inference_diff/run_eval.cc"
NNAPI_PROVIDER_CC = "tools/delegates/nnapi_delegate_provider.cc"
HEXAGON_PROVIDER_CC = "tools/delegates/hexagon_delegate_provider.cc"
XNNPACK_PROVIDER_CC = "tools/delegates/xnnpack_delegate_provider.cc"


@dataclass(frozen=True)
class Flag:
    name: str
    type: str  #: bool, int32, float or string (Flag::GetTypeName)
    default: Any
    source: str  #: the LiteRT file that defines it


def _table(*groups: tuple[str, list[tuple[str, str, Any]]]) -> dict[str, Flag]:
    return {n: Flag(n, t, d, src) for src, flags in groups for n, t, d in flags}


_DEFAULT_PROVIDER = (
    DEFAULT_PROVIDER_CC,
    [
        ("help", "bool", False),
        ("num_threads", "int32", -1),
        ("max_delegated_partitions", "int32", 0),
        ("min_nodes_per_partition", "int32", 0),
        ("first_delegate_node_index", "int32", 0),
        ("last_delegate_node_index", "int32", 2**31 - 1),
        ("gpu_invoke_loop_times", "int32", -1),
        ("delegate_serialize_dir", "string", ""),
        ("delegate_serialize_token", "string", ""),
    ],
)
_GPU_PROVIDER = (
    GPU_PROVIDER_CC,
    [
        ("use_gpu", "bool", False),
        ("gpu_precision_loss_allowed", "bool", True),
        ("gpu_experimental_enable_quant", "bool", True),
        ("gpu_inference_for_sustained_speed", "bool", False),
        ("gpu_backend", "string", ""),
    ],
)
_NNAPI_PROVIDER = (
    NNAPI_PROVIDER_CC,
    [
        ("use_nnapi", "bool", False),
        ("nnapi_execution_preference", "string", ""),
        ("nnapi_execution_priority", "string", ""),
        ("nnapi_accelerator_name", "string", ""),
        ("disable_nnapi_cpu", "bool", True),
        ("nnapi_allow_fp16", "bool", False),
        ("nnapi_allow_dynamic_dimensions", "bool", False),
        ("nnapi_use_burst_mode", "bool", False),
        ("nnapi_support_library_path", "string", ""),
    ],
)
#: Built with TFLITE_ENABLE_HEXAGON (the Android arm builds).
_HEXAGON_PROVIDER = (
    HEXAGON_PROVIDER_CC,
    [
        ("use_hexagon", "bool", False),
        ("hexagon_lib_path", "string", "/data/local/tmp"),
        ("hexagon_profiling", "bool", False),
    ],
)
_XNNPACK_PROVIDER = (
    XNNPACK_PROVIDER_CC,
    [
        ("use_xnnpack", "bool", False),
        ("xnnpack_force_fp16", "bool", False),
        ("xnnpack_weight_cache_file_path", "string", ""),
        ("xnnpack_runtime_flags", "int32", 0),
    ],
)
_PROVIDERS = (_DEFAULT_PROVIDER, _GPU_PROVIDER, _NNAPI_PROVIDER, _HEXAGON_PROVIDER,
              _XNNPACK_PROVIDER)  # fmt: skip

#: benchmark_model: BenchmarkModel::GetFlags, BenchmarkTfLiteModel::GetFlags, providers.
BENCHMARK_MODEL_FLAGS = _table(
    (
        BENCHMARK_MODEL_CC,
        [
            ("num_runs", "int32", 50),
            ("min_secs", "float", 1.0),
            ("max_secs", "float", 150.0),
            ("run_delay", "float", -1.0),
            ("run_frequency", "float", -1.0),
            ("num_threads", "int32", -1),
            ("use_caching", "bool", False),
            ("benchmark_name", "string", ""),
            ("output_prefix", "string", ""),
            ("warmup_runs", "int32", 1),
            ("warmup_min_secs", "float", 0.5),
            ("verbose", "bool", False),
            ("dry_run", "bool", False),
            ("report_peak_memory_footprint", "bool", False),
            ("memory_footprint_check_interval_ms", "int32", 50),
        ],
    ),
    (
        BENCHMARK_TFLITE_MODEL_CC,
        [
            ("graph", "string", ""),
            ("input_layer", "string", ""),
            ("input_layer_shape", "string", ""),
            ("input_layer_value_range", "string", ""),
            ("input_layer_value_files", "string", ""),
            ("allow_fp16", "bool", False),
            ("require_full_delegation", "bool", False),
            ("enable_op_profiling", "bool", False),
            ("op_profiling_output_mode", "string", "stdout"),
            ("op_profiling_output_file", "string", ""),
            ("max_profiling_buffer_entries", "int32", 1024),
            ("allow_dynamic_profiling_buffer_increase", "bool", False),
            ("profiling_output_csv_file", "string", ""),
            ("print_preinvoke_state", "bool", False),
            ("print_postinvoke_state", "bool", False),
            ("release_dynamic_tensors", "bool", False),
            ("optimize_memory_for_large_tensors", "int32", 0),
            ("disable_delegate_clustering", "bool", False),
            ("output_filepath", "string", ""),
            ("signature_to_run_for", "string", ""),
            ("list_signatures", "bool", False),
        ],
    ),
    *_PROVIDERS,
)

#: inference_diff's run_eval: InferenceDiff::GetFlags, then the providers (TaskExecutor).
RUN_EVAL_FLAGS = _table(
    (
        RUN_EVAL_CC,
        [
            ("model_file", "string", ""),
            ("output_file_path", "string", ""),
            ("num_runs", "int32", 50),
            ("num_interpreter_threads", "int32", 1),
            ("delegate", "string", ""),
        ],
    ),
    *_PROVIDERS,
)

TABLES = {"benchmark_model": BENCHMARK_MODEL_FLAGS, "run_eval": RUN_EVAL_FLAGS}

_INT = re.compile(r"\s*[-+]?\d+")
_FLOAT = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _value(flag: Flag, text: str) -> tuple[bool, Any]:
    """ParseFlag<T>: bool takes true/false/1/0 only; numbers as istringstream reads
    them (a leading number is enough: "12abc" reads 12); strings as given."""
    if flag.type == "bool":
        if text not in ("true", "false", "0", "1"):
            return False, None
        return True, text in ("true", "1")
    if flag.type in ("int32", "float"):
        m = (_INT if flag.type == "int32" else _FLOAT).match(text)
        if not m:
            return False, None
        return True, int(m.group()) if flag.type == "int32" else float(m.group())
    return True, text


@dataclass
class Parsed:
    values: dict[str, Any] = field(default_factory=dict)  #: every flag, default or given
    given: set[str] = field(default_factory=set)
    unconsumed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  #: "Failed to parse flag ..." lines


def parse(argv: list[str], table: dict[str, Flag]) -> Parsed:
    """`Flags::Parse` over argv[1:]: each flag takes its first `--name=` argument."""
    out = Parsed(values={n: f.default for n, f in table.items()})
    args = list(argv[1:])
    consumed = [False] * len(args)
    for name, flag in table.items():
        prefix = f"--{name}="
        for i, arg in enumerate(args):
            if consumed[i] or not arg.startswith(prefix):
                continue
            consumed[i] = True
            ok, value = _value(flag, arg[len(prefix) :])
            if ok:
                out.values[name] = value
                out.given.add(name)
            else:
                out.errors.append(f"Failed to parse flag '{name}' against argv '{arg}'")
            break
    out.unconsumed = [a for a, used in zip(args, consumed, strict=True) if not used]
    return out


def usage(prog: str, table: dict[str, Flag]) -> str:
    """`Flags::Usage`, abridged: one line per flag with its default and type."""
    lines = [f"usage: {prog} <flags>", "Flags:"]
    for f in table.values():
        default = str(f.default).lower() if f.type == "bool" else f.default
        lines.append(f"\t--{f.name}={default}\t{f.type}\toptional")
    return "\n".join(lines) + "\n"
