"""Per-op profiling in TFLite's layout (`tsl::StatsCalculator`).

Collects, per node, the time of every timed run and which backend ran it, then prints
the `Run Order` and `Top by Computation Time` tables, `Number of nodes executed: N`, the
summary by node type and the short summary, as `benchmark_model --enable_op_profiling`
does. Sources: the CPU interpreter's `op_hook`, and sessions that report their own
per-op timings (OpenCL profiling events) as `last_op_timings` after each invoke.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..printable import printable
from .stats import Stat

#: Rows in "Top by Computation Time" (TFLite's default time_limit).
TOP_BY_TIME_ROWS = 10
TITLE_RUN_ORDER = "Run Order"
TITLE_TOP_BY_TIME = "Top by Computation Time"
#: Run order of a node in subgraph s is s * stride + node index (subgraph 0 first).
SUBGRAPH_ORDER_STRIDE = 1_000_000
PROFILE_HEADER = "Operator-wise Profiling Info for Regular Benchmark Runs:"


@dataclass
class NodeDetail:
    """One profiled node: name, type, first run order, backend and its times (us)."""

    name: str
    node_type: str
    run_order: int
    backend: str = "cpu"
    elapsed_us: Stat = field(default_factory=Stat)
    times_called: int = 0
    mem_used_bytes: int = 0

    def to_dict(self, num_runs: int) -> dict[str, Any]:
        s = self.elapsed_us
        return {
            "name": self.name,
            "node_type": self.node_type,
            "run_order": self.run_order,
            "backend": self.backend,
            "first_ms": s.first / 1000.0,
            "avg_ms": (s.avg / 1000.0) if not s.empty else None,
            "min_ms": s.min / 1000.0,
            "max_ms": s.max / 1000.0,
            "times_called": self.times_called // max(num_runs, 1),
            "mem_kb": self.mem_used_bytes / 1000.0,
        }


def node_name(output_names: Iterable[str], index: int, subgraph: int = 0) -> str:
    """TFLite's profile name of a node: `[out0,out1]:index` (subgraph > 0 is prefixed)."""
    name = f"[{','.join(output_names)}]:{index}"
    return name if subgraph == 0 else f"subgraph_{subgraph}/{name}"


class OpProfiler:
    """Accumulates per-node times over runs; `begin_run`/`end_run` bracket each run."""

    def __init__(self) -> None:
        self.details: dict[str, NodeDetail] = {}
        self.run_total_us = Stat()
        self._current: int | None = None
        self.enabled = False
        self._order = 0
        #: a delegate's nodes that ran as no kernel of their own (index -> op): a RESHAPE
        #: the GPU delegate turns into a view of its input, say
        self.without_kernel: dict[int, str] = {}

    # -- collecting -----------------------------------------------------------

    def begin_run(self) -> None:
        self.enabled = True
        self._current = 0

    def end_run(self) -> None:
        if self._current is not None:
            self.run_total_us.add(self._current)
        self._current = None
        self.enabled = False

    def record(
        self,
        name: str,
        node_type: str,
        seconds: float,
        backend: str = "cpu",
        run_order: int | None = None,
    ) -> None:
        """Add one execution of a node (ignored outside begin_run/end_run).

        `run_order` is the node's place in the graph; by default, the order first seen.
        """
        if not self.enabled or self._current is None:
            return
        us = int(seconds * 1e6)
        detail = self.details.get(name)
        if detail is None:
            order = self._order if run_order is None else run_order
            detail = NodeDetail(name, node_type, order, backend)
            self._order += 1
            self.details[name] = detail
        detail.elapsed_us.add(us)
        detail.times_called += 1
        self._current += us

    def hook_for(self, model: Any) -> Any:
        """An interpreter `op_hook(subgraph, operator, seconds)` recording into this profiler."""

        def hook(si: int, op: Any, seconds: float) -> None:
            if not self.enabled:
                return
            tensors = model.subgraphs[si].tensors
            names = [tensors[t].name for t in op.outputs if t >= 0]
            order = si * SUBGRAPH_ORDER_STRIDE + op.index
            self.record(node_name(names, op.index, si), op.op, seconds, "cpu", order)

        return hook

    def attach(self, session: Any, model: Any) -> None:
        """Hook the CPU ops of `session`: the interpreter itself, or a delegate's CPU
        fallback interpreter (`session.cpu`)."""
        model = getattr(session, "model", None) or model
        for target in (session, getattr(session, "cpu", None)):
            if target is not None and hasattr(target, "op_hook"):
                target.op_hook = self.hook_for(getattr(target, "model", None) or model)

    @staticmethod
    def detach(session: Any) -> None:
        """Remove the hooks `attach` set."""
        for target in (session, getattr(session, "cpu", None)):
            if target is not None and hasattr(target, "op_hook"):
                target.op_hook = None

    def collect_session(self, session: Any) -> None:
        """Record a session's own per-op timings of its last invoke, when it reports them.

        Either `op_profile_ns()` -> {node index: device ns} (the GPU delegate's OpenCL
        profiling events), or `last_op_timings`: dicts with `name`, `type`, `seconds`
        (or `us`) and optionally `backend`.
        """
        per_node = getattr(session, "op_profile_ns", None)
        if callable(per_node):
            sg = session.model.main
            fused = session.fused_kernels() if hasattr(session, "fused_kernels") else {}
            timed = per_node()  # reads every kernel's profiling event: once per run
            for index, ns in sorted(timed.items()):
                op = sg.operators[index]
                names = [sg.tensors[t].name for t in op.outputs if t >= 0]
                name = node_name(names, index)
                if index in fused:  # one kernel doing these nodes' work too (0 ms each)
                    name += (
                        " [fused: "
                        + ", ".join(f"{sg.operators[n].op} #{n}" for n in fused[index][1:])
                        + "]"
                    )
                self.record(name, op.op, ns / 1e9, "gpu", index)
            covered = set(timed) | {n for members in fused.values() for n in members}
            self.without_kernel = {
                i: op.op for i, op in enumerate(sg.operators) if i not in covered
            }
        timings = getattr(session, "last_op_timings", None)
        if callable(timings):
            timings = timings()
        for entry in timings or ():
            seconds = entry.get("seconds")
            if seconds is None:
                seconds = float(entry.get("us", 0)) / 1e6
            self.record(
                str(entry.get("name", "?")),
                str(entry.get("type", entry.get("node_type", "?"))),
                float(seconds),
                str(entry.get("backend", "gpu")),
            )

    # -- reporting ------------------------------------------------------------

    @property
    def num_runs(self) -> int:
        return self.run_total_us.count

    def ordered(self, by: str) -> list[NodeDetail]:
        nodes = list(self.details.values())
        if by == "time":
            return sorted(nodes, key=lambda d: (-d.elapsed_us.avg, d.run_order))
        return sorted(nodes, key=lambda d: d.run_order)

    def to_dict(self) -> dict[str, Any]:
        runs = self.num_runs
        return {
            "num_runs": runs,
            "run_total_avg_us": None if self.run_total_us.empty else self.run_total_us.avg,
            "nodes": [d.to_dict(runs) for d in self.ordered("run_order")],
            "by_type": [row._asdict() for row in by_type(self)],
        }

    def format(self) -> str:
        """The tables `benchmark_model --enable_op_profiling` prints, as one string."""
        return format_profile(self)


def _field(value: Any, width: int) -> str:
    """`InitField`: a tab, then the value right-aligned in `width`, floats fixed to 3."""
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    return "\t" + text.rjust(width)


def _header(title: str) -> str:
    return (
        f"============================== {title} ==============================\n"
        + _field("[node type]", 24)
        + _field("[first]", 9)
        + _field("[avg ms]", 9)
        + _field("[%]", 8)
        + _field("[cdf%]", 8)
        + _field("[mem KB]", 10)
        + _field("[times called]", 9)
        + "\t[Name]"
    )


def _row(p: OpProfiler, d: NodeDetail, cumulative_us: float) -> str:
    """One node's row; its name and type come from the model, so they are escaped."""
    total = p.run_total_us.sum or 1
    s = d.elapsed_us
    return (
        _field(printable(d.node_type), 24)
        + _field(s.first / 1000.0, 9)
        + _field(s.avg / 1000.0, 9)
        + _field(s.sum * 100.0 / total, 7)
        + "%"
        + _field(cumulative_us * 100.0 / total, 7)
        + "%"
        + _field(d.mem_used_bytes / 1000.0, 10)
        + _field(d.times_called // max(p.num_runs, 1), 9)
        + f"\t{printable(d.name)}"
    )


def format_table(p: OpProfiler, title: str, by: str, limit: int = 0) -> str:
    """One table (`GetStatsByMetric`): header, a row per node, a blank line."""
    lines = [_header(title)]
    cumulative = 0.0
    for i, d in enumerate(p.ordered(by)):
        if limit and i >= limit:
            break
        cumulative += d.elapsed_us.sum
        lines.append(_row(p, d, cumulative))
    return "\n".join(lines) + "\n\n"


class TypeRow(NamedTuple):
    """One row of the summary by node type (times per run)."""

    node_type: str
    count: int
    avg_ms: float
    avg_pct: float
    cdf_pct: float
    mem_kb: float
    times_called: int


def by_type(p: OpProfiler) -> list[TypeRow]:
    """Per node type: count, avg ms per run, %, cdf %, mem KB, times called per run."""
    runs = max(p.num_runs, 1)
    count: dict[str, int] = {}
    time_us: dict[str, int] = {}
    mem: dict[str, int] = {}
    called: dict[str, int] = {}
    accumulated = 0
    for d in p.details.values():
        t = d.elapsed_us.sum // runs
        accumulated += t
        count[d.node_type] = count.get(d.node_type, 0) + 1
        time_us[d.node_type] = time_us.get(d.node_type, 0) + t
        mem[d.node_type] = mem.get(d.node_type, 0) + d.mem_used_bytes
        called[d.node_type] = called.get(d.node_type, 0) + d.times_called // runs
    rows = []
    cdf = 0.0
    for node_type in sorted(time_us, key=lambda k: (-time_us[k], k)):
        pct = time_us[node_type] / accumulated * 100.0 if accumulated else 0.0
        cdf += pct
        rows.append(
            TypeRow(
                node_type,
                count[node_type],
                time_us[node_type] / 1000.0,
                pct,
                cdf,
                mem[node_type] / 1000.0,
                called[node_type],
            )
        )
    return rows


def format_by_type(p: OpProfiler) -> str:
    lines = [
        f"Number of nodes executed: {len(p.details)}",
        "============================== Summary by node type ==============================",
        _field("[Node type]", 24)
        + _field("[count]", 9)
        + _field("[avg ms]", 10)
        + _field("[avg %]", 11)
        + _field("[cdf %]", 11)
        + _field("[mem KB]", 10)
        + _field("[times called]", 10),
    ]
    for r in by_type(p):
        lines.append(
            _field(printable(r.node_type), 24)
            + _field(r.count, 9)
            + _field(r.avg_ms, 10)
            + _field(r.avg_pct, 10)
            + "%"
            + _field(r.cdf_pct, 10)
            + "%"
            + _field(r.mem_kb, 10)
            + _field(r.times_called, 9)
        )
    return "\n".join(lines) + "\n\n"


def format_profile(p: OpProfiler) -> str:
    """Header line, both tables, the type summary and the short summary."""
    return (
        PROFILE_HEADER
        + "\n"
        + format_table(p, TITLE_RUN_ORDER, "run_order")
        + format_table(p, TITLE_TOP_BY_TIME, "time", TOP_BY_TIME_ROWS)
        + format_by_type(p)
        + f"Timings (microseconds): {p.run_total_us.format(percentiles=False)}\n"
        + "Memory (bytes): count=0\n"
        + f"{len(p.details)} nodes observed{_without_kernel(p)}\n"
    )


def _without_kernel(p: OpProfiler) -> str:
    """`; 1 more ran as no kernel of its own: RESHAPE #29`, so that the count matches the
    delegate's `Replacing 31 out of 31 node(s)` line; "" when every node was observed."""
    seen = {d.run_order for d in p.details.values()}
    left = [f"{op} #{i}" for i, op in sorted(p.without_kernel.items()) if i not in seen]
    if not left:
        return ""
    return f"; {len(left)} more ran as no kernel of its own: {', '.join(left)}"
