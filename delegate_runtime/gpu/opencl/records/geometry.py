"""Output-shape helpers the records share: broadcasts, windows, constant shape inputs."""

from __future__ import annotations

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ....ops.common import output_size

Shape = tuple[int, ...]


def shape_of(sg: Subgraph, t: int) -> Shape:
    if t < 0:
        raise ModelError("a required input is absent")
    return tuple(int(d) for d in sg.tensors[t].shape)


def rank4(sg: Subgraph, t: int, what: str = "input") -> Shape:
    shape = shape_of(sg, t)
    if len(shape) != 4:
        raise ModelError(f"{what} {list(shape)} must be 4-D")
    return shape


def const_ints(sg: Subgraph, t: int, what: str) -> list[int]:
    """A constant input's values as ints."""
    if t < 0 or not sg.tensors[t].is_constant or sg.tensors[t].data is None:
        raise ModelError(f"{what} must be constant")
    return [int(v) for v in np.asarray(sg.tensors[t].data).reshape(-1)]


def broadcast(shapes: list[Shape]) -> list[Shape]:
    """The broadcast of `shapes` (numpy's rules, as TFLite's binary ops), as a list of one."""
    try:
        return [tuple(int(d) for d in np.broadcast_shapes(*shapes))]
    except ValueError as exc:
        raise ModelError(f"inputs {[list(s) for s in shapes]} do not broadcast") from exc


def window_hw(op: Operator, in_hw: Shape, k_hw: Shape, dilated: bool = True) -> Shape:
    """A conv-like op's output height and width from its stride, dilation and padding."""
    o = op.options
    stride = (o.get("stride_h", 1), o.get("stride_w", 1))
    dilation = (o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)) if dilated else (1, 1)
    padding = o.get("padding", 0)
    return tuple(
        output_size(i, k, s, d, padding)
        for i, k, s, d in zip(in_hw, k_hw, stride, dilation, strict=True)
    )
