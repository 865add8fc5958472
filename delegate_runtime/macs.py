"""Multiply-adds an op does, from its declared shapes: the compute cap's measure
(limits.Limits.max_op_macs and max_model_macs, checked by validate.py before anything
runs), so that a kilobyte model cannot ask a host for minutes of arithmetic; and, with
the output elements of the other ops, the work measure of the GPU delegate's placement
(gpu/placement.py).

Only the ops whose work grows faster than their tensors are counted (convolutions,
fully connected layers, matrix products); every other op's work is bounded by its
tensors' sizes, which the reader's byte caps bound already.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .graph import Operator, Subgraph

#: Transposed convolutions: filter dimensions that multiply each input value, from the
#: filter's front ([cout, kh, kw, cin]; [kd, kh, kw, cout, cin]); their input is input 2.
TRANSPOSED_TAPS = {"TRANSPOSE_CONV": 3, "CONV_3D_TRANSPOSE": 4}


def op_macs(sg: Subgraph, op: Operator) -> int:
    """Multiply-adds of one run of `op` by its declared shapes (Python ints: no wrap);
    0 for the ops not counted and where a shape it needs is missing."""
    shapes = [sg.tensors[t].shape if t >= 0 else None for t in op.inputs]
    if not op.outputs or len(shapes) < 2 or shapes[0] is None or shapes[1] is None:
        return 0
    x, w = shapes[0], shapes[1]
    outs = math.prod(int(d) for d in sg.tensors[op.outputs[0]].shape)
    if op.op == "CONV_2D" and len(w) == 4:
        return outs * math.prod(int(d) for d in w[1:])  # OHWI: kh * kw * cin per output
    if op.op == "DEPTHWISE_CONV_2D" and len(w) == 4:
        return outs * int(w[1]) * int(w[2])
    if op.op == "FULLY_CONNECTED" and w:
        return outs * int(w[-1])
    if op.op == "BATCH_MATMUL" and len(x) >= 2:
        return outs * int(x[-2] if op.options.get("adj_x") else x[-1])
    if op.op == "CONV_3D" and len(w) == 5:
        return outs * math.prod(int(d) for d in w[:4])  # DHWIO: d * h * w * cin per output
    taps = TRANSPOSED_TAPS.get(op.op)
    if taps and len(shapes) > 2 and shapes[2] is not None and len(w) == taps + 1:
        return math.prod(int(d) for d in shapes[2]) * math.prod(int(d) for d in w[:taps])
    return 0


def node_work(sg: Subgraph, node: int) -> int:
    """Multiply-adds of the node's op, or its output elements where none are counted."""
    op = sg.operators[node]
    macs = op_macs(sg, op)
    if macs:
        return macs
    return sum(math.prod(int(d) for d in sg.tensors[t].shape) for t in op.outputs if t >= 0)


def partition_work(sg: Subgraph, nodes: Sequence[int]) -> int:
    """node_work summed over `nodes`."""
    return sum(node_work(sg, n) for n in nodes)
