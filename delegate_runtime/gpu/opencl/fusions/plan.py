"""The fusion pass: which nodes each kernel of a partition runs (`plan_fusion`), the
fusions applied in the order of FUSIONS.

1. Nodes absorbed *before* a kernel, computed as it loads its input (each finds its
   matches over the whole partition first; a node's input has one producer, so at most
   one of them matches a node): gate_into_conv, affine_into_conv, pad_into_reader,
   depthwise_into_gemm.
2. A chain for every node whose record takes an epilogue and that no kernel took, growing
   over the elementwise nodes *after* it, in the partition's order: epilogue (with swish).
3. Kernels that run other chains whole: squeeze_excite_convs (with
   depthwise_into_squeeze_excite, as each pair forms), then mean_into_gemm for the MEANs
   left, then relu_into_readers, which needs every reader's chain final.

The plan follows the session's switches: the fusions they turn off (`turned_off`: those
named in `fusions_off`, or all of them where the fuse pass is off) are not applied, and
each rule reads its limits from them (the Scope carries them).
"""

from __future__ import annotations

from ....graph import Subgraph
from ...switches import DEFAULTS, Switches
from ..chain import Chain
from ..records import record_for
from ..records.steps import qdq_step
from . import (
    affine_into_conv,
    depthwise_into_gemm,
    depthwise_into_squeeze_excite,
    epilogue,
    gate_into_conv,
    mean_into_gemm,
    pad_into_reader,
    relu_into_readers,
    squeeze_excite_convs,
    swish,
)
from .scope import Scope

#: Every fusion's module, in the order plan_fusion applies them.
FUSION_MODULES = (
    gate_into_conv,
    affine_into_conv,
    pad_into_reader,
    depthwise_into_gemm,
    epilogue,
    swish,
    squeeze_excite_convs,
    depthwise_into_squeeze_excite,
    mean_into_gemm,
    relu_into_readers,
)
#: Every fusion, by name, in that order.
FUSIONS: tuple[str, ...] = tuple(m.NAME for m in FUSION_MODULES)


def turned_off(switches: Switches) -> frozenset[str]:
    """The fusions a session with `switches` does not apply: every one where the fuse
    pass is off (gpu/passes.py), else those named in `fusions_off`."""
    return frozenset(FUSIONS) if not switches.fuse else switches.fusions_off


def plan_fusion(
    sg: Subgraph, nodes: list[int], leaving: set[int], switches: Switches = DEFAULTS
) -> dict[int, Chain]:
    """A chain for every node of the partition whose kernel takes an epilogue; `leaving`:
    the tensors read outside the partition (never absorbed); `switches`: the session's,
    which say the fusions not to apply (turned_off) and each rule's limits."""
    disabled = turned_off(switches)
    unknown = set(disabled) - set(FUSIONS)
    if unknown:
        raise ValueError(f"no such fusion: {sorted(unknown)}; the fusions: {FUSIONS}")
    scope = Scope(sg, nodes, leaving, switches, disabled)
    on = scope.on
    gates = gate_into_conv.find(scope) if on(gate_into_conv.NAME) else {}
    affines = affine_into_conv.find(scope) if on(affine_into_conv.NAME) else {}
    pads = pad_into_reader.find(scope) if on(pad_into_reader.NAME) else {}
    depthwise = depthwise_into_gemm.find(scope) if on(depthwise_into_gemm.NAME) else {}
    taken: set[int] = {mul for mul, _ in gates.values()} | {pad for pad, _ in pads.values()}
    taken |= {n for mul, add, _ in affines.values() for n in (mul, add)}
    taken |= set(depthwise.values())
    chains: dict[int, Chain] = {}
    for n in nodes:
        op = sg.operators[n]
        record = record_for(op.op)
        if n in taken or record is None or not record.epilogue or len(op.outputs) != 1:
            continue
        t = op.outputs[0]
        chain = Chain(n, steps=qdq_step(sg, t), output=t)
        if n in gates:
            mul, chain.input_scale = gates[n]
            chain.before = [mul]
        elif n in affines:
            mul, add, chain.input_affine = affines[n]
            chain.before = [mul, add]
        elif n in pads:
            pad, chain.input_pad = pads[n]
            chain.before = [pad]
        elif n in depthwise:
            d = depthwise[n]
            chain.before, chain.input_depthwise = [d], d
            if d in pads:
                pad, chain.input_pad = pads[d]
                chain.before.append(pad)
        for b in chain.before:
            scope.units.merge(n, b)
        if on(epilogue.NAME):
            epilogue.grow(scope, chain, scope.inside - taken)
        taken.update(chain.absorbed)
        chains[n] = chain
    if on(squeeze_excite_convs.NAME):
        squeeze_excite_convs.fuse(scope, chains)
    if on(mean_into_gemm.NAME):
        mean_into_gemm.fuse(scope, chains)
    if on(relu_into_readers.NAME):
        relu_into_readers.fuse(scope, chains)
    return chains
