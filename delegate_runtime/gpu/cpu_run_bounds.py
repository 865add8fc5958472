"""Whether the farm's bounds hold for a run of CPU nodes on LiteRT, where the reference's
checks cannot reach: LiteRT allocates whatever a runtime integer says a size is, and a
loop inside it runs until its condition fails, with no deadline that can stop it.

Two things keep a run on the reference (`unbounded` says why):

- **A runtime integer that decides a size**: PAD's paddings, FILL's dims, RESHAPE's shape
  tensor, TILE's multiples. Integers that are data (token ids into GATHER or
  EMBEDDING_LOOKUP, ADD on loop counters, TOPK's values, comparisons) are safe:
  INTEGER_DATA lists, per op, the inputs where they are; any other runtime integer input
  keeps the reference.
- **A loop no constant bounds.** A WHILE runs on LiteRT only where the model's constants
  prove how often: its condition is a comparison (or a LOGICAL_AND of some) of a loop
  counter against a constant, the body adds a positive constant to that counter, and the
  counter starts at a constant (as converters write Keras's RNN loops: TextGRU's 16
  steps). At most MAX_LOOP_TRIPS iterations, and iterations times the body's work within
  the model cap (limits.max_model_macs); its condition and body pass the same checks.
  An IF's branches and a CALL_ONCE's init subgraph do too.
"""

from __future__ import annotations

import numpy as np

from ..graph import Model, Operator, Subgraph
from ..limits import DEFAULT_LIMITS
from ..macs import partition_work
from ..validate import SUBGRAPH_OPTIONS

#: Every input position of the op is data where it is an integer.
ALL = None
# fmt: off
#: Ops whose integer inputs are all data: arithmetic, comparisons, selections, joins.
_ELEMENTWISE = (
    "ADD", "SUB", "MUL", "DIV", "FLOOR_DIV", "FLOOR_MOD", "MINIMUM", "MAXIMUM",
    "SQUARED_DIFFERENCE", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
    "GREATER_EQUAL", "SELECT", "SELECT_V2", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT",
    "CAST", "ABS", "NEG", "SIGN", "SQUARE", "BITWISE_XOR", "RIGHT_SHIFT", "CONCATENATION",
    "PACK", "DYNAMIC_UPDATE_SLICE",
)
#: Ops whose input 0 is the tensor moved, reduced or reshaped; their other inputs (a
#: shape, an axis, paddings, multiples, begin and end) decide shapes.
_FIRST_IS_DATA = (
    "ARG_MAX", "ARG_MIN", "TOPK_V2", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "UNPACK",
    "TRANSPOSE", "STRIDED_SLICE", "SLICE", "CUMSUM", "REVERSE_V2", "SUM", "MEAN",
    "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "SPLIT_V", "TILE", "PAD",
    "PADV2", "SHAPE", "RANK", "ZEROS_LIKE", "ONES_LIKE",
)
# fmt: on
#: Ops whose runtime integer inputs at these positions are data, never a size (ALL: any).
INTEGER_DATA: dict[str, tuple[int, ...] | None] = {
    **dict.fromkeys(_ELEMENTWISE, ALL),
    **dict.fromkeys(_FIRST_IS_DATA, (0,)),
    # lookups: ids and indices pick values; the output's shape is the indices' shape
    "GATHER": (0, 1),
    "GATHER_ND": (0, 1),
    "EMBEDDING_LOOKUP": (0, 1),
    "SCATTER_ND": (0, 1),  # the shape (input 2) decides the size
    "ONE_HOT": (0,),  # the depth (input 1) decides it
    "SPLIT": (1,),  # input 0 is the axis
    "FILL": (1,),  # the value; input 0 is the dims
}
#: The most iterations a WHILE may take on LiteRT.
MAX_LOOP_TRIPS = 1_000_000
_COMPARES = {
    "LESS": (0, 1, 0),
    "LESS_EQUAL": (0, 1, 1),
    "GREATER": (1, 0, 0),
    "GREATER_EQUAL": (1, 0, 1),
}


def unbounded(model: Model, nodes: list[int], si: int = 0) -> str:
    """Why LiteRT must not run `nodes` of subgraph `si` ("" where the bounds hold)."""
    sg = model.subgraphs[si]
    for n in nodes:
        op = sg.operators[n]
        if op.op == "WHILE":
            why = _loop(model, si, op)
        elif op.op in SUBGRAPH_OPTIONS:  # an IF's branches, a CALL_ONCE's init subgraph
            called = (op.options.get(name) for name in SUBGRAPH_OPTIONS[op.op])
            why = next(filter(None, (_whole(model, c) for c in called)), "")
        else:
            why = _sizing_integer(sg, op)
        if why:
            return why
    return ""


def loop_trips(model: Model, si: int, op: Operator) -> int | None:
    """The most iterations the model's constants allow WHILE `op` of subgraph `si`, or
    None where they prove no bound."""
    sg = model.subgraphs[si]
    cond = model.subgraphs[op.options.get("cond_subgraph_index")]
    body = model.subgraphs[op.options.get("body_subgraph_index")]
    made_by = {t: o for o in cond.operators for t in o.outputs}

    def start(k: int) -> int | None:
        return _int_constant(sg, op.inputs[k]) if k < len(op.inputs) else None

    def limit(t: int) -> int | None:
        if t in cond.inputs:  # a loop value the body passes on unchanged
            k = cond.inputs.index(t)
            unchanged = k < len(body.outputs) and body.outputs[k] == body.inputs[k]
            return start(k) if unchanged else None
        return _int_constant(cond, t)

    def guard(t: int) -> int | None:
        producer = made_by.get(t)
        if producer is None:
            return None
        if producer.op == "LOGICAL_AND":  # false once any conjunct is
            bounds = [b for b in map(guard, producer.inputs) if b is not None]
            return min(bounds) if bounds else None
        if producer.op not in _COMPARES or len(producer.inputs) != 2:
            return None
        counter_pos, limit_pos, inclusive = _COMPARES[producer.op]
        counter, bound = producer.inputs[counter_pos], limit(producer.inputs[limit_pos])
        if counter not in cond.inputs or bound is None:
            return None
        k = cond.inputs.index(counter)
        first, step = start(k), _step(body, k)
        if first is None or step is None:
            return None
        if bound + step > np.iinfo(cond.tensors[counter].dtype).max:
            return None  # the last step could wrap around below the bound: no bound
        return max(0, -(-(bound - first + inclusive) // step))

    return guard(cond.outputs[0]) if len(cond.outputs) == 1 else None


def _loop(model: Model, si: int, op: Operator) -> str:
    trips = loop_trips(model, si, op)
    if trips is None:
        return "WHILE: no constant bounds its iterations (the reference stops it at the deadline)"
    if trips > MAX_LOOP_TRIPS:
        return f"WHILE: {trips} iterations, over the {MAX_LOOP_TRIPS} LiteRT may run"
    cond, body = op.options.get("cond_subgraph_index"), op.options.get("body_subgraph_index")
    work = sum(
        partition_work(model.subgraphs[s], range(len(model.subgraphs[s].operators)))
        for s in (cond, body)
    )
    cap = DEFAULT_LIMITS.max_model_macs
    if trips * work > cap:
        return (
            f"WHILE: {trips} iterations of {work} multiply-adds or elements, over the cap of {cap}"
        )
    return _whole(model, cond) or _whole(model, body)


def _whole(model: Model, si: int | None) -> str:
    """unbounded over every node of subgraph `si`."""
    if si is None or not 0 <= si < len(model.subgraphs):
        return f"a control-flow op names subgraph {si}"
    why = unbounded(model, list(range(len(model.subgraphs[si].operators))), si)
    return f"subgraph {si}: {why}" if why else ""


def _sizing_integer(sg: Subgraph, op: Operator) -> str:
    """Why `op` may size a tensor from a runtime integer ("" where it cannot)."""
    data = INTEGER_DATA.get(op.op, ())
    for pos, t in enumerate(op.inputs):
        tensor = sg.tensors[t] if t >= 0 else None
        if (
            tensor is not None
            and not tensor.is_constant
            and tensor.dtype.kind in "iu"
            and tensor.quantization is None
            and not (data is ALL or pos in data)
        ):
            return (
                f"{op.describe()} reads runtime integers (input {pos}): sizes the reference checks"
            )
    return ""


def _int_constant(sg: Subgraph, t: int) -> int | None:
    """The value of a constant integer scalar (one element), else None."""
    tensor = sg.tensors[t] if t >= 0 else None
    if (
        tensor is None
        or tensor.data is None
        or tensor.dtype.kind not in "iu"
        or tensor.data.size != 1
    ):
        return None
    return int(tensor.data.reshape(()))


def _step(body: Subgraph, k: int) -> int | None:
    """The positive constant the body adds to loop value `k`, else None."""
    if k >= len(body.outputs) or k >= len(body.inputs):
        return None
    out = body.outputs[k]
    producer = next((o for o in body.operators if out in o.outputs), None)
    if (
        producer is None
        or producer.op != "ADD"
        or producer.options.get("fused_activation_function", 0)
    ):
        return None
    if len(producer.inputs) != 2 or body.inputs[k] not in producer.inputs:
        return None
    other = producer.inputs[1 - producer.inputs.index(body.inputs[k])]
    step = _int_constant(body, other)
    return step if step is not None and step > 0 else None
