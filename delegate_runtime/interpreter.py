"""The numpy reference interpreter: runs a model's subgraphs op by op on the CPU."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import JobError, JobTimeout, ModelError
from .graph import Model, Operator, Subgraph
from .limits import DEFAULT_LIMITS, Limits
from .ops.alloc import BROADCASTING_OPS, check_broadcast, human_bytes, kernel_limits
from .ops.registry import Kernel, OpContext, lookup

#: Precision modes: fp16 rounds every float activation to half precision, as fp16 storage.
PRECISIONS = ("fp32", "fp16")

#: Called after each op with (subgraph index, operator, seconds).
OpHook = Callable[[int, Operator, float], None]


@dataclass
class _Plan:
    kernels: list[Kernel]
    #: tensor indices to drop after each op (their last use)
    frees: list[tuple[int, ...]]


def check_supported(model: Model) -> None:
    """Raise ModelError naming every op or version the reference interpreter lacks."""
    problems = []
    for si, sg in enumerate(model.subgraphs):
        for op in sg.operators:
            kernel, why = lookup(op.op, op.version)
            if kernel is None:
                problems.append(f"subgraph {si} {op.describe()}: {why}")
    if problems:
        raise ModelError("model uses ops this runtime cannot run:\n  " + "\n  ".join(problems))


class Interpreter:
    """Runs a validated model on the CPU with the reference kernels.

    Kernels size nothing past `limits` (the reader's caps by default). `deadline` is a
    `time.monotonic()` time and `cancelled` a check: past the one or once the other says
    True, invoke stops between ops with JobTimeout or JobError (an endless WHILE ends
    there). Both may be set after construction, e.g. per job.
    """

    def __init__(
        self,
        model: Model,
        precision: str = "fp32",
        op_hook: OpHook | None = None,
        limits: Limits = DEFAULT_LIMITS,
        deadline: float | None = None,
        cancelled: Callable[[], bool] | None = None,
    ):
        if precision not in PRECISIONS:
            raise JobError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        check_supported(model)
        self.model = model
        self.precision = precision
        self.op_hook = op_hook
        self.limits = limits
        self.deadline = deadline
        self.cancelled = cancelled
        self._plans = [self._plan(sg) for sg in model.subgraphs]
        self._variables: dict[tuple[int, int], np.ndarray] = {}
        #: state that stateful kernels keep for the interpreter's life (CALL_ONCE, resources)
        self.kernel_state: dict[str, Any] = {}
        self.reset_variables()

    # -- set-up ---------------------------------------------------------------

    @staticmethod
    def _plan(sg: Subgraph) -> _Plan:
        kernels = [lookup(op.op, op.version)[0] for op in sg.operators]
        keep = set(sg.outputs) | {t.index for t in sg.tensors if t.is_constant or t.is_variable}
        last_use: dict[int, int] = {}
        for op in sg.operators:
            for t in (*op.inputs, *op.outputs):
                if t >= 0:
                    last_use[t] = op.index
        frees: list[list[int]] = [[] for _ in sg.operators]
        for t, i in last_use.items():
            if t not in keep:
                frees[i].append(t)
        return _Plan(kernels, [tuple(f) for f in frees])  # type: ignore[misc]

    def reset_variables(self) -> None:
        """Set every variable tensor (e.g. LSTM state) back to its initial value."""
        self._variables.clear()
        for si, sg in enumerate(self.model.subgraphs):
            for t in sg.tensors:
                if t.is_variable:
                    # NOTE: np.zeros maps untouched pages: a huge declared state that no op
                    # uses costs no memory, where a copy would allocate it all up front.
                    init = np.array(t.data) if t.data is not None else np.zeros(t.shape, t.dtype)
                    q = t.quantization
                    if t.data is None and t.dtype == np.int8 and q is not None and q.zero_point[0]:
                        # LiteRT resets an int8 variable to its zero point (ResetVariableTensor)
                        init = np.full(t.shape, q.zero_point[0], np.int8)
                    self._variables[(si, t.index)] = init

    # -- running --------------------------------------------------------------

    def invoke(self, inputs: Sequence[np.ndarray], subgraph: int = 0) -> list[np.ndarray]:
        """Run a subgraph on `inputs` (in its input order) and return its outputs."""
        return self.run_subgraph(subgraph, self.check_inputs(inputs, subgraph))

    def check_inputs(self, inputs: Sequence[np.ndarray], subgraph: int = 0) -> list[np.ndarray]:
        """`inputs` as arrays, after checking their count, dtypes and shapes."""
        sg = self.model.subgraphs[subgraph]
        if len(inputs) != len(sg.inputs):
            raise JobError(f"model takes {len(sg.inputs)} inputs, {len(inputs)} given")
        return [self._check_input(sg, pos, np.asarray(x)) for pos, x in enumerate(inputs)]

    def initial_values(self, si: int, inputs: list[np.ndarray]) -> dict[int, np.ndarray]:
        """Constants, variables and inputs of subgraph `si`, by tensor index."""
        sg = self.model.subgraphs[si]
        values: dict[int, np.ndarray] = {t.index: t.data for t in sg.tensors if t.data is not None}
        for (vsi, ti), v in self._variables.items():
            if vsi == si:
                values[ti] = v
        values.update(zip(sg.inputs, inputs, strict=True))
        return values

    def run_node(self, si: int, node: int, values: dict[int, np.ndarray]) -> None:
        """Run one operator of subgraph `si` on `values` (which it updates)."""
        sg = self.model.subgraphs[si]
        self._run_op(si, sg, sg.operators[node], self._plans[si].kernels[node], values)

    def invoke_signature(self, key: str, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        """Run a signature by name with named inputs; returns named outputs."""
        sig = next((s for s in self.model.signatures if s.key == key), None)
        if sig is None:
            keys = ", ".join(s.key for s in self.model.signatures) or "none"
            raise JobError(f"no signature {key!r} (the model has: {keys})")
        sg = self.model.subgraphs[sig.subgraph_index]
        by_tensor = {}
        for name, t in sig.inputs.items():
            if name not in inputs:
                raise JobError(f"signature {key!r} needs input {name!r}")
            by_tensor[t] = inputs[name]
        ordered = [by_tensor[t] for t in sg.inputs]
        outs = self.invoke(ordered, sig.subgraph_index)
        by_out = dict(zip(sg.outputs, outs, strict=True))
        return {name: by_out[t] for name, t in sig.outputs.items()}

    def _check_input(self, sg: Subgraph, pos: int, x: np.ndarray) -> np.ndarray:
        t = sg.tensors[sg.inputs[pos]]
        if x.dtype != t.dtype:
            raise JobError(f"input {pos} '{t.name}' must be {t.dtype.name}, got {x.dtype.name}")
        if tuple(x.shape) == t.shape:  # the declared shape, whatever the signature says (as
            return x  # TFLite, which reads the signature only when an input is resized)
        sig = t.shape_signature or t.shape
        ok = len(x.shape) == len(t.shape) == len(sig) and all(
            want in (-1, got) or (want == t.shape[i] == got)
            for i, (want, got) in enumerate(zip(sig, x.shape, strict=True))
        )
        if not ok:
            raise JobError(
                f"input {pos} '{t.name}' must have shape {list(sig)}, got {list(x.shape)}"
            )
        return x

    def check_stop(self, where: str) -> None:
        """JobTimeout past the deadline, JobError once cancelled; `where` names the spot."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise JobTimeout(f"the model ran past its time limit (stopped at {where})")
        if self.cancelled is not None and self.cancelled():
            raise JobError(f"the job was cancelled (stopped at {where})")

    def run_subgraph(self, si: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Run subgraph `si` (used by invoke and by control-flow kernels)."""
        sg = self.model.subgraphs[si]
        # Checked per call as well as per op: a WHILE whose subgraphs have no ops loops here.
        self.check_stop(f"subgraph {si} '{sg.name}'")
        plan = self._plans[si]
        values = self.initial_values(si, inputs)
        made: dict[int, int] = {}  # bytes of each tensor the ops made and the subgraph holds
        held = 0
        for op, kernel, frees in zip(sg.operators, plan.kernels, plan.frees, strict=True):
            self._run_op(si, sg, op, kernel, values)
            for t in op.outputs:
                held += values[t].nbytes - made.get(t, 0)
                made[t] = values[t].nbytes
            if held > self.limits.max_total_bytes:
                raise ModelError(
                    f"subgraph {si} {op.describe()}: the tensors made so far and still needed "
                    f"total {human_bytes(held)}, over the cap of "
                    f"{human_bytes(self.limits.max_total_bytes)} a subgraph holds at once"
                )
            for t in frees:
                values.pop(t, None)
                held -= made.pop(t, 0)
        return [values[t] for t in sg.outputs]

    def _run_op(
        self, si: int, sg: Subgraph, op: Operator, kernel: Kernel, values: dict[int, np.ndarray]
    ) -> None:
        ctx = OpContext(
            op=op,
            inputs=[values[t] if t >= 0 else None for t in op.inputs],
            in_tensors=[sg.tensors[t] if t >= 0 else None for t in op.inputs],
            out_tensors=[sg.tensors[t] for t in op.outputs],
            run_subgraph=self.run_subgraph,
            state=self.kernel_state,
            intermediates=[sg.tensors[t] for t in op.intermediates],
        )
        self.check_stop(f"subgraph {si} {op.describe()}")
        start = time.perf_counter()
        try:
            with kernel_limits(self.limits):
                if op.op in BROADCASTING_OPS:
                    shapes = [x.shape for x in ctx.inputs if x is not None]
                    check_broadcast(shapes, ctx.out_tensors[0].dtype, f"{op.describe()}: output")
                result = kernel.fn(ctx)
        except (ModelError, JobError):
            raise
        except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError) as exc:
            raise ModelError(f"subgraph {si} {op.describe()} failed: {exc}") from exc
        except MemoryError as exc:
            raise ModelError(
                f"subgraph {si} {op.describe()} ran out of memory: {exc or 'allocation failed'}"
            ) from exc
        if self.op_hook is not None:
            self.op_hook(si, op, time.perf_counter() - start)
        # NOTE: numpy gives 0-d results as scalars (np.bool_, np.float32): one output too.
        outs = [result] if isinstance(result, (np.ndarray, np.generic)) else list(result)
        if len(outs) != len(op.outputs):
            raise ModelError(
                f"subgraph {si} {op.describe()}: kernel gave {len(outs)} outputs, "
                f"the model declares {len(op.outputs)}"
            )
        for ti, out, tensor in zip(op.outputs, outs, ctx.out_tensors, strict=True):
            out = np.asarray(out)
            if out.dtype != tensor.dtype:
                out = out.astype(tensor.dtype)
            if self.precision == "fp16" and out.dtype == np.float32:
                out = out.astype(np.float16).astype(np.float32)
            values[ti] = out
        for ti, v in ctx.variable_writes.items():
            self._variables[(si, ti)] = v
            values[ti] = v
