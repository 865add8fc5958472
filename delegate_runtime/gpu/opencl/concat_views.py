"""Channel concatenations without copies: tensors that live inside a concatenation's output.

A CONCATENATION along channels copies each input into its slot of the output, one launch
per input. DenseNet's blocks concatenate the block so far with each new layer's features
(`x = concat(x, f)`), NASNet's cells five or six branches: hundreds of copies per model.
Instead, planned here once per partition:

- an input that nothing else reads is written by the kernel making it straight into its
  slot of the output (a *slot*), where that kernel can: a GEMM (gemm.cl.in's `ldc`,
  `coff`), `binary4d` or `pool2d` (their `oview`), their fused epilogues included; the
  concatenation copies the others as before;
- a concatenation's output that is the first input of a later one, and is otherwise read
  only by binary elementwise kernels (the strided reads of `binary4d`) or by a GEMM that
  reads it through a MUL it absorbed (a BatchNormalization's or a gate's: gemm.cl.in's
  `lda`), lives at the
  start of each pixel of the later output (a *prefix*): DenseNet's `x` grows in place.

A view is the channels [offset, offset + C) of every pixel of its root's buffer, whose
pixels are `stride` channels apart. Only tensors of the partition qualify (nothing read
outside it), of concatenations with no fused activation whose inputs and output are float
or share one int8 grid (then the concatenation's quantize-and-dequantize step is skipped:
every value is already on that grid).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...graph import Operator, Subgraph

#: Ops whose kernel (`binary4d`) reads each input through its own 4-D strides.
STRIDED_READERS = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"}


@dataclass(frozen=True)
class View:
    """Channels [offset, offset + channels) of each pixel of `root`'s buffer."""

    root: int
    offset: int
    stride: int  #: channels per pixel of the root

    def strides4(self, shape4: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """Element strides of a tensor of `shape4` (NHWC) seen through this view."""
        _, h, w, _ = shape4
        return (h * w * self.stride, w * self.stride, self.stride, 1)


@dataclass
class ConcatPlan:
    prefix: dict[int, View]  #: concatenation outputs living in a later one's output
    slots: dict[int, View]  #: inputs their kernel may write in place (else they are copied)
    concats: set[int]  #: the concatenation nodes the views belong to


def _channel_concat(op: Operator, sg: Subgraph) -> bool:
    out = sg.tensors[op.outputs[0]]
    rank = len(out.shape)
    return (
        op.op == "CONCATENATION"
        and 1 <= rank <= 4
        and op.options.get("axis", 0) % rank == rank - 1
        and not op.options.get("fused_activation_function", 0)
        and all(t >= 0 for t in op.inputs)
        and len({_grid(sg, t) for t in (*op.inputs, *op.outputs)}) == 1
    )


def _grid(sg: Subgraph, t: int) -> tuple | None:
    """What a tensor's values lie on: None for float, (scale, zero point) for a tensor
    quantized per tensor; a concatenation whose inputs and output share one grid copies
    values already on it (its quantize-and-dequantize step changes nothing)."""
    tensor = sg.tensors[t]
    q = tensor.quantization
    if tensor.dtype.kind == "f" and q is None:
        return None
    if q is None or q.per_channel or tensor.dtype.kind not in "iu":
        return ("unsupported", t)  # unlike any other tensor's
    return (tensor.dtype.str, float(q.scale[0]), int(q.zero_point[0]))


def plan_concat_views(
    sg: Subgraph,
    nodes: list[int],
    leaving: set[int],
    absorbed: set[int],
    gemm_muls: set[int] = frozenset(),
) -> ConcatPlan:
    """The views of one partition's channel concatenations. `leaving`: tensors read after
    the partition; `absorbed`: nodes fused into another node's kernel (they read their
    inputs as epilogue operands, never through strides), but for `gemm_muls`: MULs
    whose GEMM reads their input itself, through a row stride (gemm.cl.in's `lda`)."""
    inside = set(nodes)
    producer = {t: n for n in nodes for t in sg.operators[n].outputs}
    readers: dict[int, list[int]] = {}
    for op in sg.operators:
        for t in op.inputs:
            if t >= 0:
                readers.setdefault(t, []).append(op.index)
    outside = leaving | set(sg.outputs)
    concats = [n for n in nodes if _channel_concat(sg.operators[n], sg) and n not in absorbed]
    concat_set = set(concats)

    def only_reader(t: int, n: int) -> bool:
        return readers.get(t, []) == [n] and sg.operators[n].inputs.count(t) == 1

    # the later concatenation each output lives in, where it may
    parent: dict[int, int] = {}
    for n in concats:
        first = sg.operators[n].inputs[0]
        source = producer.get(first)
        if source not in concat_set or first in outside:
            continue
        others = [r for r in readers.get(first, []) if r != n]
        shape = tuple(sg.tensors[first].shape)
        strided = all(
            r in gemm_muls
            or (
                r in inside
                and r not in absorbed
                and sg.operators[r].op in STRIDED_READERS
                # read whole, not broadcast: the view's strides are the reader's strides
                and tuple(sg.tensors[sg.operators[r].outputs[0]].shape) == shape
            )
            for r in others
        )
        if strided and sg.operators[n].inputs.count(first) == 1:
            parent[source] = n

    views: dict[int, View] = {}

    def view_of(n: int) -> View:
        """Where concatenation n's output lives (its own buffer unless it has a parent)."""
        out = sg.operators[n].outputs[0]
        if out not in views:
            if n in parent:
                views[out] = view_of(parent[n])  # the first input: offset 0 in the parent
            else:
                views[out] = View(out, 0, sg.tensors[out].shape[-1])
        return views[out]

    prefix = {}
    slots = {}
    for n in concats:
        op = sg.operators[n]
        own = view_of(n)
        if n in parent:
            prefix[op.outputs[0]] = own
        offset = own.offset
        for t in op.inputs:
            made_by = producer.get(t)
            if (
                made_by is not None
                and made_by not in concat_set
                and len(sg.operators[made_by].outputs) == 1  # its kernel writes t last
                and t not in outside
                and only_reader(t, n)
            ):
                slots[t] = View(own.root, offset, own.stride)
            offset += sg.tensors[t].shape[-1]
    return ConcatPlan(prefix, slots, concat_set)
