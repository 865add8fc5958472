"""A `.tflite` file of some nodes of a model's main subgraph: what a runtime needs to run
those nodes alone (the CPU runs between GPU partitions, on the official CPU runtime).

Its inputs are the runtime tensors the nodes read from outside, its outputs those read
after them (or the model's outputs); constants come along with their data, and every
other subgraph (the bodies of IF, WHILE, CALL_ONCE) is copied whole, so subgraph indices
in the options stay true.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .builder import CUSTOM_PREFIX, ModelBuilder, Quant, SubgraphBuilder
from .graph import Model, Subgraph, Tensor


def boundary(
    sg: Subgraph, nodes: Sequence[int], variables: bool = True
) -> tuple[list[int], list[int]]:
    """Runtime tensors `nodes` read from outside (variable tensors among them unless not
    `variables`: a model of its own keeps its variables), and those they produce that are
    read after them or are outputs of the subgraph, in first-use order."""
    inside = set(nodes)
    produced = {t for n in nodes for t in sg.operators[n].outputs}
    ins: list[int] = []
    for n in nodes:
        for t in sg.operators[n].inputs:
            tensor = sg.tensors[t] if t >= 0 else None
            if (
                tensor is not None
                and t not in produced
                and not tensor.is_constant
                and (variables or not tensor.is_variable)
                and t not in ins
            ):
                ins.append(t)
    used_after = {t for op in sg.operators if op.index not in inside for t in op.inputs}
    outs = [t for t in sorted(produced) if t in used_after or t in sg.outputs]
    return ins, outs


def submodel_bytes(model: Model, nodes: Sequence[int]) -> tuple[bytes, list[int], list[int]]:
    """(the file, its input tensors, its output tensors): `nodes` of the main subgraph as a
    model of their own; inputs and outputs are tensor indices of the main subgraph."""
    b = ModelBuilder("devicefarm: nodes of a partitioned model")
    main = model.main
    ins, outs = boundary(main, nodes, variables=False)
    _copy_nodes(b.main, main, list(nodes), ins, outs)
    for sg in model.subgraphs[1:]:
        _copy_nodes(b.subgraph(sg.name), sg, range(len(sg.operators)), sg.inputs, sg.outputs)
    return b.build(), ins, outs


def _copy_nodes(
    g: SubgraphBuilder,
    sg: Subgraph,
    nodes: Sequence[int],
    inputs: Sequence[int],
    outputs: Sequence[int],
) -> None:
    ids: dict[int, int] = {}

    def tensor(t: int) -> int:
        if t < 0:
            return -1
        if t not in ids:
            ids[t] = _add_tensor(g, sg.tensors[t], t in inputs)
        return ids[t]

    for t in inputs:
        tensor(t)
    for n in nodes:
        op = sg.operators[n]
        ins = [tensor(t) for t in op.inputs]
        outs = [tensor(t) for t in op.outputs]
        options = dict(op.options)
        custom = options.pop("custom_options", b"")
        if op.op.startswith(CUSTOM_PREFIX):
            g.custom_op(op.op[len(CUSTOM_PREFIX) :], ins, outs, custom, op.version)
        else:
            inter = [tensor(t) for t in op.intermediates]
            g.op(op.op, ins, outs, op.version, intermediates=inter, **options)
    g.output(*(tensor(t) for t in outputs))


def _add_tensor(g: SubgraphBuilder, t: Tensor, is_input: bool) -> int:
    quant = None
    if t.quantization is not None:
        q = t.quantization
        per_channel = q.scale.size > 1
        quant = Quant(
            q.scale if per_channel else float(q.scale[0]),
            q.zero_point if per_channel else int(q.zero_point[0]),
            q.axis,
        )
    if is_input:
        return g.input(t.name, t.shape, t.dtype, quant=quant, shape_signature=t.shape_signature)
    if t.data is not None and not t.is_variable:  # sparse constants are read dense: so written
        return g.const(t.name, np.asarray(t.data), quant=quant, dtype=t.dtype)
    return g.tensor(
        t.name,
        t.shape,
        t.dtype,
        quant=quant,
        shape_signature=t.shape_signature,
        is_variable=t.is_variable,
    )
