"""Runners that measure with delegate_runtime's tools (benchmark and inference diff)."""

from __future__ import annotations

import io
import time
from typing import Any

import numpy as np

from delegate_runtime.errors import JobError
from farm_core import user_inputs
from farm_core.metrics import peak_memory_mb

from ..android.profile_output import op_profile_rows
from .base import CanaryReading, JobSpec, Runner

#: Canary invocations timed for its latency (the median is kept).
CANARY_RUNS = 5
#: The folder, beside the kernel cache, where `gpu:serialize=true` keeps the delegate's
#: serialized programs (keyed by the model's sha256, as --delegate_serialize_token).
SERIALIZED_DIR_NAME = "serialized"


def serialize_dir() -> str:
    """Where this host's OpenCL delegate serializes programs for `gpu:serialize=true`."""
    from delegate_runtime.gpu.opencl.cache import default_cache_dir

    return str(default_cache_dir().parent / SERIALIZED_DIR_NAME)


def gpu_fields(config: Any) -> dict[str, Any]:
    """The GPU configuration's options as BenchmarkOptions' fields: `quant` (the
    delegate's enable_quant) and `serialize` (its serialization_dir); none for others."""
    if not config.use_gpu:
        return {}
    return {
        "enable_quant": config.option("quant") != "false",
        "serialize_dir": serialize_dir() if config.option("serialize") == "true" else None,
    }


def _tools() -> tuple[Any, Any, Any]:
    try:
        from delegate_runtime.tools.benchmark import BenchmarkOptions, run_benchmark
        from delegate_runtime.tools.diff import run_inference_diff
    except ImportError as exc:
        raise JobError(f"the measurement tools are not available here: {exc}") from exc
    return BenchmarkOptions, run_benchmark, run_inference_diff


def _as_dict(result: Any) -> dict[str, Any]:
    return dict(result.to_dict()) if hasattr(result, "to_dict") else dict(result)


def _user_values(spec: JobSpec) -> list[np.ndarray] | None:
    """The campaign's own input values (their files cached by the worker), else None."""
    items = spec.settings.get(user_inputs.INPUTS) or []
    return user_inputs.arrays(items) if items else None


class ToolsRunner(Runner):
    """Benchmark and diff in this process through delegate_runtime (cpu or OpenCL)."""

    #: what `open_runtime` paid and no job has reported yet (us)
    _unreported_process_us = 0

    def device_spec(self) -> str | None:
        """The OpenCL device spec the tools take (None for the CPU reference)."""
        return None

    def open_runtime(self) -> int:
        from delegate_runtime.tools.process_init import prepare_process

        delegate = "gpu" if self.kind == "opencl" else "cpu"
        spent = prepare_process(delegate, self.device_spec())
        self._unreported_process_us += spent
        return spent

    def options(self, spec: JobSpec) -> Any:
        BenchmarkOptions, _, _ = _tools()
        s = spec.settings
        return BenchmarkOptions(
            num_runs=int(s.get("num_runs", 50)),
            min_secs=float(s.get("min_secs", 1.0)),
            max_secs=float(s.get("max_secs", 150.0)),
            warmup_runs=int(s.get("warmup_runs", 1)),
            use_gpu=spec.config.use_gpu,
            precision=spec.config.precision,
            **gpu_fields(spec.config),
            device=self.device_spec(),
            # every job measures the per-op profile (in a pass of its own after the timed
            # runs: the timed runs take the path the delegate ships) and the peak memory
            enable_op_profiling=True,
            report_peak_memory=True,
        )

    def benchmark(self, spec: JobSpec, path: str) -> dict[str, Any]:
        _, run_benchmark, _ = _tools()
        out = io.StringIO()
        values = _user_values(spec)
        result = _as_dict(
            run_benchmark(
                path,
                self.options(spec),
                out=out,
                inputs=values,
                progress=spec.progress,
            )
        )
        result["log"] = result.get("log") or out.getvalue()
        self._report_process_cost(result)
        result["user_inputs"] = [i["layer"] for i in spec.settings.get(user_inputs.INPUTS) or []]
        result["op_profile_nodes"] = op_profile_rows(result.get("op_profile"))
        result["peak_memory_mb"] = peak_memory_mb(result)
        return result

    def _report_process_cost(self, result: dict[str, Any]) -> None:
        """The first job after `open_runtime` carries what the process paid once, as a
        fresh benchmark's Init would."""
        paid, self._unreported_process_us = self._unreported_process_us, 0
        if paid and result.get("init_us") is not None:
            result["init_process_us"] = (result.get("init_process_us") or 0) + paid
            result["init_us"] += paid

    def diff(self, spec: JobSpec, path: str) -> dict[str, Any]:
        _, _, run_inference_diff = _tools()
        runs = int(spec.settings.get("diff_runs", 50))
        out = io.StringIO()
        result = _as_dict(
            run_inference_diff(
                path,
                self.options(spec),
                num_runs=runs,
                out=out,
                inputs=_user_values(spec),
                progress=spec.progress,
            )
        )
        result["log"] = result.get("log") or out.getvalue()
        return result

    def check_canary_session(self, session: Any) -> None:
        """Raise when the canary's session shows this device would not run the path its
        results claim (OpenclRunner: the launch loop)."""

    def canary(self, model_bytes: bytes, inputs: list[np.ndarray]) -> CanaryReading:
        from delegate_runtime import read_model
        from delegate_runtime.session import make_session

        delegate = "gpu" if self.kind == "opencl" else "cpu"
        # the canary checks the GPU: its tiny model stays on it (gpu/placement.py)
        gpu_only = {"min_gpu_work": 0} if delegate == "gpu" else {}
        session = make_session(
            read_model(model_bytes), delegate=delegate, device=self.device_spec(), **gpu_only
        )
        self.check_canary_session(session)
        outputs = session.invoke(inputs)
        times = []
        for _ in range(CANARY_RUNS):
            start = time.perf_counter()
            session.invoke(inputs)
            times.append((time.perf_counter() - start) * 1e6)
        return CanaryReading(outputs, float(np.median(times)))
