"""Control flow: WHILE, IF and CALL_ONCE, which run other subgraphs of the model.

`validate` has already checked that the subgraph indices exist, that the calls are acyclic
and that the arities agree, so these kernels only check what depends on runtime values.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .registry import OpContext, register

#: Key in the interpreter's kernel state: indices of init subgraphs CALL_ONCE already ran.
CALL_ONCE_DONE = "call_once_done"


def _condition(value: np.ndarray, what: str) -> bool:
    """A bool tensor of one element as a Python bool (TFLite accepts nothing else)."""
    value = np.asarray(value)
    if value.dtype != np.bool_ or value.size != 1:
        raise ModelError(
            f"{what} must be a bool tensor of one element, got {value.dtype.name} "
            f"of shape {list(value.shape)}"
        )
    return bool(value.reshape(()))


@register("WHILE", versions=(1,))
def while_loop(ctx: OpContext) -> list[np.ndarray]:
    """Run the body subgraph on the loop values while the cond subgraph says true."""
    cond, body = ctx.opt("cond_subgraph_index"), ctx.opt("body_subgraph_index")
    values = list(ctx.inputs)
    if any(v is None for v in values):
        raise ModelError(f"{ctx.op.describe()}: loop inputs cannot be absent (-1)")
    while _condition(ctx.run_subgraph(cond, values)[0], f"WHILE cond subgraph {cond} output"):
        values = ctx.run_subgraph(body, values)
    return values


@register("IF", versions=(1,))
def if_then_else(ctx: OpContext) -> list[np.ndarray]:
    """Run the then or the else subgraph on inputs 1.., by the bool input 0."""
    branch = (
        ctx.opt("then_subgraph_index")
        if _condition(ctx.inputs[0], "IF condition (input 0)")
        else ctx.opt("else_subgraph_index")
    )
    return ctx.run_subgraph(branch, list(ctx.inputs[1:]))


@register("CALL_ONCE", versions=(1,))
def call_once(ctx: OpContext) -> list[np.ndarray]:
    """Run the init subgraph the first time this interpreter meets it; later, nothing."""
    init = ctx.opt("init_subgraph_index")
    done: set[int] = ctx.state.setdefault(CALL_ONCE_DONE, set())
    if init not in done:
        ctx.run_subgraph(init, [])
        done.add(init)
    return []
