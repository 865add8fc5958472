"""Structural checks on a converted model, before anything runs."""

from __future__ import annotations

from .errors import ModelError
from .graph import Model, Subgraph

#: Options that name subgraphs, per control-flow op.
SUBGRAPH_OPTIONS = {
    "WHILE": ("cond_subgraph_index", "body_subgraph_index"),
    "IF": ("then_subgraph_index", "else_subgraph_index"),
    "CALL_ONCE": ("init_subgraph_index",),
}


def validate_model(model: Model) -> None:
    """Raise ModelError naming the tensor or operator at fault; return None when sound."""
    for si, sg in enumerate(model.subgraphs):
        _validate_subgraph(model, si, sg)
    _check_subgraph_calls_acyclic(model)


def _validate_subgraph(model: Model, si: int, sg: Subgraph) -> None:
    where = f"subgraph {si} '{sg.name}'"
    available = set(sg.inputs)
    available.update(t.index for t in sg.tensors if t.is_constant or t.is_variable)
    produced_by: dict[int, int] = {}
    for op in sg.operators:
        for t in op.inputs:
            if t == -1:
                continue
            if t not in available:
                tensor = sg.tensors[t]
                later = produced_by.get(t)
                why = (
                    "is produced later (a cycle or a wrong order)"
                    if later is None and any(t in o.outputs for o in sg.operators[op.index :])
                    else "is never produced"
                )
                raise ModelError(f"{where} {op.describe()}: input tensor {t} '{tensor.name}' {why}")
        for t in op.outputs:
            tensor = sg.tensors[t]
            if tensor.is_constant:
                raise ModelError(
                    f"{where} {op.describe()}: output tensor {t} '{tensor.name}' is a constant"
                )
            if t in produced_by or t in sg.inputs:
                raise ModelError(
                    f"{where} {op.describe()}: output tensor {t} '{tensor.name}' is written twice"
                )
            produced_by[t] = op.index
            available.add(t)
        for key in SUBGRAPH_OPTIONS.get(op.op, ()):
            target = op.options.get(key)
            if not isinstance(target, int) or not 0 <= target < len(model.subgraphs):
                raise ModelError(
                    f"{where} {op.describe()}: {key}={target} is not a subgraph of this model"
                )
    for t in sg.outputs:
        if t not in available:
            raise ModelError(f"{where}: output tensor {t} '{sg.tensors[t].name}' is never produced")


def _check_subgraph_calls_acyclic(model: Model) -> None:
    calls = {
        si: {op.options[k] for op in sg.operators for k in SUBGRAPH_OPTIONS.get(op.op, ())}
        for si, sg in enumerate(model.subgraphs)
    }
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done

    def visit(si: int, path: list[int]) -> None:
        state[si] = 1
        for callee in calls[si]:
            if state.get(callee) == 1:
                chain = " -> ".join(str(s) for s in path + [si, callee])
                raise ModelError(f"subgraphs call each other in a cycle: {chain}")
            if callee not in state:
                visit(callee, path + [si])
        state[si] = 2

    for si in calls:
        if si not in state:
            visit(si, [])
