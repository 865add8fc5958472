"""The GPU delegate: fold, partition, run partitions on OpenCL and the rest on the CPU.

Options mirror those of TfLiteGpuDelegateOptionsV2 that change what this delegate does
(precision loss, quantization, max delegated partitions, serialization dir and model
token). TFLite's inference preference is left out: it picks how long the delegate tunes
its kernels at init, and this delegate does no tuning at init.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import IO, Any

import numpy as np

from ..errors import DevicefarmError, JobError
from ..graph import Model
from ..interpreter import Interpreter
from . import placement
from .cpu_runs import LITERT, REFERENCE, CpuRun, InputRefused, plan_cpu_runs
from .execution_plan import ExecutionPlan, plan_execution
from .fold import fold_constants
from .partition import DelegationSummary, partition
from .support import SupportOptions
from .switches import Switches


@dataclass
class GpuDelegateOptions:
    """The options of TfLiteGpuDelegateOptionsV2 this delegate acts on, in Python."""

    precision: str = "fp32"  #: "fp16" = is_precision_loss_allowed
    enable_quant: bool = True  #: experimental_flags ENABLE_QUANT
    max_delegated_partitions: int = 1
    serialization_dir: str | None = None  #: None: the user cache, keyed by program source
    model_token: str | None = None  #: None: the model's sha256
    device: str | None = None  #: 'P:D' or a name substring; None: the first GPU
    #: op profiling: the kernels launched one by one, each timed by its event, on a path
    #: of its own (gpu/execution_plan.py), recorded as such
    profiling: bool = False
    #: compile each launch's integer arguments into its kernel (opencl/specialize.py);
    #: None: as the session's switches say (on GPUs unless $DEVICEFARM_GPU_SPECIALIZE)
    specialize: bool | None = None
    #: what runs the nodes the GPU does not take: "litert" (the official CPU runtime,
    #: where installed and able) or "reference" (gpu/cpu_runs.py)
    cpu_runtime: str = LITERT
    #: program units built at once (opencl/program_units.py); None: one per usable CPU
    build_jobs: int | None = None
    #: partitions doing less work stay on the CPU (placement.py); None: as the session's
    #: switches say (on GPUs only at their default); 0: every supported partition on the GPU
    min_gpu_work: int | None = None

    def validate(self) -> None:
        if self.precision not in ("fp32", "fp16"):
            raise JobError(f"precision {self.precision!r} must be fp32 or fp16")
        if self.cpu_runtime not in (LITERT, REFERENCE):
            raise JobError(f"cpu_runtime {self.cpu_runtime!r} must be {LITERT} or {REFERENCE}")
        if self.build_jobs is not None and self.build_jobs < 1:
            raise JobError(f"build_jobs {self.build_jobs} must be >= 1")
        if self.max_delegated_partitions < 0:
            raise JobError("max_delegated_partitions must be >= 0 (0: no limit)")
        if self.min_gpu_work is not None and self.min_gpu_work < 0:
            raise JobError(f"min_gpu_work {self.min_gpu_work} must be >= 0 (0: no minimum)")


class GpuSession:
    """A model prepared for the GPU delegate; `invoke` runs it host-in to host-out.
    `switches` (gpu/switches.py; None: the defaults and the DEVICEFARM_* variables, read
    now) and its options decide its paths (`plan`: gpu/execution_plan.py) and tuning; the
    session keeps them for its result records."""

    def __init__(
        self,
        model: Model,
        precision: str = "fp32",
        device: str | None = None,
        log: IO[str] | None = None,
        switches: Switches | None = None,
        **options: Any,
    ):
        self.options = GpuDelegateOptions(precision=precision, device=device, **options)
        self.options.validate()
        self.switches = Switches.from_env() if switches is None else switches
        #: the paths it takes (execution_plan.py): made now, completed once the device is known
        self.plan = self._plan()
        self.log = log if log is not None else sys.stderr
        start = time.perf_counter()
        self._device_start = self._start_device()
        self.init_phases_ms: dict[str, float] = {}
        self.model, self.folded_ops = (
            fold_constants(model, self.switches.max_folded_elements)
            if self.switches.fold  # the fold pass (gpu/passes.py)
            else (model, 0)
        )
        self.cpu = Interpreter(self.model)
        self.device_info = None
        self.delegation: DelegationSummary = self._place(
            partition(
                self.model.main,
                SupportOptions(self.options.enable_quant),
                self.options.max_delegated_partitions,
            )
        )
        for line in self.delegation.messages():
            print(f"INFO: {line}", file=self.log)
        self.executors: list[Any] = []
        #: the generic kernels' units the session started on while its own program built
        #: (opencl/first_tier.py); 0: it started on its own
        self.first_tier_units = 0
        self._own_program: Future | None = None  #: its own program's build, where pending
        self._own_parts: tuple | None = None  #: what its executors are made from, meanwhile
        self._whole_graph = False
        self.program_from_cache = False
        #: the program's units (opencl/program_units.py) and what the cache held of them
        self.program_units = 0
        self.program_beside_upload = False  #: loaded from the cache beside the uploads
        self.program_summary = ""
        #: the partitions' lowering read from the kernel cache (opencl/lowering_cache.py)
        self.lowering_from_cache = False
        #: the program's cached units loaded beside the lowering (opencl/early_program.py)
        self.program_loaded_early = False
        #: whether fp16 reads the weights in half: they are all half values already
        #: (opencl/const_types.py); else float32
        self.half_weights = False
        #: kernels compiled for this model's launches (opencl/specialize.py); 0: the
        #: program is the one every model shares
        self.specialized_kernels = 0
        #: how launches are enqueued: "c" (launch_loop.c), "python" (ctypes), "pyopencl"
        #: (an event per launch: profiling); "" with no GPU partition
        self.launch_loop = ""
        self.launch_loop_why = ""  #: why "python" rather than "c", where it is
        self.launch_loop_build = ""  #: the C loop's compiler and library digest, where it runs
        #: whether the partitions' inputs and outputs lie in host memory the GPU reads and
        #: writes itself (opencl/host_edges.py), rather than being copied in and out
        self.host_edges = False
        self._phase("fold_and_partition", start)
        since = time.perf_counter()
        self.cpu_runs: list[CpuRun] = plan_cpu_runs(
            self.model,
            self.delegation.partitions,
            self.plan.cpu_runtime,
            log=self.log,
            small_work=self.switches.min_gpu_work,
            trial_min_pool=self.switches.cpu_thread_trial_min_pool,
        )
        #: what ran the CPU nodes: "litert", "reference", both joined by "+", "" for none
        self.cpu_fallback = "+".join(sorted({run.runtime for run in self.cpu_runs}))
        self._phase("cpu_runs", since)
        if self.delegation.delegated_nodes:
            self._prepare_gpu(model.sha256)
        whole = self._cpu_run_covering_whole_graph()
        sg = self.model.main
        self._whole_cpu = whole.whole_runner(sg.inputs, sg.outputs) if whole else None
        self._declared = [sg.tensors[t].shape for t in sg.inputs]
        self.init_seconds = time.perf_counter() - start
        self.init_phases_ms["total"] = self.init_seconds * 1e3

    def _start_device(self) -> Future:
        """The device found and its context made in threads (opencl/preparation.py's
        start_device), beside the folding and partitioning; asked for only where a
        partition runs on the GPU."""
        from .opencl import preparation as prep

        try:  # the drivers' caches pointed inside ours before the driver is loaded
            self._cache_dir = prep.kernel_cache_dir(self.options.serialization_dir)
        except OSError as exc:  # an unusable cache folder fails only a GPU partition
            failed: Future = Future()
            failed.set_exception(exc)
            return failed
        return prep.start_device(self.options.device, self._plan)

    def _place(self, summary: DelegationSummary) -> DelegationSummary:
        """`summary` with the partitions too small for the GPU on the CPU (placement.py)."""
        option = self.options.min_gpu_work
        wanted = placement.wanted_min_work(option, self.switches)
        placed = placement.keep_small_on_cpu(summary, self.model.main, wanted)
        if placed is summary:
            return summary
        device_decides = placement.device_decides(option, self.switches)
        try:  # the device decides at the rule's default; its facts go in the results
            self.device_info = self._device_start.result().found.info
        except (DevicefarmError, OSError):
            if device_decides:
                raise  # as a GPU partition would have: no such device
            return placed
        if device_decides and not self.device_info.is_gpu:
            return summary
        return placed

    def _plan(self, device: Any = None) -> ExecutionPlan:
        """The session's execution plan (on `device`, a DeviceInfo, once chosen)."""
        opts = self.options
        return plan_execution(
            self.switches,
            profiling=opts.profiling,
            cpu_runtime=opts.cpu_runtime,
            specialize_option=opts.specialize,
            device=device,
        )

    def _phase(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.init_phases_ms[name] = round((now - since) * 1e3, 2)
        return now

    # -- preparation ------------------------------------------------------------------

    def _prepare_gpu(self, sha256: str) -> None:
        """The GPU partitions prepared on the device, step by step (opencl/preparation.py),
        each step timed as an init phase."""
        # pyopencl's side: only with GPU partitions
        from .opencl import early_program, first_tier
        from .opencl import preparation as prep
        from .opencl.cache import KernelCache

        opts, switches, sg = self.options, self.switches, self.model.main
        partitions, cache_dir = self.delegation.partitions, self._cache_dir
        t = time.perf_counter()
        started = self._device_start.result()  # what the folding left of finding it
        found, opening = started.found, started.opening  # the context: beside the lowering
        self.device_info, self.plan = found.info, found.plan
        t = self._phase("device", t)
        jobs = prep.jobs_for(opts.build_jobs, switches)

        def lower(staged: bool) -> prep.ModelProgram:
            program, self.lowering_from_cache = prep.lowered_program(
                sg, partitions, opts.precision, found, staged, jobs, switches, cache_dir, sha256
            )
            return program

        staged = prep.staged_edges(opts.precision, found)
        # the launch loop's library needs no context: loaded (or built, on a new cache)
        # beside the context and a cold program's build, which wakes resident builders
        native = prep.start_native(self.plan, cache_dir, switches)
        explicit = opts.serialization_dir is not None
        # the units an earlier session of this model kept: loading as soon as the context
        # is made, beside the lowering (opencl/early_program.py)
        unit_facts = (
            *prep.lowering_facts(sha256, opts.precision, staged, jobs, partitions, switches, found),
            explicit,
            opts.model_token if explicit else None,
        )
        early = early_program.start(cache_dir, found.info, unit_facts, opening.result, jobs)

        def keyed(program: prep.ModelProgram) -> tuple[str, list, str, bool]:
            """The program's token (a serialization dir keys it by the model, TFLite's
            model token; else the lowering's), its units' cache keys and build options, and
            whether the cache holds it whole (the units' digests, megabytes of source: read
            while the context is being made)."""
            token = (opts.model_token or sha256) if explicit else program.token
            keys, options = prep.program_keys(found, program, opts.precision, token)
            return token, keys, options, prep.program_cached(cache_dir, keys)

        program = lower(staged)
        token, keys, options, beside = keyed(program)
        t = self._phase("lower", t)
        layouts = None
        if beside:  # a warm start: its arenas laid out while the driver makes the context
            layouts = prep.lay_out_parts(sg, program.parts, opts.precision, found)
            t = self._phase("layout", t)
        opened = opening.result()
        self.ctx, self.queue = opened.ctx, opened.queue
        self.host_edges = opened.host_edges is not None
        t = self._phase("context", t)  # what the lowering left of the context's making
        self.init_phases_ms["context_made"] = round(opened.made_ms, 2)  # in its thread
        if staged != prep.staged_edges(opts.precision, opened):
            program = lower(not staged)  # the device refused the plan's host edges
            token, keys, options, beside = keyed(program)
            early = layouts = None  # kept for the other edges, and the facts say them
            t = self._phase("lower_again", t)
        self.half_weights = program.half_weights
        self.specialized_kernels = program.specialized_kernels
        steps = (opened, program, opts.precision, cache_dir, token, jobs, switches)
        # held whole by the cache: loaded beside the uploads (its phase is then its own
        # time, overlapping theirs), the executors waiting for it where they bind kernels
        self.program_beside_upload = beside
        first = None if beside or not self._may_tier() else prep.first_tier_program(program)
        first_keys, _ = (
            prep.program_keys(found, first, opts.precision, first.token) if first else ([], "")
        )
        cache = KernelCache(cache_dir)
        held = [cache.holds(k) for k in first_keys]  # the tier's units the cache holds
        tiered = first is not None and first_tier.wanted(
            switches.explicit("first_tier"),
            switches.first_tier,
            found.info.is_gpu,
            sum(held),
            len(first_keys),
        )
        parts = program.parts
        if beside:

            def load() -> prep.ProgramSet:  # the early load where it holds these units
                kept = early.program_for(keys, options) if early is not None else None
                return kept or prep.build_program(*steps)

            programs = prep.start_program(load)
        elif tiered:  # the generic kernels now, its own program in a thread
            programs = prep.build_program(
                opened, first, opts.precision, cache_dir, first.token, jobs, switches
            )
            self._own_program = prep.start_program(lambda: prep.build_program(*steps))
            parts, self.first_tier_units = first.parts, len(first.units)
            t = self._phase("program", t)
        else:
            programs = prep.build_program(*steps)
            t = self._phase("program", t)
            if first is not None:  # for the models after it
                missing = [u for u, h in zip(first.units, held, strict=True) if not h]
                first_tier.leave_for_builders(opened.device, cache, missing, first.token, options)
        native = native.result()
        t = self._phase("launch_loop", t)  # what the program left of the loop's loading
        self.executors = prep.make_executors(
            opened, programs, sg, parts, opts.precision, native, switches, layouts
        )
        self._phase("upload", t)
        if beside:
            programs = programs.result()
            self.init_phases_ms["program"] = round(programs.made_ms, 2)
        if tiered:  # what its own program's executors are made from
            self._own_parts = (opened, program.parts, native)
        self.program_loaded_early = early is not None and early.used
        if not self.program_loaded_early and staged == prep.staged_edges(opts.precision, opened):
            kept = early_program.KeptUnits(tuple(keys), options)
            early_program.keep(cache_dir, found.info, unit_facts, kept)
        self.program_units = len(program.units)
        self.program_summary = programs.summary()
        if tiered:
            self.program_summary = f"first tier {self.program_summary}, its own building"
        # a first tier's units may be cached; the own program, which it began beside, is not
        self.program_from_cache = programs.from_cache and not tiered
        facts = prep.launch_loop_facts(self.executors, switches)
        self.launch_loop, self.launch_loop_why, self.launch_loop_build = facts
        self._whole_graph = self._covers_whole_graph()

    def _may_tier(self) -> bool:
        """Whether a session whose own program is not cached may start on the first tier
        (opencl/first_tier.py, whose `wanted` decides): where it has a program of its own
        and times its runs as one path (a profiling session's timings are its op profile:
        no tiers), the switch not off."""
        return self.plan.specialize and not self.plan.profiling and self.switches.first_tier

    def settle(self) -> float:
        """The session's own program swapped in where it started on the first tier,
        waiting for its build; the ms waited (0 where nothing was pending). A benchmark
        calls it before timing anything past the first inference."""
        if self._own_program is None:
            return 0.0
        start = time.perf_counter()
        programs = self._own_program.result()
        waited = (time.perf_counter() - start) * 1e3
        self._swap_in(programs)
        self.init_phases_ms["own_program_wait"] = round(waited, 2)
        return waited

    def _swap_in(self, programs: Any) -> None:
        """The executors remade on the session's own program (`programs`, built), the
        first tier's dropped; its build's and the swap's ms recorded as init phases."""
        from .opencl import preparation as prep

        start = time.perf_counter()
        opened, parts, native = self._own_parts
        self.executors = prep.make_executors(
            opened,
            programs,
            self.model.main,
            parts,
            self.options.precision,
            native,
            self.switches,
        )
        self._own_program = self._own_parts = None  # the host's constants go with the tier
        self.init_phases_ms["own_program"] = round(programs.made_ms, 2)
        self.init_phases_ms["own_swap"] = round((time.perf_counter() - start) * 1e3, 2)
        self.program_summary = f"{programs.summary()}, after a first tier"
        facts = prep.launch_loop_facts(self.executors, self.switches)
        self.launch_loop, self.launch_loop_why, self.launch_loop_build = facts

    def _covers_whole_graph(self) -> bool:
        """True when one GPU partition runs every node, reading only the model's inputs
        and writing its outputs (then invoke skips the per-node walk)."""
        sg = self.model.main
        if len(self.executors) != 1 or self.delegation.delegated_nodes != len(sg.operators):
            return False
        ex = self.executors[0]
        return set(ex.input_tensors) <= set(sg.inputs) and set(sg.outputs) <= set(ex.outputs)

    def _cpu_run_covering_whole_graph(self) -> CpuRun | None:
        """The one CPU run on LiteRT that runs every node from the model's inputs to its
        outputs, where the GPU runs nothing (then invoke skips the per-node walk)."""
        sg, runs = self.model.main, self.cpu_runs
        if self.executors or len(runs) != 1 or runs[0].runtime != LITERT:
            return None
        run = runs[0]
        whole = len(run.nodes) == len(sg.operators)
        ends = set(run.inputs) <= set(sg.inputs) and set(sg.outputs) <= set(run.outputs)
        return run if whole and ends else None

    # -- running ----------------------------------------------------------------------

    def invoke(self, inputs: Sequence[np.ndarray], subgraph: int = 0) -> list[np.ndarray]:
        """Run the model: GPU partitions and CPU nodes in order; outputs in model order."""
        if self._own_program is not None and self._own_program.done():
            self.settle()  # built: swapped in before this run
        declared = self._declared
        if self._whole_cpu is not None and subgraph == 0 and len(inputs) == len(declared):
            try:  # one CPU run on LiteRT runs all of it; set_tensor checks each array
                return self._whole_cpu(inputs)
            except InputRefused:
                pass  # ours name the input and why, or the reference runs another shape
        checked = self.cpu.check_inputs(inputs, subgraph)
        sg = self.model.main
        shapes = [x.shape for x in checked]
        if subgraph != 0 or (not self.executors and shapes != declared):
            # nothing planned for these shapes: the reference sizes every node as it runs
            return self.cpu.run_subgraph(subgraph, checked)
        for pos, (x, want) in enumerate(zip(checked, declared, strict=True)):
            if x.shape != want:
                raise JobError(
                    f"input {pos} has shape {list(x.shape)}; the GPU delegate was "
                    f"prepared for {list(want)} (create a new session to resize)"
                )
        if self._whole_graph:  # one partition, model inputs in and outputs out
            values = dict(zip(sg.inputs, checked, strict=True))
            self.executors[0].run(values)
            return [values[t] for t in sg.outputs]
        values = self.cpu.initial_values(0, checked)
        gpu = {
            nodes[0]: ex
            for nodes, ex in zip(self.delegation.partitions, self.executors, strict=True)
        }
        cpu = {run.nodes[0]: run for run in self.cpu_runs}
        for n in range(len(sg.operators)):
            if n in gpu:
                gpu[n].run(values)
            elif n in cpu:
                cpu[n].run(self.cpu, values)
        return [values[t] for t in sg.outputs]

    # -- facts ------------------------------------------------------------------------

    @property
    def device_facts(self) -> dict[str, Any]:
        return self.device_info.facts() if self.device_info else {}

    @property
    def memory_bytes(self) -> int:
        """Device memory held by the prepared partitions (buffers and constants)."""
        return sum(ex.device_bytes for ex in self.executors)

    def op_profile_ns(self) -> dict[int, int]:
        """Device nanoseconds per node of the last invoke (options.profiling=True); nodes
        fused into another's kernel take 0 (see `fused_kernels`)."""
        out: dict[int, int] = {}
        for ex in self.executors:
            out.update(ex.profile_ns())
        return out

    def fused_kernels(self) -> dict[int, tuple[int, ...]]:
        """Producer node -> every node its kernel runs (itself first), for kernels that
        absorbed elementwise nodes after them."""
        return {c[0]: c for ex in self.executors for c in ex.fused_kernels}

    @property
    def persistent_runs(self) -> tuple[int, int]:
        """(launches run inside persistent kernels, persistent kernels) (opencl/
        persistent.py): (0, 0) where every launch is its own kernel."""
        runs = [run for ex in self.executors for run, _ in ex.persistent]
        return sum(run.end - run.start for run in runs), len(runs)

    def summary(self) -> dict[str, Any]:
        return {
            "options": asdict(self.options),
            "delegation": self.delegation.to_dict(),
            "folded_ops": self.folded_ops,
            "device": self.device_facts,
            "program_from_cache": self.program_from_cache,
            "launch_loop": self.launch_loop,
            "persistent_runs": list(self.persistent_runs),
            "host_edges": self.host_edges,
            "cpu_fallback": self.cpu_fallback,
            "init_seconds": self.init_seconds,
        }
