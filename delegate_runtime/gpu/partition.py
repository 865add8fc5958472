"""Split a subgraph into GPU partitions and CPU nodes, as TFLite's delegate does.

Partitions are maximal runs of supported nodes in execution order (so no partition can
depend on itself through a CPU node); `max_delegated_partitions` keeps the largest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import Subgraph
from .support import SupportOptions, supports


@dataclass
class Unsupported:
    node: int
    op: str
    reason: str


@dataclass
class DelegationSummary:
    """The facts TFLite prints about delegation, as data."""

    total_nodes: int
    delegated_nodes: int
    partitions: list[list[int]]  #: node indices of each GPU partition
    unsupported: list[Unsupported] = field(default_factory=list)
    dropped_partitions: int = 0  #: supported runs left on the CPU by max_delegated_partitions
    #: supported runs left on the CPU as too small for the GPU (placement.py), and the
    #: least work (multiply-adds or output elements) a partition needed
    below_min_work: list[list[int]] = field(default_factory=list)
    min_work: int = 0

    @property
    def nodes_below_min_work(self) -> int:
        """The supported nodes left on the CPU as too small for the GPU."""
        return sum(len(p) for p in self.below_min_work)

    @property
    def fully_delegated(self) -> bool:
        return self.total_nodes > 0 and self.delegated_nodes == self.total_nodes

    def messages(self) -> list[str]:
        """TFLite's own lines about delegation."""
        lines = []
        if self.unsupported:
            lines.append("Following operations are not supported by GPU delegate:")
            seen = set()
            for u in self.unsupported:
                key = (u.op, u.reason)
                if key not in seen:
                    seen.add(key)
                    lines.append(f"{u.op}: {u.reason}")
        if self.below_min_work:
            lines.append(
                f"{self.nodes_below_min_work} supported operations in {len(self.below_min_work)} partition(s) "
                f"will run on the CPU: each does less work than the GPU's minimum of "
                f"{self.min_work} multiply-adds or output elements, below which a GPU round "
                "trip costs more than the CPU's run (DEVICEFARM_GPU_MIN_WORK=0 delegates them)."
            )
        cpu = self.total_nodes - self.delegated_nodes
        if self.delegated_nodes == 0:
            lines.append(
                f"No operations will run on the GPU, and all {self.total_nodes} "
                "operations will run on the CPU."
            )
        elif cpu:
            lines.append(
                f"{self.delegated_nodes} operations will run on the GPU, and the "
                f"remaining {cpu} operations will run on the CPU."
            )
        if self.delegated_nodes:
            lines.append(
                f"Replacing {self.delegated_nodes} out of {self.total_nodes} node(s) with "
                f"delegate (TfLiteGpuDelegateV2) node, yielding {len(self.partitions) + self._cpu_runs()} partitions"
                " for the whole graph."
            )
        return lines

    def _cpu_runs(self) -> int:
        delegated = {n for p in self.partitions for n in p}
        runs, prev = 0, False
        for n in range(self.total_nodes):
            cpu = n not in delegated
            runs += cpu and not prev
            prev = cpu
        return runs

    def to_dict(self) -> dict:
        return {
            "total_nodes": self.total_nodes,
            "delegated_nodes": self.delegated_nodes,
            "partitions": len(self.partitions),
            "partition_nodes": [len(p) for p in self.partitions],
            "fully_delegated": self.fully_delegated,
            "unsupported": [
                {"node": u.node, "op": u.op, "reason": u.reason} for u in self.unsupported
            ],
            "dropped_partitions": self.dropped_partitions,
            "below_min_work": {
                "nodes": self.nodes_below_min_work,
                "partitions": len(self.below_min_work),
                "min_work": self.min_work,
            },
        }


def partition(sg: Subgraph, opts: SupportOptions, max_partitions: int = 1) -> DelegationSummary:
    """Decide which nodes of `sg` run on the GPU."""
    runs: list[list[int]] = []
    current: list[int] = []
    unsupported: list[Unsupported] = []
    for op in sg.operators:
        ok, why = supports(op, sg, opts)
        if ok:
            current.append(op.index)
            continue
        unsupported.append(Unsupported(op.index, op.op, why))
        if current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    kept = sorted(runs, key=len, reverse=True)
    if max_partitions > 0:
        kept = kept[:max_partitions]
    kept.sort(key=lambda p: p[0])
    return DelegationSummary(
        total_nodes=len(sg.operators),
        delegated_nodes=sum(len(p) for p in kept),
        partitions=kept,
        unsupported=unsupported,
        dropped_partitions=len(runs) - len(kept),
    )
