"""Inference diff: a delegate's outputs against the single-threaded CPU reference.

As TFLite's `inference_diff` tool: random inputs (truncated normal mapped into each input's
range), `num_runs` runs of both; per output the mean absolute elementwise difference of
each run, averaged over runs with its standard deviation. The reference is the official
LiteRT interpreter (builtin kernels, one thread) when installed, else our CPU interpreter.
Outputs compare as stored (quantized outputs in their integer steps).

    Num evaluation runs: 50
    Reference run latency: avg=84364.2(us), std_dev=12525(us)
    Test run latency: avg=7281.64(us), std_dev=2089(us)
    OutputDiff[0]: avg_error=1.96277e-05, std_dev=6.95767e-06
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import numpy as np

from ..errors import JobError
from ..graph import Model
from ..reader import load_model
from .benchmark import BenchmarkOptions, RunStats
from .inputs import diff_inputs
from .progress import Reporter
from .session_info import delegation_summary, device_facts, versions
from .sessions import open_session
from .stats import Stat, cpp_double

DEFAULT_RUNS = 50


class LiteRtSession:
    """The official interpreter as a session (builtin kernels, single thread)."""

    name = "litert"

    def __init__(self, model_bytes: bytes):
        from .. import litert

        self.it = litert.make_interpreter(model_bytes, num_threads=1, xnnpack=False)
        self.inputs = self.it.get_input_details()
        self.outputs = self.it.get_output_details()

    def invoke(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        for d, x in zip(self.inputs, inputs, strict=True):
            self.it.set_tensor(d["index"], x)
        self.it.invoke()
        return [np.array(self.it.get_tensor(d["index"])) for d in self.outputs]


def reference_session(model: Model, model_path: str, notes: list[str]) -> tuple[Any, str]:
    """(session, description) of the reference: LiteRT when it loads the model, else ours."""
    from .. import litert

    if litert.available():
        try:
            with open(model_path, "rb") as f:
                return LiteRtSession(f.read()), "litert (builtin kernels, 1 thread)"
        except Exception as exc:  # LiteRT raises RuntimeError/ValueError on models it refuses
            notes.append(f"LiteRT cannot run the model ({exc}); the reference is our interpreter")
    from ..interpreter import Interpreter

    return Interpreter(model, precision="fp32"), "delegate_runtime cpu interpreter (fp32)"


@dataclass
class FloatStat:
    """TFLite's Stat<float>: mean and population standard deviation of float samples."""

    values: list[float] = field(default_factory=list)

    @property
    def avg(self) -> float:
        return float(np.mean(self.values)) if self.values else math.nan

    @property
    def std(self) -> float:
        if not self.values or min(self.values) == max(self.values):
            return 0.0
        # NOTE: two-pass, not TFLite's E[x^2] - E[x]^2, which cancels to 0 for tiny errors.
        return float(np.std(self.values))


@dataclass
class OutputDiff:
    """One output's differences: per-run mean |test - ref|, and the worst element seen."""

    index: int
    name: str
    per_run: FloatStat = field(default_factory=FloatStat)
    max_error: float = 0.0
    worst: dict[str, Any] | None = None

    def add(self, run: int, ref: np.ndarray, test: np.ndarray) -> None:
        if ref.shape != test.shape:
            raise RuntimeError(
                f"output {self.index} '{self.name}': test shape {list(test.shape)} differs from "
                f"the reference's {list(ref.shape)}"
            )
        diff = np.abs(test.astype(np.float64) - ref.astype(np.float64))
        self.per_run.values.append(float(diff.mean()) if diff.size else 0.0)
        if not diff.size:
            return
        flat = int(np.argmax(np.where(np.isnan(diff), np.inf, diff)))  # NaN is the worst
        value = float(diff.flat[flat])
        worse = self.worst is None or (
            not math.isnan(self.max_error) and not value <= self.max_error
        )
        if worse:
            where = np.unravel_index(flat, diff.shape)
            self.max_error = value
            self.worst = {
                "run": run,
                "index": [int(i) for i in where],
                "reference": float(ref[where]),
                "test": float(test[where]),
            }

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "avg_error": self.per_run.avg,
            "std_dev": self.per_run.std,
            "max_error": self.max_error,
            "worst": self.worst,
            "per_run_errors": list(self.per_run.values),
        }


@dataclass
class DiffResult:
    """Everything the inference diff measured; `log` is the text printed."""

    model_path: str
    num_runs: int
    reference: str
    test: str
    reference_latency: RunStats
    test_latency: RunStats
    outputs: list[OutputDiff]
    seed: int | None = None
    delegation: dict[str, Any] | None = None
    device: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    log: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "num_runs": self.num_runs,
            "seed": self.seed,
            "reference": self.reference,
            "test": self.test,
            "reference_latency": asdict(self.reference_latency),
            "test_latency": asdict(self.test_latency),
            "outputs": [o.to_dict() for o in self.outputs],
            "delegation": self.delegation,
            "device": self.device,
            "versions": self.versions,
            "options": self.options,
            "notes": self.notes,
            "log": self.log,
        }


def _timed(session: Any, inputs: list[np.ndarray], stat: Stat) -> list[np.ndarray]:
    start = time.perf_counter_ns()
    outputs = session.invoke(inputs)
    stat.add((time.perf_counter_ns() - start) // 1000)
    return [np.asarray(o) for o in outputs]


def format_diff(num_runs: int, ref: Stat, test: Stat, outputs: list[OutputDiff]) -> str:
    """TFLite's inference diff lines."""
    lines = [
        f"Num evaluation runs: {num_runs}",
        f"Reference run latency: avg={cpp_double(ref.avg)}(us), std_dev={ref.std}(us)",
        f"Test run latency: avg={cpp_double(test.avg)}(us), std_dev={test.std}(us)",
    ]
    for o in outputs:
        lines.append(
            f"OutputDiff[{o.index}]: avg_error={cpp_double(o.per_run.avg)}, "
            f"std_dev={cpp_double(float(np.float32(o.per_run.std)))}"
        )
    return "\n".join(lines) + "\n"


def run_inference_diff(
    model_path: str,
    options: BenchmarkOptions,
    num_runs: int = DEFAULT_RUNS,
    seed: int | None = None,
    progress: Any = None,
    out: IO[str] | None = None,
    inputs: Sequence[np.ndarray] | None = None,
) -> DiffResult:
    """Compare the delegate chosen by `options` with the CPU reference over `num_runs`
    random inputs (or the user's `inputs`, one array per model input, every run);
    `out` receives the printed lines."""
    if num_runs < 1:
        raise JobError(f"num_runs must be at least 1, got {num_runs}")
    model = load_model(model_path)
    notes: list[str] = []
    delegate_log = io.StringIO()
    reference, ref_name = reference_session(model, model_path, notes)
    test = open_session(
        model,
        options.delegate,
        precision=options.precision,
        device=options.device,
        log=delegate_log,
        notes=notes,
        **(options.gpu_session_options(model) if options.use_gpu else {}),
    )
    test_name = f"delegate_runtime {options.delegate} ({options.precision})"
    sg = model.main
    diffs = [OutputDiff(i, sg.tensors[t].name) for i, t in enumerate(sg.outputs)]
    rng = np.random.default_rng(seed)
    ref_stat, test_stat = Stat(), Stat()
    reporter = Reporter(progress)
    reporter.start("inference diff", num_runs)
    try:
        for run in range(num_runs):
            values = list(inputs) if inputs is not None else diff_inputs(model, rng)
            ref_out = _timed(reference, values, ref_stat)
            test_out = _timed(test, values, test_stat)
            for d, r, t in zip(diffs, ref_out, test_out, strict=True):
                d.add(run, r, t)
            reporter.update()
    finally:
        reporter.close()
    text = delegate_log.getvalue() + format_diff(num_runs, ref_stat, test_stat, diffs)
    if out is not None:
        out.write(text)
    facts = device_facts(test, options.delegate)
    return DiffResult(
        model_path=str(model_path),
        num_runs=num_runs,
        reference=ref_name,
        test=test_name,
        reference_latency=RunStats.from_stat(ref_stat),
        test_latency=RunStats.from_stat(test_stat),
        outputs=diffs,
        seed=seed,
        delegation=delegation_summary(test),
        device=facts,
        versions=versions(facts, f"delegate_runtime/{options.delegate}"),
        options={**options.delegate_fields(), "num_runs": num_runs, "seed": seed},
        notes=notes,
        log=text,
    )
