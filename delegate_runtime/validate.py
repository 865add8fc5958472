"""Structural checks on a converted model, before anything runs."""

from __future__ import annotations

from .errors import ModelError
from .graph import Model, Operator, Subgraph
from .limits import DEFAULT_LIMITS, Limits
from .macs import op_macs
from .ops.alloc import BROADCASTING_OPS, check_alloc, check_broadcast
from .ops.common import PADDING_SAME, output_size, same_padding

#: Options that name subgraphs, per control-flow op.
SUBGRAPH_OPTIONS = {
    "WHILE": ("cond_subgraph_index", "body_subgraph_index"),
    "IF": ("then_subgraph_index", "else_subgraph_index"),
    "CALL_ONCE": ("init_subgraph_index",),
}
#: Deepest nesting of subgraph calls (WHILE in IF in ...) a model may have.
MAX_CALL_DEPTH = 64

#: Inputs each op needs at least, as LiteRT's kernels check (NumInputs) at Prepare.
MIN_INPUTS = {
    **dict.fromkeys(
        (
            "ABS", "AVERAGE_POOL_2D", "CAST", "COS", "DEPTH_TO_SPACE", "DEQUANTIZE", "ELU",
            "EXP", "GELU", "HARD_SWISH", "LEAKY_RELU", "LOG", "LOGICAL_NOT", "LOGISTIC",
            "LOG_SOFTMAX", "MAX_POOL_2D", "NEG", "QUANTIZE", "READ_VARIABLE", "RELU",
            "RELU6", "RELU_0_TO_1", "RELU_N1_TO_1", "RESHAPE", "RSQRT", "SHAPE", "SIN",
            "SOFTMAX", "SPACE_TO_DEPTH", "SQRT", "SQUARE", "SQUEEZE", "TANH", "UNPACK",
            "WHERE", "ZEROS_LIKE", "CONCATENATION", "PACK", "IF",
        ),
        1,
    ),
    **dict.fromkeys(
        (
            "ADD", "ARG_MAX", "ARG_MIN", "ASSIGN_VARIABLE", "BATCH_MATMUL", "BROADCAST_TO",
            "CONV_2D", "CUMSUM", "DEPTHWISE_CONV_2D", "DIV", "EQUAL", "EXPAND_DIMS", "FILL",
            "FLOOR_DIV", "FLOOR_MOD", "FULLY_CONNECTED", "GATHER", "GATHER_ND", "GREATER",
            "GREATER_EQUAL", "LESS", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "MAXIMUM",
            "MEAN", "MINIMUM", "MIRROR_PAD", "MUL", "NOT_EQUAL", "PAD", "PADV2", "POW",
            "PRELU", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD",
            "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "SPLIT", "SQUARED_DIFFERENCE",
            "SUB", "SUM", "TILE", "TRANSPOSE", "ADD_N",
        ),
        2,
    ),
    **dict.fromkeys(
        (
            "BATCH_TO_SPACE_ND", "RANGE", "SELECT", "SELECT_V2", "SLICE", "SPACE_TO_BATCH_ND",
            "SPLIT_V", "TRANSPOSE_CONV",
        ),
        3,
    ),
    "STRIDED_SLICE": 4,
    "LSTM": 5,  # the basic kernel takes 5, the full one 20 or 24
    "UNIDIRECTIONAL_SEQUENCE_LSTM": 20,
}  # fmt: skip
_LSTM_OPTIONAL = frozenset((1, 5, 9, 10, 11, 12, 16, 17, 20, 21, 22, 23))
#: Input positions an op may leave absent (-1); every other input must be present.
OPTIONAL_INPUTS = {
    "CONV_2D": frozenset((2,)),
    "DEPTHWISE_CONV_2D": frozenset((2,)),
    "FULLY_CONNECTED": frozenset((2,)),
    "TRANSPOSE_CONV": frozenset((3,)),
    "PADV2": frozenset((2,)),
    "RESHAPE": frozenset((1,)),
    "LSTM": _LSTM_OPTIONAL,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _LSTM_OPTIONAL,
}
INT16_MAX = 2**15 - 1
#: Option ranges LiteRT's kernels check at Prepare: (option names, lowest, highest).
OPTION_RANGES = {
    "CONV_2D": (
        ("stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor"),
        1,
        INT16_MAX,
    ),
    "DEPTHWISE_CONV_2D": (
        ("stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor"),
        1,
        INT16_MAX,
    ),
    "TRANSPOSE_CONV": (("stride_h", "stride_w"), 1, INT16_MAX),
    "AVERAGE_POOL_2D": (("stride_h", "stride_w"), 1, None),
    "MAX_POOL_2D": (("stride_h", "stride_w"), 1, None),
}


def validate_model(model: Model, limits: Limits = DEFAULT_LIMITS) -> None:
    """Raise ModelError naming the tensor or operator at fault; return None when sound."""
    for si, sg in enumerate(model.subgraphs):
        _validate_subgraph(model, si, sg)
    _check_subgraph_calls_acyclic(model)
    _check_compute(model, limits)


def _check_compute(model: Model, limits: Limits) -> None:
    """The compute caps: multiply-adds per op and over the model (macs.py)."""
    total = 0
    for si, sg in enumerate(model.subgraphs):
        for op in sg.operators:
            macs = op_macs(sg, op)
            if macs > limits.max_op_macs:
                raise ModelError(
                    f"subgraph {si} '{sg.name}' {op.describe()}: {macs} multiply-adds exceed "
                    f"the cap of {limits.max_op_macs} per op"
                )
            total += macs
    if total > limits.max_model_macs:
        raise ModelError(
            f"the model's ops total {total} multiply-adds, over the cap of "
            f"{limits.max_model_macs} per model"
        )


def _validate_subgraph(model: Model, si: int, sg: Subgraph) -> None:
    where = f"subgraph {si} '{sg.name}'"
    available = set(sg.inputs)
    available.update(t.index for t in sg.tensors if t.is_constant or t.is_variable)
    produced_by: dict[int, int] = {}
    for op in sg.operators:
        _check_op_inputs(op, where)
        _check_option_ranges(op, where)
        _check_pool_padding(sg, op, where)
        _check_static_sizes(sg, op, where)
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


def _check_op_inputs(op: Operator, where: str) -> None:
    """Enough inputs, and none absent (-1) where the op requires one (LiteRT refuses such
    a model at AllocateTensors: 'Tensor at index N was optional but was expected')."""
    if op.op.startswith("CUSTOM:") or op.op not in MIN_INPUTS:
        return
    need = MIN_INPUTS[op.op]
    if len(op.inputs) < need:
        raise ModelError(
            f"{where} {op.describe()}: has {len(op.inputs)} inputs, needs at least {need}"
        )
    optional = OPTIONAL_INPUTS.get(op.op, frozenset())
    for position, t in enumerate(op.inputs):
        if t == -1 and position not in optional:
            raise ModelError(
                f"{where} {op.describe()}: input {position} is absent (-1) but required"
            )


def _check_option_ranges(op: Operator, where: str) -> None:
    """Strides and dilations in the ranges LiteRT's kernels accept."""
    if op.op not in OPTION_RANGES:
        return
    names, lowest, highest = OPTION_RANGES[op.op]
    for name in names:
        value = op.options.get(name, 1)
        if not isinstance(value, int) or value < lowest or (highest and value > highest):
            bound = f"[{lowest}, {highest}]" if highest else f">= {lowest}"
            raise ModelError(f"{where} {op.describe()}: {name}={value} must be {bound}")


def _check_pool_padding(sg: Subgraph, op: Operator, where: str) -> None:
    """SAME padding of a pool fits int16, as LiteRT's PaddingValues: a larger filter is
    refused at Prepare there (the kernel checks runtime shapes again)."""
    if op.op not in ("AVERAGE_POOL_2D", "MAX_POOL_2D") or not op.inputs or op.inputs[0] < 0:
        return
    shape = sg.tensors[op.inputs[0]].shape
    if len(shape) != 4 or op.options.get("padding", PADDING_SAME) != PADDING_SAME:
        return
    message = pool_padding_problem(op.options, shape[1:3])
    if message:
        raise ModelError(f"{where} {op.describe()}: {message}")


def _check_static_sizes(sg: Subgraph, op: Operator, where: str) -> None:
    """Sizes known at load (declared input shapes, constant size tensors) checked before
    anything runs, as LiteRT's Prepare does, and against the kernel limits: every backend
    then refuses them alike, the GPU delegate (which sizes from declared shapes) included."""
    what = f"{where} {op.describe()}"
    ins = [sg.tensors[t] if t >= 0 else None for t in op.inputs]
    if op.op in BROADCASTING_OPS and all(t is not None for t in ins) and op.outputs:
        out_dtype = sg.tensors[op.outputs[0]].dtype
        check_broadcast([t.shape for t in ins], out_dtype, f"{what}: output")
    elif op.op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR") and len(ins) >= 2:
        x, size = ins[0], ins[1]
        if x is None or size is None or size.data is None or len(x.shape) != 4:
            return
        values = [int(v) for v in size.data.reshape(-1)]
        smallest = 1 if op.op == "RESIZE_BILINEAR" else 0
        if len(values) != 2 or min(values) < smallest:
            raise ModelError(f"{what}: size must be two values >= {smallest}, got {values}")
        check_alloc((x.shape[0], *values, x.shape[3]), x.dtype, f"{what}: output")
    elif op.op == "TRANSPOSE_CONV" and len(ins) >= 3:
        shape, w, x = ins[0], ins[1], ins[2]
        if shape is None or shape.data is None or w is None or x is None:
            return
        out = [int(v) for v in shape.data.reshape(-1)]
        if len(out) != 4 or len(x.shape) != 4 or len(w.shape) != 4 or min(out) < 0:
            return  # the kernel names what is wrong
        padding = int(op.options.get("padding", PADDING_SAME))
        strides = (op.options.get("stride_h", 1), op.options.get("stride_w", 1))
        back = [
            output_size(o, k, s, 1, padding)
            for o, k, s in zip(out[1:3], w.shape[1:3], strides, strict=True)
        ]
        if back != list(x.shape[1:3]):  # LiteRT's Prepare: computed_input_height != ...
            raise ModelError(
                f"{what}: output_shape {out} maps back to {back}, not the input's "
                f"{list(x.shape[1:3])}"
            )
        check_alloc(out, x.dtype, f"{what}: output")


def pool_padding_problem(options: dict, in_hw: tuple[int, ...]) -> str:
    """Why a SAME pool's padding does not fit int16 (LiteRT's limit), or ''."""
    for axis, size in zip("hw", in_hw, strict=True):
        names = ("filter_height", "stride_h") if axis == "h" else ("filter_width", "stride_w")
        k, stride = int(options.get(names[0], 1)), int(options.get(names[1], 1))
        if stride < 1:
            continue  # refused by the option ranges
        before = same_padding(size, k, stride, 1)[0]
        if before > INT16_MAX:
            return f"{names[0]}={k} pads {before} before the input, over LiteRT's {INT16_MAX}"
    return ""


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
