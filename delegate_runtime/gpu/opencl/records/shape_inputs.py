"""The support condition shared by ops whose inputs past the first describe shapes."""

from __future__ import annotations

from ....graph import Operator, Subgraph


def constant_shape_inputs(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    for t in op.inputs[1:]:
        if t >= 0 and not sg.tensors[t].is_constant:
            return False, "Shape-like inputs must be constant."
    return True, ""
