"""Every command line the runner sends to a phone, built here and only here: argument
lists of fixed words, paths derived from content hashes, and numbers, quoted with shlex.
A user-supplied name never reaches a shell line.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from delegate_runtime.errors import JobError
from farm_core.configs import RunConfig
from farm_core.delegate_flags import EVAL_DELEGATE, delegate_flags

#: The runner's folder on the phone (the shell user can write /data/local/tmp).
REMOTE_DIR = "/data/local/tmp/devicefarm"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: A layer name benchmark_model can take: --input_layer splits on ',' (a name's ':' is
#: escaped where the tool splits on it: value_files, below).
_LAYER = re.compile(r"^[A-Za-z0-9_./;:-]+$")
#: The job setting with the user's own inputs (see `user_inputs`).
INPUTS = "inputs"
#: Most timed runs of the op-profiling pass (its tables average over them).
PROFILE_MAX_RUNS = 20
#: Where the GPU delegate writes serialized programs on the phone (private to the tools).
SERIALIZE_DIR = f"{REMOTE_DIR}/serialized"
#: hexagon_delegate_provider.cc's default --hexagon_lib_path (where the skel libs are).
HEXAGON_LIB_PATH = "/data/local/tmp"
#: The job setting with the device's facts a delegate's flags need (hexagon_lib_path).
DEVICE_PATHS = "device_paths"
_PATH = re.compile(r"^/[A-Za-z0-9_./-]{0,200}$")


def _checked(sha256: str) -> str:
    if not _SHA256.match(sha256 or ""):
        raise JobError(f"model hash {sha256!r} is not a sha256 hex digest")
    return sha256


def model_path(sha256: str) -> str:
    """Where a model lives on the phone: its content hash, never its name."""
    return f"{REMOTE_DIR}/{_checked(sha256)}.tflite"


def tool_path(name: str, sha256: str) -> str:
    """A tool's path on the phone; one folder per tool build (by its hash)."""
    if name not in ("benchmark_model", "run_eval"):
        raise JobError(f"unknown tool {name!r}")
    return f"{REMOTE_DIR}/tools/{_checked(sha256)[:16]}/{name}"


def input_path(sha256: str) -> str:
    """Where a user's input value file lives on the phone: its content hash."""
    return f"{REMOTE_DIR}/inputs/{_checked(sha256)}.bin"


def user_inputs(settings: dict) -> list[dict[str, Any]]:
    """The job's own inputs, `settings["inputs"]`: a list of {"layer": name, "shape":
    [ints], "sha256": hash of the raw value file} (the file itself is pushed by hash).
    JobError when a layer name or shape cannot be written on benchmark_model's line."""
    out = []
    for item in settings.get(INPUTS) or []:
        layer, shape = str(item.get("layer", "")), item.get("shape") or []
        if not _LAYER.match(layer):
            raise JobError(f"input layer name {layer!r}: use letters, digits and _./;:- only")
        if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
            raise JobError(f"input layer {layer}: shape {shape!r} is not positive integers")
        out.append({"layer": layer, "shape": list(shape), "sha256": _checked(item.get("sha256"))})
    return out


def _flag(name: str, value: Any) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, float):
        value = f"{value:g}"
    return f"--{name}={value}"


def benchmark_argv(tool: str, model: str, config: RunConfig, settings: dict) -> list[str]:
    """benchmark_model's arguments for one job's timed runs (flags of benchmark_model.cc,
    benchmark_tflite_model.cc and the GPU provider): the path an app ships, never
    profiled (the profiler times every node, which is not what an app runs), with the
    peak memory footprint (a sampling thread beside the runs)."""
    return _benchmark_argv(tool, model, config, settings, profile=False)


def profile_argv(tool: str, model: str, config: RunConfig, settings: dict) -> list[str]:
    """The job's op-profiling pass: the same model, delegate and inputs with
    `--enable_op_profiling`, at most PROFILE_MAX_RUNS runs; its latencies are not the
    job's."""
    return _benchmark_argv(tool, model, config, settings, profile=True)


def _benchmark_argv(
    tool: str, model: str, config: RunConfig, settings: dict, profile: bool
) -> list[str]:
    runs = int(settings.get("num_runs", 50))
    argv = [
        tool,
        _flag("graph", model),
        _flag("num_runs", min(runs, PROFILE_MAX_RUNS) if profile else runs),
        _flag("warmup_runs", int(settings.get("warmup_runs", 1))),
        _flag("min_secs", 0.0 if profile else float(settings.get("min_secs", 1.0))),
        _flag("max_secs", float(settings.get("max_secs", 150.0))),
    ]
    if settings.get("warmup_min_secs") is not None:
        argv.append(_flag("warmup_min_secs", float(settings["warmup_min_secs"])))
    argv += _delegate_flags(config, model, settings)
    if settings.get("num_threads") and config.option("threads") is None:
        argv.append(_flag("num_threads", int(settings["num_threads"])))
    if profile:
        argv.append(_flag("enable_op_profiling", True))
    else:
        argv.append(_flag("report_peak_memory_footprint", True))
    inputs = user_inputs(settings)
    if inputs:
        argv += [
            _flag("input_layer", ",".join(i["layer"] for i in inputs)),
            _flag("input_layer_shape", ":".join(",".join(map(str, i["shape"])) for i in inputs)),
            _flag(
                "input_layer_value_files",
                ",".join(f"{_escaped(i['layer'])}:{input_path(i['sha256'])}" for i in inputs),
            ),
        ]
    return argv


def _escaped(layer: str) -> str:
    """A name as `--input_layer_value_files` takes it: each ':' written '::' (the tool splits
    an item at its one unescaped ':'; SplitInputLayerNameAndValueFile)."""
    return layer.replace(":", "::")


def _facts(model: str, settings: dict) -> dict[str, str]:
    """What a flag's `{placeholder}` stands for on this job: the serialization folder, the
    model's token (its content hash, as the file is named) and the Hexagon libraries' path
    discovery found (checked: a phone's path reaches a shell line only if it is one)."""
    hexagon = str((settings.get(DEVICE_PATHS) or {}).get("hexagon_lib_path") or HEXAGON_LIB_PATH)
    if not _PATH.match(hexagon) or ".." in hexagon:
        raise JobError(f"Hexagon library path {hexagon[:60]!r} is not a plain absolute path")
    token = model.rsplit("/", 1)[-1].removesuffix(".tflite")
    return {"serialize_dir": SERIALIZE_DIR, "model_token": token, "hexagon_lib_path": hexagon}


def _delegate_flags(
    config: RunConfig, model: str, settings: dict, for_eval: bool = False
) -> list[str]:
    """The configuration's flags, from farm_core.delegate_flags' table (each traceable
    to the provider that defines it)."""
    facts = _facts(model, settings)
    return [_flag(name, value.format(**facts)) for name, value, _src in
            delegate_flags(config, for_eval)]  # fmt: skip


def run_eval_argv(
    tool: str, model: str, config: RunConfig, runs: int, settings: dict | None = None
) -> list[str]:
    """inference_diff's run_eval (run_eval.cc's flags): the delegate against the CPU
    reference, with the configuration's options as the providers' flags. run_eval takes
    no input files: its inputs are random."""
    argv = [
        tool,
        _flag("model_file", model),
        _flag("num_runs", int(runs)),
        _flag("num_interpreter_threads", 1),
        _flag("delegate", EVAL_DELEGATE[config.delegate]),
    ]
    return argv + _delegate_flags(config, model, settings or {}, for_eval=True)


def line(argv: list[str]) -> str:
    """One shell line from an argument list, each word quoted."""
    return shlex.join(argv)


def remove(*paths: str) -> str:
    return line(["rm", "-f", *paths])


def kill(tool: str) -> str:
    """Stop a tool left running after a timeout (matched by its full path)."""
    return line(["pkill", "-f", tool])
