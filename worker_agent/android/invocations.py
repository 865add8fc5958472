"""Every command line the runner sends to a phone, built here and only here: argument
lists of fixed words, paths derived from content hashes, and numbers, quoted with shlex.
A user-supplied name never reaches a shell line.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from delegate_runtime.errors import JobError
from orchestrator.configs import RunConfig

#: The runner's folder on the phone (the shell user can write /data/local/tmp).
REMOTE_DIR = "/data/local/tmp/devicefarm"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


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


def _flag(name: str, value: Any) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, float):
        value = f"{value:g}"
    return f"--{name}={value}"


def benchmark_argv(tool: str, model: str, config: RunConfig, settings: dict) -> list[str]:
    """benchmark_model's arguments for one job (REFERENCE.md flags)."""
    argv = [
        tool,
        _flag("graph", model),
        _flag("num_runs", int(settings.get("num_runs", 50))),
        _flag("warmup_runs", int(settings.get("warmup_runs", 1))),
        _flag("min_secs", float(settings.get("min_secs", 1.0))),
        _flag("max_secs", float(settings.get("max_secs", 150.0))),
    ]
    if settings.get("warmup_min_secs") is not None:
        argv.append(_flag("warmup_min_secs", float(settings["warmup_min_secs"])))
    argv.append(_flag("use_gpu", config.use_gpu))
    if config.use_gpu:
        argv.append(_flag("gpu_precision_loss_allowed", config.precision == "fp16"))
    if settings.get("num_threads"):
        argv.append(_flag("num_threads", int(settings["num_threads"])))
    return argv


def run_eval_argv(tool: str, model: str, config: RunConfig, runs: int) -> list[str]:
    """inference_diff's run_eval: the delegate against the CPU reference."""
    return [
        tool,
        _flag("model_file_path", model),
        _flag("num_runs", int(runs)),
        _flag("delegate", "gpu" if config.use_gpu else ""),
    ]


def line(argv: list[str]) -> str:
    """One shell line from an argument list, each word quoted."""
    return shlex.join(argv)


def remove(*paths: str) -> str:
    return line(["rm", "-f", *paths])


def kill(tool: str) -> str:
    """Stop a tool left running after a timeout (matched by its full path)."""
    return line(["pkill", "-f", tool])
