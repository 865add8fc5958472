"""`benchmark_model` for our runtime: latency, memory, delegation and op profile.

    result = run_benchmark("model.tflite", BenchmarkOptions(use_gpu=True))
    print(result.log)            # the lines benchmark_model prints
    json.dumps(result.to_dict()) # every figure

The loop follows TFLite's `BenchmarkModel::Run`: at least `num_runs` runs and `min_secs`
seconds, stopping once `max_secs` have passed; warm-up likewise with its own minimums,
then on until the latency is stable (uncertainty.py). Timings are integer microseconds
from `time.perf_counter_ns`.

The timed runs take the path the runtime ships: with `enable_op_profiling`, the per-op
profile comes from a pass of its own after them (a profiling GPU session enqueues with an
event per launch, which is slower). Each result carries its `measurement`: the
configuration record (config_record.py), the conditions before and after the timed runs
(conditions.py), how it was timed and the median's uncertainty with the CPU time per
inference.
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import numpy as np

from ..errors import ModelError
from ..reader import load_model
from . import benchmark_format as fmt
from . import conditions, config_record, uncertainty
from .inputs import benchmark_inputs
from .memory import MemoryReport, PeakMonitor, delta_mb, hwm_bytes, rss_bytes, session_device_bytes
from .process_init import init_split_line, prepare_process
from .profile import OpProfiler
from .progress import Reporter
from .session_info import delegation_summary, device_facts, versions
from .sessions import gpu_options, open_session
from .stats import Stat

#: Seed of the random inputs (benchmark_model's generator is deterministic too).
INPUT_SEED = 0
#: Most runs of the separate op-profiling pass (its tables average over them).
PROFILE_MAX_RUNS = 20
#: Options recorded in the configuration record: they change what the timed runs run.
RECORDED_OPTIONS = ("use_gpu", "precision", "enable_quant", "max_delegated_partitions")
#: The timed runs' path, as results record it: the shipped one, never a profiling one.
TIMED_PATH = "shipped"
#: BenchmarkOptions fields that choose and configure the delegate (the rest run the loop).
DELEGATE_FIELDS = (
    "use_gpu",
    "precision",
    "enable_quant",
    "max_delegated_partitions",
    "serialize_dir",
    "serialize_token",
    "device",
)


@dataclass
class BenchmarkOptions:
    """benchmark_model's flags (REFERENCE.md), with its defaults."""

    num_runs: int = 50
    min_secs: float = 1.0
    max_secs: float = 150.0
    warmup_runs: int = 1
    warmup_min_secs: float = 0.5
    #: warm-up goes on until the latency is stable, for at most this long (ours)
    warmup_max_secs: float = 2.0
    #: print our `Measured on ...` line (a simulated official tool prints only its own)
    report_measurement: bool = True
    use_gpu: bool = False
    precision: str = "fp32"  #: "fp16" when gpu_precision_loss_allowed
    enable_quant: bool = True
    max_delegated_partitions: int = 1
    serialize_dir: str | None = None
    serialize_token: str | None = None
    enable_op_profiling: bool = False
    report_peak_memory: bool = False
    require_full_delegation: bool = False
    device: str | None = None

    @property
    def delegate(self) -> str:
        return "gpu" if self.use_gpu else "cpu"

    def delegate_fields(self) -> dict[str, Any]:
        """The delegate's options alone: what the diff and accuracy tools record, since
        the benchmark loop's (num_runs, min_secs, ...) do not apply to them."""
        return {name: getattr(self, name) for name in DELEGATE_FIELDS}

    def gpu_session_options(self, model: Any) -> dict[str, Any]:
        """The GPU session's TfLiteGpuDelegateOptionsV2-named options for `model`."""
        return gpu_options(
            model,
            self.enable_quant,
            self.max_delegated_partitions,
            self.serialize_dir,
            self.serialize_token,
            self.require_full_delegation,
        )


@dataclass
class RunStats:
    """Statistics of one loop (warm-up or timed), as the `count=` line gives them (us)."""

    count: int = 0
    first_us: int | None = None
    curr_us: int | None = None
    min_us: int | None = None
    max_us: int | None = None
    avg_us: float | None = None
    std_us: int | None = None
    p5_us: int | None = None
    median_us: int | None = None
    p95_us: int | None = None
    runs_us: list[int] = field(default_factory=list)  #: raw times; empty when parsed

    @classmethod
    def from_stat(cls, stat: Stat) -> RunStats:
        if stat.empty:
            return cls()
        return cls(
            count=stat.count,
            first_us=stat.first,
            curr_us=stat.newest,
            min_us=stat.min,
            max_us=stat.max,
            avg_us=stat.avg,
            std_us=stat.std,
            p5_us=stat.percentile(5),
            median_us=stat.percentile(50),
            p95_us=stat.percentile(95),
            runs_us=list(stat.values),
        )


@dataclass
class BenchmarkResult:
    """Every figure of one benchmark; `log` is the exact text printed."""

    model_path: str = ""
    model_size_bytes: int | None = None
    model_sha256: str | None = None
    #: everything before the first inference, as benchmark_model's Init: the two below
    init_us: int | None = None
    #: the part a process pays once, on its first session (modules, OpenCL device; its
    #: context is begun then and finished beside the model's lowering)
    init_process_us: int | None = None
    #: the part this model pays: reading it and opening its session
    init_model_us: int | None = None
    #: GPU only: the model's init by delegate phase (ms)
    init_phases_ms: dict[str, float] | None = None
    first_inference_us: int | None = None
    warmup: RunStats = field(default_factory=RunStats)
    inference: RunStats = field(default_factory=RunStats)
    memory: MemoryReport = field(default_factory=MemoryReport)
    delegation: dict[str, Any] | None = None
    device: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    op_profile: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    #: GPU only: whether the delegate's program came from the kernel cache (warm init)
    program_from_cache: bool | None = None
    #: how it was measured: configuration record, conditions, timing path, uncertainty
    measurement: dict[str, Any] = field(default_factory=dict)
    source: str = "devicefarm"  #: or "benchmark_model" when parsed from the official tool
    log: str = ""

    @property
    def warmup_avg_us(self) -> float | None:
        return self.warmup.avg_us

    @property
    def avg_us(self) -> float | None:
        return self.inference.avg_us

    @property
    def std_us(self) -> int | None:
        return self.inference.std_us

    @property
    def min_us(self) -> int | None:
        return self.inference.min_us

    @property
    def max_us(self) -> int | None:
        return self.inference.max_us

    @property
    def runs_us(self) -> list[int]:
        return self.inference.runs_us

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record: the headline figures flat, then the details."""
        inf = self.inference
        return {
            "source": self.source,
            "model_path": self.model_path,
            "model_size_bytes": self.model_size_bytes,
            "model_sha256": self.model_sha256,
            "init_us": self.init_us,
            "init_process_us": self.init_process_us,
            "init_model_us": self.init_model_us,
            "init_phases_ms": self.init_phases_ms,
            "first_inference_us": self.first_inference_us,
            "warmup_avg_us": self.warmup.avg_us,
            "avg_us": inf.avg_us,
            "std_us": inf.std_us,
            "min_us": inf.min_us,
            "max_us": inf.max_us,
            "p5_us": inf.p5_us,
            "median_us": inf.median_us,
            "p95_us": inf.p95_us,
            "count": inf.count,
            "runs_us": list(inf.runs_us),
            "warmup": asdict(self.warmup),
            "inference": asdict(inf),
            "memory": self.memory.to_dict(),
            "delegation": self.delegation,
            "device": self.device,
            "versions": self.versions,
            "op_profile": self.op_profile,
            "options": self.options,
            "program_from_cache": self.program_from_cache,
            "measurement": self.measurement,
            "log": self.log,
        }


class _Log(io.TextIOBase):
    """Collects the printed text; echoes it to `out` as it comes. Also a stream for the
    session's own messages (the delegate's reports)."""

    def __init__(self, out: IO[str] | None):
        self.out = out
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        if self.out is not None:
            self.out.write(text)
            self.out.flush()
        return len(text)

    def line(self, text: str = "") -> None:
        self.write(fmt.with_prefix(text) + "\n")

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _loop(
    session: Any,
    inputs: list[np.ndarray],
    min_runs: int,
    min_secs: float,
    max_secs: float,
    reporter: Reporter,
    profiler: OpProfiler | None = None,
    stat: Stat | None = None,
) -> Stat:
    """TFLite's run loop: until min_runs and min_secs are both met, or max_secs passed."""
    stat = stat if stat is not None else Stat()
    now = time.perf_counter_ns()
    min_finish = now + int(min_secs * 1e9)
    max_finish = now + int(max_secs * 1e9)
    run = 0
    while (run < min_runs or now < min_finish) and now <= max_finish:
        if profiler is not None:
            profiler.begin_run()
        start = time.perf_counter_ns()
        session.invoke(inputs)
        end = time.perf_counter_ns()
        if profiler is not None:
            profiler.collect_session(session)
            profiler.end_run()
        stat.add((end - start) // 1000)
        reporter.update()
        now = time.perf_counter_ns()
        run += 1
    return stat


def _delegation_lines(log: _Log, delegation: dict[str, Any] | None) -> None:
    if delegation is None:
        return
    done, total = delegation["nodes_delegated"], delegation["nodes_total"]
    parts = delegation["partitions"] or 0
    already = log.text
    if "Following operations are not supported" not in already and total is not None:
        for line in fmt.unsupported_ops(delegation["unsupported"], done or 0, total):
            log.line(line)
    if "Replacing " not in already and done and total is not None:
        log.line(fmt.replacing(done, total, parts))
    if done:
        log.line(fmt.applied(delegation["fully_delegated"], parts))


def run_benchmark(
    model_path: str,
    options: BenchmarkOptions,
    progress: Any = None,
    out: IO[str] | None = None,
    inputs: Sequence[np.ndarray] | None = None,
) -> BenchmarkResult:
    """Benchmark `model_path` as `benchmark_model` does; `out` receives the lines live.
    `inputs`: the user's input values, one array per model input in order (as
    `--input_layer_value_files`); random ones otherwise.

    `progress`: True for tqdm bars on stderr, or a callable(stage, done, total).
    Raises ModelError for a bad model (and for a partial delegation when full delegation
    is required), JobError for bad options, DeviceError for device failures.
    """
    from ..errors import JobError

    if options.num_runs < 0 or options.warmup_runs < 0 or options.max_secs < 0:
        raise JobError("num_runs, warmup_runs and max_secs must not be negative")
    log = _Log(out)
    reporter = Reporter(progress)
    result = BenchmarkResult(model_path=str(model_path), options=asdict(options))
    mem = MemoryReport(host_start_bytes=rss_bytes())
    monitor = PeakMonitor().start() if options.report_peak_memory else None
    profiler = OpProfiler() if options.enable_op_profiling else None
    notes: list[str] = []
    try:
        if callable(progress):  # a farm job: its wait shows `init: 40 s` until runs count
            progress("init", 0, None)
        t0 = time.perf_counter_ns()
        process_us = prepare_process(options.delegate, options.device)
        t_read = time.perf_counter_ns()
        model = load_model(model_path)
        read_us = (time.perf_counter_ns() - t_read) // 1000
        log.line(fmt.loaded_model(str(model_path)))
        t_session = time.perf_counter_ns()
        session = open_session(
            model,
            options.delegate,
            precision=options.precision,
            device=options.device,
            log=log,
            notes=notes,
            **(_gpu_kwargs(model, options) if options.use_gpu else {}),
        )
        end = time.perf_counter_ns()
        result.init_us = (end - t0) // 1000
        result.init_process_us = process_us
        result.init_model_us = result.init_us - process_us
        result.init_phases_ms = getattr(session, "init_phases_ms", None)
        session_us = (end - t_session) // 1000
        for note in notes:
            log.line(note)
        result.delegation = delegation_summary(session)
        _delegation_lines(log, result.delegation)
        if (
            options.use_gpu
            and options.require_full_delegation
            and not (result.delegation or {}).get("fully_delegated")
        ):
            log.line("Disallowed CPU fallback detected.")
            raise ModelError(
                "Disallowed CPU fallback detected: the GPU delegate does not take the whole "
                "graph and --require_full_delegation is set"
            )
        result.model_size_bytes = model.size_bytes
        result.model_sha256 = model.sha256
        result.device = device_facts(session, options.delegate)
        result.program_from_cache = getattr(session, "program_from_cache", None)
        result.versions = versions(result.device, f"delegate_runtime/{options.delegate}")
        log.line(fmt.model_size(model.size_bytes))
        log.line(fmt.initialized(result.init_us))
        log.line(init_split_line(process_us, read_us, session_us, session))
        mem.host_init_bytes = rss_bytes()
        inputs = (
            list(inputs)
            if inputs is not None
            else benchmark_inputs(model, np.random.default_rng(INPUT_SEED))
        )

        warm, stable = _warm_up(log, reporter, session, inputs, options)
        before = conditions.snapshot(result.device, options.use_gpu)
        cpu_start = time.process_time_ns()
        timed = _timed_phase(log, reporter, "benchmark", session, inputs, options)
        cpu_us = (time.process_time_ns() - cpu_start) / 1e3 / max(timed.count, 1)
        after = conditions.snapshot(result.device, options.use_gpu)
        result.measurement = _measurement(options, session, before, after)
        result.measurement["uncertainty"] = uncertainty.summary(
            timed.values, warm.count, stable, round(cpu_us, 1), timed.percentile(50)
        )
        if profiler is not None:
            runs = _profile_pass(model, session, inputs, options, reporter, profiler)
            result.measurement["timing"]["profile"] = f"separate pass ({runs} runs)"
        if options.report_measurement:
            log.line(fmt.measurement_line(result.measurement))
        result.warmup = RunStats.from_stat(warm)
        result.inference = RunStats.from_stat(timed)
        result.first_inference_us = warm.first if not warm.empty else 0
        log.line(
            fmt.timings(
                result.init_us,
                result.first_inference_us,
                warm.avg if not warm.empty else float("nan"),
                timed.avg,
            )
        )
        mem.host_end_bytes = rss_bytes()
        mem.device_bytes = session_device_bytes(session)
    finally:
        reporter.close()
        peak = monitor.stop() if monitor else None
    mem.init_mb = delta_mb(mem.host_init_bytes, mem.host_start_bytes)
    mem.overall_mb = delta_mb(mem.host_end_bytes, mem.host_start_bytes)
    mem.host_peak_bytes = peak if peak is not None else hwm_bytes()
    if peak is not None:
        mem.peak_mb = peak / (1024 * 1024)
    result.memory = mem
    if mem.init_mb is not None and mem.overall_mb is not None:
        log.line(fmt.MEMORY_NOTE)
        log.line(fmt.memory_delta(mem.init_mb, mem.overall_mb))
    if mem.peak_mb is not None:
        log.line(fmt.peak_memory(mem.peak_mb))
    if profiler is not None:
        log.write(profiler.format())
        result.op_profile = profiler.to_dict()
    result.log = log.text
    return result


def _gpu_kwargs(model: Any, options: BenchmarkOptions, profiling: bool = False) -> dict[str, Any]:
    kwargs = options.gpu_session_options(model)
    if profiling:
        kwargs["profiling"] = True  # OpenCL profiling events per node: a slower path
    return kwargs


def _settle(
    session: Any,
    inputs: list[np.ndarray],
    options: BenchmarkOptions,
    reporter: Reporter,
    warm: Stat,
) -> bool:
    """Warm up on (into `warm`) until two windows' medians agree; whether they did."""
    deadline = time.perf_counter() + options.warmup_max_secs
    previous: list[int] = []
    while True:
        size = uncertainty.window_runs(warm.newest or 1)
        if not previous:
            previous = warm.values[-size:]
        start = warm.count
        _loop(session, inputs, size, 0.0, options.max_secs, reporter, stat=warm)
        current = warm.values[start:]
        if uncertainty.settled(previous, current):
            return True
        if time.perf_counter() >= deadline:
            return False
        previous = current


def _measurement(
    options: BenchmarkOptions, session: Any, before: dict[str, Any], after: dict[str, Any]
) -> dict[str, Any]:
    """The record of how the timed runs were measured (uncertainty added by the caller)."""
    chosen = {k: getattr(options, k) for k in RECORDED_OPTIONS}
    record = config_record.configuration(chosen, session)
    return {
        "fingerprint": config_record.fingerprint(record),
        "config": record,
        "timing": {"path": TIMED_PATH, "profile": "none"},
        "conditions": before | {"after": after},
    }


def _profile_pass(
    model: Any,
    session: Any,
    inputs: list[np.ndarray],
    options: BenchmarkOptions,
    reporter: Reporter,
    profiler: OpProfiler,
) -> int:
    """The op profile from runs of their own after the timed ones (a profiling GPU session
    is another path: it is opened for this pass alone); returns the runs it took."""
    target = session
    if options.use_gpu:
        target = open_session(
            model,
            "gpu",
            precision=options.precision,
            device=options.device,
            log=io.StringIO(),
            **_gpu_kwargs(model, options, profiling=True),
        )
    profiler.attach(target, model)
    runs = max(1, min(options.num_runs, PROFILE_MAX_RUNS))
    reporter.start("op profile", runs)
    _loop(target, inputs, runs, 0.0, options.max_secs, reporter, profiler)
    profiler.detach(target)
    return profiler.num_runs


def _timed_phase(
    log: _Log,
    reporter: Reporter,
    stage: str,
    session: Any,
    inputs: list[np.ndarray],
    options: BenchmarkOptions,
) -> Stat:
    log.line(fmt.running(options.num_runs, options.min_secs, options.max_secs))
    reporter.start(stage, options.num_runs or None)
    stat = _loop(session, inputs, options.num_runs, options.min_secs, options.max_secs, reporter)
    log.line(fmt.stat_line(stat))
    log.write("\n")
    return stat


def _own_program(log: _Log, session: Any) -> None:
    """Wait for a GPU session's own program where it started on the generic kernels
    (gpu/opencl/first_tier.py): every run after the first runs on its own."""
    settle = getattr(session, "settle", None)
    if settle is None or not getattr(session, "first_tier_units", 0):
        return
    waited = settle()
    phases = session.init_phases_ms
    log.line(
        f"First inference on the first tier ({session.first_tier_units} generic kernels); "
        f"own program swapped in: built in {phases['own_program']:.0f} ms, waited "
        f"{waited:.0f} ms, swap {phases['own_swap']:.0f} ms"
    )


def _warm_up(
    log: _Log,
    reporter: Reporter,
    session: Any,
    inputs: list[np.ndarray],
    options: BenchmarkOptions,
) -> tuple[Stat, bool]:
    """benchmark_model's warm-up, then on until the latency is stable; (runs, stable)."""
    runs, secs = options.warmup_runs, options.warmup_min_secs
    log.line(fmt.running(runs, secs, options.max_secs))
    reporter.start("warm-up", runs or None)
    first = 1 if runs or secs else 0  # the first inference, on a first tier where it began so
    stat = _loop(session, inputs, first, 0.0, options.max_secs, reporter)
    _own_program(log, session)
    stat = _loop(session, inputs, max(runs - first, 0), secs, options.max_secs, reporter, stat=stat)
    stable = _settle(session, inputs, options, reporter, stat) if not stat.empty else False
    log.line(fmt.stat_line(stat))
    log.write("\n")
    return stat, stable
