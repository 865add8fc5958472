"""The op profile benchmark_model prints, with the nodes a phone's TFLite would have.

TFLite's profiler times the nodes of the execution plan (subgraph.cc: OpInvoke under
TFLITE_SCOPED_TAGGED_OPERATOR_PROFILE). ReplaceNodeSubsetsWithDelegateKernels takes each
delegated partition out of the plan and adds one node for it, at the end of the graph (its
index: the nodes already there, in partition order). So the profile has one row per
partition where the partition ran, its type what GetTFLiteOpName gives a delegate kernel
(the registration's custom_name: `TfLiteGpuDelegateV2`), named as profile_summarizer.cc
names every node: its output tensors, `", "`-joined, and its index (`[a, b]:7`). A
partition's outputs are its tensors read outside it or given out by the model, sorted by
index (graph_info.cc). The GPU delegate reports no inner ops.

Our runtime times each delegated op (OpenCL events) and joins names with ","; here the
rows are regrouped and renamed. The tables print each node's first and average time and
its share: a partition's are its ops' sums, exact; the run totals (the `Timings` line)
do not change, and are kept as the runtime printed them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from delegate_runtime.graph import Model
from delegate_runtime.tools.benchmark_format import GPU_DELEGATE_NAME
from delegate_runtime.tools.profile import (
    PROFILE_HEADER,
    TITLE_RUN_ORDER,
    TITLE_TOP_BY_TIME,
    TOP_BY_TIME_ROWS,
    NodeDetail,
    OpProfiler,
    format_by_type,
    format_table,
)
from delegate_runtime.tools.stats import Stat

_TIMINGS = "Timings (microseconds):"
_OBSERVED = re.compile(r"^\d+ nodes observed.*$", re.M)


@dataclass(frozen=True)
class DelegateNode:
    """One delegated partition as the interpreter's node: its ops, index and name."""

    nodes: frozenset[int]
    index: int
    name: str


def tflite_name(output_names: Sequence[str], index: int) -> str:
    """profile_summarizer.cc's name of a node: `[out0, out1]:index`."""
    return f"[{', '.join(output_names)}]:{index}"


def delegate_nodes(model: Model, enable_quant: bool, max_partitions: int) -> list[DelegateNode]:
    """The GPU delegate's nodes for a model: its partitions as the runtime's GPU session
    makes them (fold, then partition), numbered and named as TFLite does."""
    from delegate_runtime.gpu.fold import fold_constants
    from delegate_runtime.gpu.partition import partition
    from delegate_runtime.gpu.support import SupportOptions

    folded, _ = fold_constants(model)
    parts = partition(folded.main, SupportOptions(enable_quant), max_partitions).partitions
    sg = model.main
    out = []
    for k, nodes in enumerate(parts):
        inside = set(nodes)
        produced = {t for op in sg.operators if op.index in inside for t in op.outputs if t >= 0}
        read_outside = {t for op in sg.operators if op.index not in inside for t in op.inputs}
        outs = sorted(t for t in produced if t in read_outside or t in sg.outputs)
        index = len(sg.operators) + k
        name = tflite_name([sg.tensors[t].name for t in outs], index)
        out.append(DelegateNode(frozenset(nodes), index, name))
    return out


def _stat(first_us: int, sum_us: int, count: int) -> Stat:
    """Samples with this first value, sum and count (what the tables print of them)."""
    if count <= 1:
        return Stat.of([first_us])
    rest, extra = divmod(sum_us - first_us, count - 1)
    return Stat.of([first_us] + [rest + (1 if i < extra else 0) for i in range(count - 1)])


def _us(ms: Any, times: int = 1) -> int:
    """Milliseconds (the profile's unit) as whole microseconds, `times` over."""
    return round(float(ms or 0.0) * 1000.0 * times)


def regroup(profile: dict[str, Any], delegates: Sequence[DelegateNode], model: Model) -> OpProfiler:
    """The runtime's per-op profile (`BenchmarkResult.op_profile`) as TFLite's: each
    partition's ops one delegate node, the main graph's other nodes named as TFLite names
    them (other subgraphs' rows as they are)."""
    sg = model.main
    ops = {op.index: op for op in sg.operators}
    runs = max(int(profile.get("num_runs") or 1), 1)
    owner = {n: d for d in delegates for n in d.nodes}
    # node name -> [node type, backend, run order, first us, total us, calls]
    nodes: dict[str, list[Any]] = {}
    for row in profile.get("nodes", []):
        order = int(row["run_order"])
        calls = max(int(row.get("times_called") or 1), 1) * runs
        first, total = _us(row.get("first_ms")), _us(row.get("avg_ms"), calls)
        d = owner.get(order)
        if d is not None:  # one Invoke of the delegate's kernel per run
            acc = nodes.setdefault(d.name, [GPU_DELEGATE_NAME, "gpu", order, 0, 0, runs])
            acc[2], acc[3], acc[4] = min(acc[2], order), acc[3] + first, acc[4] + total
            continue
        name = row["name"]
        if order in ops:
            name = tflite_name([sg.tensors[t].name for t in ops[order].outputs if t >= 0], order)
        nodes[name] = [row["node_type"], row.get("backend", "cpu"), order, first, total, calls]
    out = OpProfiler()
    for name, (node_type, backend, order, first, total, calls) in nodes.items():
        detail = NodeDetail(name, node_type, order, backend)
        detail.elapsed_us = _stat(first, total, calls)
        detail.times_called = calls
        out.details[name] = detail
    out.run_total_us = _stat(0, sum(d.elapsed_us.sum for d in out.details.values()), runs)
    return out


def format_like_tflite(printed: str, p: OpProfiler) -> str:
    """The profile section for `p`, with the runtime's own run totals (`printed`)."""
    at = printed.find(_TIMINGS)
    tail = printed[at:] if at >= 0 else f"{_TIMINGS} count=0\n"
    return (
        PROFILE_HEADER
        + "\n"
        + format_table(p, TITLE_RUN_ORDER, "run_order")
        + format_table(p, TITLE_TOP_BY_TIME, "time", TOP_BY_TIME_ROWS)
        + format_by_type(p)
        + _OBSERVED.sub(f"{len(p.details)} nodes observed", tail)
    )


class HeldProfile:
    """A stream that passes the runtime's lines on, except its profile section (kept)."""

    def __init__(self, out: IO[str]):
        self.out = out
        self.text = ""

    def write(self, text: str) -> int:
        if text.startswith(PROFILE_HEADER):
            self.text = text
        else:
            self.out.write(text)
        return len(text)

    def flush(self) -> None:
        self.out.flush()
