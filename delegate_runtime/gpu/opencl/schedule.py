"""The order a partition's kernels launch in, once fusion has grouped its nodes.

Each kernel does the work of a unit: a producer node and the nodes fused into it
(opencl/fusions/). A unit runs after every unit producing a tensor one of its nodes reads. Where
a fused step's operand comes from a node later in the model's order (the residual branch of
a strided block, computed after the main branch's convolution), that node's unit moves
ahead; fusion refuses a step that would make two units wait on each other.
"""

from __future__ import annotations

import heapq

from ...graph import Subgraph


class Units:
    """The partition's nodes grouped into units (one kernel each), and the dependencies
    between units through the tensors their nodes read."""

    def __init__(self, sg: Subgraph, nodes: list[int], readers: dict[int, list[int]]):
        self.sg = sg
        self.readers = readers
        self.position = {n: i for i, n in enumerate(nodes)}
        self.unit = {n: n for n in nodes}
        self.members: dict[int, list[int]] = {n: [n] for n in nodes}

    def merge(self, head: int, node: int) -> None:
        """`node`, and the unit it is in, now run in `head`'s kernel."""
        old = self.unit[node]
        if old == head:
            return
        for m in self.members.pop(old):
            self.unit[m] = head
            self.members[head].append(m)

    def successors(self, u: int) -> set[int]:
        """Units reading a tensor that unit `u` writes."""
        found = set()
        for m in self.members[u]:
            for t in self.sg.operators[m].outputs:
                for r in self.readers.get(t, []):
                    v = self.unit.get(r)
                    if v is not None and v != u:
                        found.add(v)
        return found

    def predecessors(self, u: int, produced_by: dict[int, int]) -> set[int]:
        """Units writing a tensor that unit `u` reads."""
        found = set()
        for m in self.members[u]:
            for t in self.sg.operators[m].inputs:
                v = self.unit.get(produced_by.get(t, -1)) if t >= 0 else None
                if v is not None and v != u:
                    found.add(v)
        return found

    def reaches(self, src: int, dst: int) -> bool:
        """Whether unit `dst` depends, directly or not, on unit `src`."""
        seen, todo = {src}, [src]
        while todo:
            for v in self.successors(todo.pop()):
                if v == dst:
                    return True
                if v not in seen:
                    seen.add(v)
                    todo.append(v)
        return False

    def can_read(self, head: int, operand_producer: int | None) -> bool:
        """Whether `head`'s kernel can read a tensor made by `operand_producer` (None: made
        outside the partition) without two units waiting on each other."""
        if operand_producer is None or operand_producer not in self.unit:
            return True
        other = self.unit[operand_producer]
        return other != head and not self.reaches(head, other)

    def order(self, produced_by: dict[int, int]) -> list[int]:
        """The unit heads in an order that runs every unit after those it reads from,
        otherwise keeping the model's order (by each unit's first node)."""
        first = {u: min(self.position[m] for m in ms) for u, ms in self.members.items()}
        waiting = {u: self.predecessors(u, produced_by) for u in self.members}
        after: dict[int, list[int]] = {u: [] for u in self.members}
        for u, preds in waiting.items():
            for p in preds:
                after[p].append(u)
        ready = [(first[u], u) for u, preds in waiting.items() if not preds]
        heapq.heapify(ready)
        out: list[int] = []
        while ready:
            _, u = heapq.heappop(ready)
            out.append(u)
            for v in after[u]:
                waiting[v].discard(u)
                if not waiting[v]:
                    heapq.heappush(ready, (first[v], v))
        if len(out) != len(self.members):
            raise AssertionError("fused units wait on each other")  # can_read prevents it
        return out


def tensor_maps(sg: Subgraph) -> tuple[dict[int, int], dict[int, list[int]]]:
    """(tensor -> the node producing it, tensor -> the nodes reading it)."""
    produced_by = {t: op.index for op in sg.operators for t in op.outputs}
    readers: dict[int, list[int]] = {}
    for op in sg.operators:
        for t in set(op.inputs):
            if t >= 0:
                readers.setdefault(t, []).append(op.index)
    return produced_by, readers


def launch_order(sg: Subgraph, nodes: list[int], fused: dict[int, list[int]]) -> list[int]:
    """The order to lower a partition's units in; `fused`: producer -> the other nodes
    its kernel runs. Returns the heads (producers and unfused nodes)."""
    produced_by, readers = tensor_maps(sg)
    units = Units(sg, nodes, readers)
    for head, others in fused.items():
        for n in others:
            units.merge(head, n)
    return units.order(produced_by)
