"""Structural checks on a converted model, before anything runs."""

from __future__ import annotations

from .errors import ModelError
from .graph import Model, Operator, Subgraph

#: Options that name subgraphs, per control-flow op.
SUBGRAPH_OPTIONS = {
    "WHILE": ("cond_subgraph_index", "body_subgraph_index"),
    "IF": ("then_subgraph_index", "else_subgraph_index"),
    "CALL_ONCE": ("init_subgraph_index",),
}
#: Deepest nesting of subgraph calls (WHILE in IF in ...) a model may have.
MAX_CALL_DEPTH = 64


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
        if op.op in SUBGRAPH_OPTIONS:
            _check_call_arity(model, op, where)
    for t in sg.outputs:
        if t not in available:
            raise ModelError(f"{where}: output tensor {t} '{sg.tensors[t].name}' is never produced")


def _arity(what: str, got: int, want: int, where: str, op: Operator) -> None:
    if got != want:
        raise ModelError(f"{where} {op.describe()}: {what} is {got}, expected {want}")


def _check_call_arity(model: Model, op: Operator, where: str) -> None:
    """The called subgraphs take and give as many tensors as the calling op passes."""
    sub = {k: model.subgraphs[op.options[k]] for k in SUBGRAPH_OPTIONS[op.op]}
    n_in, n_out = len(op.inputs), len(op.outputs)
    if op.op == "WHILE":
        cond, body = sub["cond_subgraph_index"], sub["body_subgraph_index"]
        _arity("the number of outputs", n_out, n_in, where, op)
        _arity(f"cond subgraph '{cond.name}' input count", len(cond.inputs), n_in, where, op)
        _arity(f"cond subgraph '{cond.name}' output count", len(cond.outputs), 1, where, op)
        _arity(f"body subgraph '{body.name}' input count", len(body.inputs), n_in, where, op)
        _arity(f"body subgraph '{body.name}' output count", len(body.outputs), n_in, where, op)
    elif op.op == "IF":
        if n_in < 1:
            raise ModelError(f"{where} {op.describe()}: needs a condition input")
        for branch in sub.values():
            what = f"branch subgraph '{branch.name}'"
            _arity(f"{what} input count", len(branch.inputs), n_in - 1, where, op)
            _arity(f"{what} output count", len(branch.outputs), n_out, where, op)
    else:  # CALL_ONCE: no tensors in or out, on either side
        init = sub["init_subgraph_index"]
        _arity("the number of inputs and outputs", n_in + n_out, 0, where, op)
        what = f"init subgraph '{init.name}' inputs and outputs"
        _arity(what, len(init.inputs) + len(init.outputs), 0, where, op)


def _check_subgraph_calls_acyclic(model: Model) -> None:
    """No cycles and no nesting past MAX_CALL_DEPTH, found without recursion so that a
    hostile chain of subgraphs is no crash."""
    calls = {
        si: sorted({op.options[k] for op in sg.operators for k in SUBGRAPH_OPTIONS.get(op.op, ())})
        for si, sg in enumerate(model.subgraphs)
    }
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done
    depth: dict[int, int] = {}  # subgraph -> levels of calls it runs, itself included
    for root in calls:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(calls[root]))]
        while stack:
            si, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                state[si] = 2
                depth[si] = 1 + max((depth[c] for c in calls[si]), default=0)
                if depth[si] > MAX_CALL_DEPTH:
                    raise ModelError(
                        f"subgraph {si} nests subgraph calls {depth[si]} deep, "
                        f"over the cap of {MAX_CALL_DEPTH}"
                    )
                stack.pop()
            elif state.get(callee) == 1:
                chain = " -> ".join(str(s) for s, _ in stack) + f" -> {callee}"
                raise ModelError(f"subgraphs call each other in a cycle: {chain}")
            elif callee not in state:
                state[callee] = 1
                stack.append((callee, iter(calls[callee])))
