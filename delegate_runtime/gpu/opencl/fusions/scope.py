"""The partition a fusion plan is made for, and the predicates the fusion rules share.

`plan.py` makes one `Scope` per partition and hands it to every rule: the graph, which
node produces and which nodes read each tensor, the launch units merged so far (a rule
that lets one kernel run a node merges their units), the session's switches (each rule
reads its limits from them) and the fusions they turn off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....graph import Operator, Subgraph
from ...switches import DEFAULTS, Switches
from ..lowering_api import StepSpec
from ..records import record_for
from ..schedule import Units, tensor_maps


@dataclass
class Scope:
    """One partition's nodes as the fusion rules see them."""

    sg: Subgraph
    nodes: list[int]
    leaving: set[int]  #: the tensors read outside the partition (never absorbed)
    switches: Switches = DEFAULTS  #: the session's: the rules' limits (gpu/switches.py)
    disabled: frozenset[str] = frozenset()  #: names of fusions (plan.FUSIONS) turned off
    inside: set[int] = field(init=False)
    produced_by: dict[int, int] = field(init=False)
    readers: dict[int, list[int]] = field(init=False)
    units: Units = field(init=False)

    def __post_init__(self) -> None:
        self.produced_by, self.readers = tensor_maps(self.sg)
        self.units = Units(self.sg, self.nodes, self.readers)
        self.inside = set(self.nodes)

    def on(self, fusion: str) -> bool:
        """Whether the fusion of that name is to be applied."""
        return fusion not in self.disabled

    def kernel_can(self, n: int, what: str) -> bool:
        """Whether node n's record says yes to `what` (input_scale, input_pad,
        input_depthwise, input_mean) for this node."""
        op = self.sg.operators[n]
        record = record_for(op.op)
        ask = getattr(record, what, None) if record is not None else None
        return ask is not None and bool(ask(op, self.sg))

    def sole_input_producer(self, n: int, kind: str) -> Operator | None:
        """The `kind` node of the partition producing node n's first input, where n alone
        reads its output and that output neither leaves the partition nor the model."""
        sg = self.sg
        p = self.produced_by.get(sg.operators[n].inputs[0])
        if p is None or p not in self.inside or sg.operators[p].op != kind:
            return None
        y = sg.operators[p].outputs[0]
        if self.readers.get(y) != [n] or y in self.leaving or y in sg.outputs:
            return None
        return sg.operators[p]

    def operands_ready(self, head: int, steps: list[StepSpec]) -> bool:
        """Whether `head`'s kernel can read every operand of `steps` (Units.can_read): an
        operand computed from that kernel's own output cannot be."""
        return all(
            self.units.can_read(head, self.produced_by.get(s.operand))
            for s in steps
            if s.operand is not None
        )


def plain_float(sg: Subgraph, tensors: tuple[int, ...]) -> bool:
    """Whether every tensor is float and unquantized (a quantized model's float view
    snaps between ops, which a clamp or affine read would skip)."""
    return all(
        sg.tensors[t].quantization is None and sg.tensors[t].dtype.kind == "f" for t in tensors
    )


def channel_constant(sg: Subgraph, op: Operator) -> int | None:
    """The constant input of a two-input op holding one value per channel of the other,
    whose shape it keeps; else None."""
    if len(op.inputs) != 2 or len(set(op.inputs)) != 2:
        return None
    for x, c in (op.inputs, op.inputs[::-1]):
        tx, tc = sg.tensors[x], sg.tensors[c]
        if (
            tc.is_constant
            and not tx.is_constant
            and tc.size == tx.shape[-1]
            and tc.shape[-1] == tx.shape[-1]
            and tuple(sg.tensors[op.outputs[0]].shape) == tuple(tx.shape)
        ):
            return c
    return None


def other_input(op: Operator, t: int) -> int:
    """The input of a two-input op that is not t."""
    return op.inputs[1] if op.inputs[0] == t else op.inputs[0]
