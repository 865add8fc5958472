"""The nodes the GPU delegate leaves to the CPU, run as TFLite runs them: on the official
CPU runtime (LiteRT's interpreter with XNNPACK), each maximal run of consecutive CPU nodes
as a model of its own (delegate_runtime/submodel.py).

Our reference interpreter is built for exactness, not speed: measured on openWakeWord's
models it takes 0.4-31 ms where LiteRT's CPU takes 0.02-2.5 ms (docs/cpu_fallback.md), so
a partially delegated model would be slower than not using the GPU at all. The reference
stays the oracle, and runs a CPU run where LiteRT cannot: ai-edge-litert not installed
(the `reference` extra), a custom op LiteRT's resolver does not define (MediaPipe's: the
app's kernels), or a run LiteRT refuses; the session's log says which and why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from .. import litert
from ..errors import ModelError
from ..graph import Model
from ..host_cpus import usable_cpus
from ..interpreter import Interpreter
from ..macs import partition_work
from ..submodel import boundary, submodel_bytes
from .cpu_run_bounds import unbounded
from .cpu_threads import fastest

#: CPU runtimes a session may use for its CPU nodes.
LITERT, REFERENCE = "litert", "reference"
#: The custom ops LiteRT's BuiltinOpResolver registers (tflite/core/kernels/register.cc).
LITERT_CUSTOM_OPS = frozenset(
    f"CUSTOM:{name}"
    for name in ("NumericVerify", "Mfcc", "AudioSpectrogram", "TFLite_Detection_PostProcess")
)


class InputRefused(Exception):
    """LiteRT's set_tensor refused an array: another dtype or shape than the run's."""


@dataclass
class CpuRun:
    """Consecutive CPU nodes of the main subgraph and how they run."""

    nodes: list[int]
    runtime: str = REFERENCE  #: LITERT or REFERENCE
    why_reference: str = ""  #: why the reference runs it, where it does
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    interpreter: Any = None  #: LiteRT's, for LITERT
    threads: int = 0  #: LiteRT's threads, for LITERT
    _runners: dict[tuple, Callable] = field(default_factory=dict, repr=False)

    def run(self, cpu: Interpreter, values: dict[int, np.ndarray]) -> None:
        """Compute the run's outputs from `values` (tensor -> array), into `values`."""
        if self.runtime == REFERENCE:
            for node in self.nodes:
                cpu.run_node(0, node, values)
            return
        arrays = self.whole_runner(self.inputs, self.outputs)([values[t] for t in self.inputs])
        values.update(zip(self.outputs, arrays, strict=True))

    def whole_runner(
        self, inputs: Sequence[int], outputs: Sequence[int]
    ) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
        """A LITERT run as a function of the arrays of tensors `inputs` (in that order)
        returning those of `outputs`: LiteRT's tensor indices looked up once (each ask
        builds dicts), no per-call mapping; made once per order asked for. InputRefused
        where LiteRT's set_tensor refuses an array (its own check of dtype and shape)."""
        key = (tuple(inputs), tuple(outputs))
        made = self._runners.get(key)
        if made is not None:
            return made
        it = self.interpreter
        ins = [d["index"] for d in it.get_input_details()]
        outs = [d["index"] for d in it.get_output_details()]
        feeds = [(i, list(inputs).index(t)) for i, t in zip(ins, self.inputs, strict=True)]
        reads = [outs[self.outputs.index(t)] for t in outputs]
        set_tensor, invoke, get_tensor = it.set_tensor, it.invoke, it.get_tensor
        where = f"nodes {self.nodes[0]}-{self.nodes[-1]}"

        def run(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
            try:
                for index, pos in feeds:
                    set_tensor(index, arrays[pos])
            except (ValueError, TypeError) as exc:
                raise InputRefused(str(exc)) from exc
            try:
                invoke()
            except (RuntimeError, ValueError) as exc:
                raise ModelError(f"LiteRT's CPU runtime failed on {where}: {exc}") from exc
            return [get_tensor(index) for index in reads]

        self._runners[key] = run
        return run


def cpu_node_runs(total: int, partitions: Sequence[Sequence[int]]) -> list[list[int]]:
    """The nodes no partition holds, cut into runs of consecutive nodes (a partition's
    first node ends a run: the partition runs there)."""
    delegated = {n for nodes in partitions for n in nodes}
    runs: list[list[int]] = []
    current: list[int] = []
    for n in range(total):
        if n in delegated:
            if current:
                runs.append(current)
                current = []
            continue
        current.append(n)
    if current:
        runs.append(current)
    return runs


def plan_cpu_runs(
    model: Model,
    partitions: Sequence[Sequence[int]],
    runtime: str = LITERT,
    threads: int | None = None,
    log: IO[str] | None = None,
    small_work: int = 0,
    trial_min_pool: int = 8,
) -> list[CpuRun]:
    """A CpuRun per run of CPU nodes, each on `runtime` where it can be. A LiteRT run
    doing less than `small_work` (placement.py's measure) takes one thread where one
    thread runs it faster, on a pool of `trial_min_pool` threads or more (cpu_threads.py)."""
    runs = [CpuRun(nodes) for nodes in cpu_node_runs(len(model.main.operators), partitions)]
    if not runs:
        return runs
    if runtime == REFERENCE:
        for run in runs:
            run.why_reference = "asked for, or an op profile timing each node"
        _say(runs, log)
        return runs
    if not litert.available():
        for run in runs:
            run.why_reference = "ai-edge-litert is not installed (the `reference` extra)"
        _say(runs, log)
        return runs
    threads = threads or usable_cpus()
    cpu = Interpreter(model)  # its own: the zeros it runs must not touch a session's state
    for run in runs:
        custom = _foreign_custom_op(model, run.nodes)
        if custom:
            run.why_reference = f"{custom}: a custom op's kernel is the app's own"
            continue
        unsafe = unbounded(model, run.nodes) or _shapes_differ(cpu, model, run.nodes)
        if unsafe:
            run.why_reference = unsafe
            continue
        try:
            data, run.inputs, run.outputs = submodel_bytes(model, run.nodes)
            shapes = [model.main.tensors[t].shape for t in run.inputs]
            choices = [threads]
            if threads >= trial_min_pool and partition_work(model.main, run.nodes) < small_work:
                choices.append(1)
            made = [litert.make_interpreter(data, n, input_shapes=shapes) for n in choices]
            run.interpreter, run.threads = fastest(made, choices)
            run.runtime = LITERT
        except (ValueError, RuntimeError) as exc:  # LiteRT refuses: no kernel, a bad prepare
            run.why_reference = str(exc).splitlines()[0][:200]
    _say(runs, log)
    return runs


def _shapes_differ(cpu: Interpreter, model: Model, nodes: list[int]) -> str:
    """Why LiteRT must not run `nodes`: on zeros of their inputs' declared shapes, the
    reference (within the farm's limits) makes a tensor of another shape than the model
    declares, which LiteRT would allocate as computed (a hostile model's 16 GiB GATHER), or
    fails. "" where every shape is the declared one."""
    sg = model.main
    ins, _ = boundary(sg, nodes, variables=False)
    feeds = [np.zeros(sg.tensors[t].shape, sg.tensors[t].dtype) for t in sg.inputs]
    values = cpu.initial_values(0, feeds)
    values.update({t: np.zeros(sg.tensors[t].shape, sg.tensors[t].dtype) for t in ins})
    try:
        for n in nodes:
            cpu.run_node(0, n, values)
    except Exception as exc:  # noqa: BLE001 - the reference names it when the job runs
        return f"the reference refuses it on zeros: {str(exc).splitlines()[0][:160]}"
    for n in nodes:
        for t in sg.operators[n].outputs:
            if t >= 0 and np.shape(values.get(t)) != tuple(sg.tensors[t].shape):
                return (
                    f"{sg.operators[n].describe()} makes {list(np.shape(values.get(t)))} "
                    f"where the model declares {list(sg.tensors[t].shape)}"
                )
    return ""


def _foreign_custom_op(model: Model, nodes: list[int]) -> str:
    """The first custom op among `nodes` that LiteRT's own resolver does not define: its
    kernel is whatever the app registers (MediaPipe's), and LiteRT's stock build may hold
    another with other conventions (its MaxPoolingWithArgmax2D writes int32 indices into
    the float32 tensor MediaPipe's GPU kernels read as float values)."""
    for n in nodes:
        op = model.main.operators[n].op
        if op.startswith("CUSTOM:") and op not in LITERT_CUSTOM_OPS:
            return op
    return ""


def _say(runs: list[CpuRun], log: IO[str] | None) -> None:
    if log is None:
        return
    for run in runs:
        where = (
            f"nodes {run.nodes[0]}-{run.nodes[-1]}"
            if len(run.nodes) > 1
            else f"node {run.nodes[0]}"
        )
        if run.runtime == LITERT:
            threads = f", {run.threads} thread{'s' if run.threads > 1 else ''}"
            print(f"INFO: CPU {where}: LiteRT's CPU runtime (XNNPACK{threads})", file=log)
        else:
            print(f"INFO: CPU {where}: the reference interpreter ({run.why_reference})", file=log)
