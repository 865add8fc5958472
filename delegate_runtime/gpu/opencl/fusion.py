"""Which elementwise nodes run inside the kernel producing their input (its epilogue).

TFLite's GPU delegate merges "linkable" ops into the operation before them; here a node
whose record takes an epilogue (convolutions, GEMMs, pooling, binary ops) absorbs the
chain of elementwise nodes after it: activations (with x * sigmoid(x) as one step, in a
quantized model with the sigmoid snapped to its int8 grid inside the step), ADD,
SUB, MUL and PRELU with a scalar, per-channel or same-shape operand, QUANTIZE and
DEQUANTIZE, and the quantize-and-dequantize step after every quantized tensor. The chain
stops at a tensor that anything else reads, that leaves the partition, or whose operand is
computed from this kernel's own output (an operand made later in the model's order is
computed first: opencl/schedule.py). A squeeze-excite gate (MUL of a feature map by a
per-channel vector) is absorbed by the 1x1 convolution reading its result, which scales
its input's channels as it loads them (and, in an int8 model, snaps the product to the
MUL output's grid). A MUL and an ADD of per-channel constants with a clamping activation
(a BatchNormalization and its ReLU before a convolution: DenseNet, ResNetV2) are absorbed
by the 1x1 convolution reading their result, which computes them on each value it loads.
A depthwise convolution read only by a 1x1 convolution is absorbed
by it too: the GEMM computes each depthwise output as it loads it, so the depthwise
output is never stored (its activation and quantize-and-dequantize step included). A
squeeze-excite's kernel computes the depthwise convolution making its input, storing it for
the gate's MUL (`_depthwise_first`). A RELU (or RELU6) that no kernel absorbed, read
only by 1x1 convolutions, by depthwise convolutions that such a convolution computes as
it loads and by depthwise convolutions on the general kernel, is elided: each reader
clamps the values it loads from the RELU's input (`_input_clamps`; NASNet's cells apply
a RELU to each input of every separable convolution, whose input other branches read
unclamped).
"""

from __future__ import annotations

import numpy as np

from ...graph import Operator, Subgraph
from .chain import Chain
from .codes import Step
from .lowering_api import StepSpec
from .records import record_for
from .records.conv import is_gemm
from .records.depthwise import clamps_its_input, fuses_into_reader
from .records.pool import averages_whole_map
from .records.steps import qdq_step
from .schedule import Units, tensor_maps
from .squeeze_excite import DW_MAX_CHANNELS, MAX_CHANNELS, MAX_WEIGHTS

#: Steps one kernel's epilogue applies (the EPILOGUE_PARAMS of common.cl).
MAX_STEPS = 3
#: The most output channels of a 1x1 convolution that absorbs a stride-1 depthwise one.
#: Its GEMM computes the depthwise output again for every tile of output channels. On an
#: H100 (`bench/diag_gpu.py --only timeline`, MobileNet v1) the fused kernel beat the two
#: launches it replaces at 64-128 channels (25-30 us against 24-33) and after every
#: stride-2 depthwise (18-23 us against 22-26, 128-1024 channels), and lost at 256-1024
#: channels after a stride-1 one (36-38 us against 31-34).
DEPTHWISE_MAX_READER_CHANNELS = 128
#: Off a small map, the most depthwise multiply-adds a GEMM absorbing the depthwise
#: convolution may do: its window times its outputs, times the 32-wide tiles of output
#: channels that each compute them again. Inside a persistent kernel a layer boundary
#: costs about 1.2 us, not a launch's 3-4 us, and on an H200 (bench/ab_knobs.py,
#: 2026-11-28, g) MobileNet v1 (7.2-14.5 million a GEMM) and palm_detection_lite (3.7-7.4)
#: ran faster with their depthwise convolutions apart, face_detection_short_range (at
#: most 0.9), hand_landmark_lite (3.8) and MobileNetV2 (4.1) slower.
DEPTHWISE_MAX_GEMM_MACS = 5_000_000
#: On a map of at most this many pixels, a stride-1 depthwise convolution is absorbed by
#: a 1x1 convolution of up to DEPTHWISE_SMALL_MAP_CHANNELS output channels: recomputing a
#: 7x7 map's depthwise outputs per tile of channels costs less than a launch (NASNet's
#: last cells: 7x7x176).
DEPTHWISE_SMALL_MAP_PIXELS = 64
DEPTHWISE_SMALL_MAP_CHANNELS = 256
#: Off a small map, a depthwise convolution is absorbed only where its channels are a
#: multiple of four (the GEMM's four-wide loads and depthwise sums). On an H100 NASNet's
#: first cells (11 and 22 channels, 5x5 and 7x7 windows on 56x56 to 112x112 maps) took
#: 21-60 us per fused kernel; as two kernels, NASNetMobile ran 1.06x (fp32) and 1.09x
#: (fp16) faster (`bench/ab_trees.py`, 2026-11-28). Refusing windows over 3x3 as well
#: measured 1.08x in fp32 but 0.86x in fp16.
DEPTHWISE_ALIGNED = 4


#: The most output channels of a GEMM that computes its input as a MEAN: it recomputes the
#: means for each tile of output channels. On an H200 (profiled timelines, 2026-11-25) the
#: MEAN inside a classifier head of 1000 channels cost about 29 us more than its own launch.
MEAN_MAX_READER_CHANNELS = 256


def plan_fusion(sg: Subgraph, nodes: list[int], leaving: set[int]) -> dict[int, Chain]:
    """A chain for every node of the partition whose kernel takes an epilogue; `leaving`:
    the tensors read outside the partition (never absorbed)."""
    produced_by, readers = tensor_maps(sg)
    units = Units(sg, nodes, readers)
    inside = set(nodes)
    gates = _gates(sg, nodes, readers, produced_by, leaving)
    affines = _affines(sg, nodes, readers, produced_by, leaving, set(gates))
    pads = _pads(sg, nodes, readers, produced_by, leaving)
    depthwise = _depthwise_inputs(sg, nodes, readers, produced_by, leaving, set(gates))
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
            mul, scale = gates[n]
            chain.before, chain.input_scale = [mul], scale
        elif n in affines:
            mul, add, chain.input_affine = affines[n]
            chain.before = [mul, add]
        elif n in pads:
            pad, padded = pads[n]
            chain.before, chain.input_pad = [pad], padded
        elif n in depthwise:
            d = depthwise[n]
            chain.before, chain.input_depthwise = [d], d
            if d in pads:
                pad, chain.input_pad = pads[d]
                chain.before.append(pad)
        for b in chain.before:
            units.merge(n, b)
        while True:
            nxt = _absorb_next(sg, chain, readers, inside - taken, leaving)
            if nxt is None:
                break
            absorbed, steps, out = nxt
            if len(chain.steps) + len(steps) > MAX_STEPS:
                break
            if not _operands_ready(units, n, steps, produced_by):
                break  # its operand waits on this kernel's own output
            for a in absorbed:
                units.merge(n, a)
            chain.absorbed += absorbed
            chain.steps += steps
            chain.output = out
        taken.update(chain.absorbed)
        chains[n] = chain
    _squeeze_excite(sg, chains, readers, produced_by, leaving, units)
    _means_into_readers(sg, chains, readers, leaving, units)
    _input_clamps(sg, nodes, chains, readers, leaving)
    return chains


#: Activation nodes a reader can apply to its input as it loads it, as (low, high) clamps
#: (RELU_N1_TO_1 is no GPU op: TFLite's delegate refuses it as a node).
_CLAMPS = {"RELU": (0.0, np.inf), "RELU6": (0.0, 6.0)}


def _input_clamps(
    sg: Subgraph,
    nodes: list[int],
    chains: dict[int, Chain],
    readers: dict[int, list[int]],
    leaving: set[int],
) -> None:
    """Elide each float RELU that no kernel absorbed and whose readers all clamp what
    they load: 1x1 convolutions (GEMMs) reading it as their input with nothing absorbed
    before them, depthwise convolutions that such a GEMM computes as it loads
    (`input_depthwise`), and depthwise convolutions on the general kernel. The readers'
    chains read the RELU's input instead; the RELU launches nothing, and the first
    reader's kernel is named after it."""
    inside = set(nodes)
    computing = {c.input_depthwise: c for c in chains.values() if c.input_depthwise is not None}
    absorbed = {m for c in chains.values() for m in c.nodes}
    for r in nodes:
        op = sg.operators[r]
        if op.op not in _CLAMPS or r in absorbed or r in chains:
            continue
        x, y = op.inputs[0], op.outputs[0]
        if y in leaving or y in sg.outputs or not _plain_float(sg, (x, y)):
            continue
        users = readers.get(y, [])
        takers = [_clamping_reader(sg, u, y, chains, computing) for u in users]
        if not users or not set(users) <= inside or any(t is None for t in takers):
            continue
        for taker in takers:
            taker.clamped[y] = (x, *_CLAMPS[op.op])
        takers[0].clamps.append(r)


def _clamping_reader(
    sg: Subgraph, u: int, y: int, chains: dict[int, Chain], computing: dict[int, Chain]
) -> Chain | None:
    """The chain whose kernel loads node u's input y and can clamp it as it does, or None."""
    op = sg.operators[u]
    if op.inputs.count(y) != 1 or op.inputs[0] != y:
        return None
    if op.op == "DEPTHWISE_CONV_2D":
        reader = computing.get(u)  # the GEMM computing this depthwise output
        if reader is not None:
            return reader if reader.before == [u] else None
        chain = chains.get(u)  # its own kernel, where that is the general one
        if chain is None or chain.before or not clamps_its_input(op, sg):
            return None
        return chain
    chain = chains.get(u)
    if chain is None or op.op != "CONV_2D" or not is_gemm(op, sg):
        return None
    if chain.before or chain.then or chain.first or chain.input_mean is not None:
        return None
    return chain


def _operands_ready(
    units: Units, head: int, steps: list[StepSpec], produced_by: dict[int, int]
) -> bool:
    """Whether `head`'s kernel can read every operand of `steps` (Units.can_read)."""
    return all(
        units.can_read(head, produced_by.get(s.operand)) for s in steps if s.operand is not None
    )


def _squeeze_excite(
    sg: Subgraph,
    chains: dict[int, Chain],
    readers: dict[int, list[int]],
    produced_by: dict[int, int],
    leaving: set[int],
    units: Units,
) -> None:
    """MEAN over the pixels of a batch-1 map (or an AVERAGE_POOL_2D over the whole map),
    read only by a 1x1 convolution whose result only a second 1x1 convolution reads: the
    MEAN's kernel runs both (its `then`), where their weights are few enough."""
    for m in list(chains):
        op = sg.operators[m]
        x = sg.tensors[op.inputs[0]].shape
        if op.op != "MEAN" and not averages_whole_map(op, sg):
            continue
        if len(x) != 4 or x[0] != 1 or x[-1] > MAX_CHANNELS:
            continue
        if sg.tensors[op.outputs[0]].size != x[-1]:
            continue  # not a mean over every pixel
        first = _only_reader_on_one_pixel(sg, chains[m].output, chains, readers, leaving)
        if first is None:
            continue
        second = _only_reader_on_one_pixel(sg, chains[first].output, chains, readers, leaving)
        if second is None:
            continue
        r = sg.tensors[chains[first].output].size
        n = sg.tensors[chains[second].output].size
        if max(r, n) > MAX_CHANNELS or x[-1] * r + r * n > MAX_WEIGHTS:
            continue  # too much for the one work group that runs both
        pair = [chains[first], chains[second]]
        if not _operands_ready(units, m, [*pair[0].steps, *pair[1].steps], produced_by):
            continue
        for c in pair:
            units.merge(m, c.producer)  # with what its chain absorbed
            del chains[c.producer]
        chains[m].then = pair
        _depthwise_first(sg, chains, m, units, produced_by)


def _depthwise_first(
    sg: Subgraph, chains: dict[int, Chain], m: int, units: Units, produced_by: dict[int, int]
) -> None:
    """The squeeze-excite kernel of MEAN `m` computes its input as well, where a depthwise
    convolution's chain (multiplier 1, a window wider than a pixel, at most
    DW_MAX_CHANNELS channels, nothing absorbed before it but a PAD) makes it: one launch
    instead of two. Its output is still stored for its other reader (the gate's MUL),
    which must not be one the MEAN waits on."""
    x = sg.operators[m].inputs[0]
    d = units.unit.get(produced_by.get(x, -1))  # the head of the kernel writing x
    chain = chains.get(d) if d is not None and d != units.unit[m] else None
    if chain is None or chain.output != x:
        return
    dw = sg.operators[d]
    if dw.op != "DEPTHWISE_CONV_2D" or not fuses_into_reader(dw, sg):
        return
    if sg.tensors[x].shape[-1] > DW_MAX_CHANNELS:
        return
    if chain.then or chain.first or chain.input_scale or chain.input_affine:
        return
    if chain.input_depthwise is not None:
        return
    if chain.input_mean is not None:
        return
    head = units.unit[m]
    for u in units.successors(units.unit[d]):
        if u != head and units.reaches(u, head):
            return
    units.merge(m, d)  # with its PAD and what its chain absorbed
    chains[m].first = chains.pop(d)


def _means_into_readers(
    sg: Subgraph,
    chains: dict[int, Chain],
    readers: dict[int, list[int]],
    leaving: set[int],
    units: Units,
) -> None:
    """A MEAN over the pixels of a map that a squeeze-excite kernel did not take, read only
    by a kernel that can compute its input as a mean (a GEMM of at most
    MEAN_MAX_READER_CHANNELS outputs): that kernel runs it, each mean computed as A is
    loaded, and the MEAN's launch goes."""
    for m in list(chains):
        op, chain = sg.operators[m], chains[m]
        if op.op != "MEAN" or chain.then or chain.absorbed or chain.steps or chain.before:
            continue
        x = sg.tensors[op.inputs[0]].shape
        if len(x) != 4 or sg.tensors[chain.output].size != x[0] * x[3]:
            continue  # not a mean over every pixel of each image
        users = readers.get(chain.output, [])
        if len(users) != 1 or chain.output in leaving or chain.output in sg.outputs:
            continue
        n = users[0]
        reader = chains.get(n)
        if reader is None or reader.before or sg.operators[n].inputs[0] != chain.output:
            continue
        if not _kernel_can(sg, n, "input_mean"):
            continue
        if sg.tensors[sg.operators[n].outputs[0]].shape[-1] > MEAN_MAX_READER_CHANNELS:
            continue
        reader.before, reader.input_mean = [m], m
        units.merge(n, m)
        del chains[m]


def _only_reader_on_one_pixel(
    sg: Subgraph,
    t: int,
    chains: dict[int, Chain],
    readers: dict[int, list[int]],
    leaving: set[int],
) -> int | None:
    """The 1x1 convolution of a one-pixel map that alone reads `t`, with a chain of its
    own and nothing absorbed before it; else None."""
    users = readers.get(t, [])
    if len(users) != 1 or t in leaving or t in sg.outputs:
        return None
    n = users[0]
    op = sg.operators[n]
    chain = chains.get(n)
    if chain is None or chain.before or op.op != "CONV_2D" or op.inputs[0] != t:
        return None
    x = sg.tensors[t].shape
    if len(x) != 4 or x[:3] != (1, 1, 1) or not is_gemm(op, sg):
        return None
    return n


def _gates(
    sg: Subgraph,
    nodes: list[int],
    readers: dict[int, list[int]],
    produced_by: dict[int, int],
    leaving: set[int],
) -> dict[int, tuple[int, tuple[int, int, tuple[float, float, float, float] | None]]]:
    """Node -> (the gate MUL before it, (feature map, gate, the product's QDQ params or
    None)) for nodes whose kernel can scale their input: MUL(x, gate) of batch 1, gate one
    value per channel, read only by that node, with no activation of its own."""
    inside = set(nodes)
    found: dict[int, tuple[int, tuple[int, int, tuple[float, float, float, float] | None]]] = {}
    for n in nodes:
        if not _kernel_can(sg, n, "input_scale"):
            continue
        m = _sole_input_producer(sg, n, "MUL", readers, produced_by, inside, leaving)
        if m is None or m.options.get("fused_activation_function", 0) or len(set(m.inputs)) != 2:
            continue
        mul, y = m.index, m.outputs[0]
        shape = sg.tensors[y].shape
        for x, gate in (m.inputs, m.inputs[::-1]):
            g = sg.tensors[gate]
            if (
                sg.tensors[x].shape == shape
                and len(shape) == 4
                and shape[0] == 1
                and g.size == shape[-1]
                and g.shape[-1] == shape[-1]
                and tuple(g.shape) != tuple(shape)  # broadcast over pixels
            ):
                snap = qdq_step(sg, y)
                found[n] = (mul, (x, gate, snap[0].params if snap else None))
                break
    return found


#: TFLite fused activation -> the clamp an affine input applies (NONE, RELU, RELU_N1_TO_1,
#: RELU6)
_AFFINE_CLAMPS = {0: (-np.inf, np.inf), 1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def _affines(
    sg: Subgraph,
    nodes: list[int],
    readers: dict[int, list[int]],
    produced_by: dict[int, int],
    leaving: set[int],
    gated: set[int],
) -> dict[int, tuple[int, int, tuple[int, int, int, float, float]]]:
    """Node -> (MUL, ADD, (x, scale, shift, low, high)) for nodes whose kernel can scale
    their input and read it as clamp(x * scale + shift): MUL(x, per-channel constant)
    read only by ADD(per-channel constant), with a clamping activation or none, read only
    by the node; float tensors only (a quantized model snaps between them)."""
    inside = set(nodes)
    found = {}
    for n in nodes:
        if n in gated or not _kernel_can(sg, n, "input_scale"):
            continue
        add = _sole_input_producer(sg, n, "ADD", readers, produced_by, inside, leaving)
        act = add.options.get("fused_activation_function", 0) if add is not None else None
        if act not in _AFFINE_CLAMPS:
            continue
        shift = _channel_constant(sg, add)
        mul = produced_by.get(_other_input(add, shift)) if shift is not None else None
        if mul is None or mul not in inside or sg.operators[mul].op != "MUL":
            continue
        m = sg.operators[mul]
        scale = _channel_constant(sg, m)
        y = m.outputs[0]
        if scale is None or m.options.get("fused_activation_function", 0):
            continue
        if readers.get(y) != [add.index] or y in leaving or y in sg.outputs:
            continue
        x = _other_input(m, scale)
        if len(sg.tensors[x].shape) != 4 or not _plain_float(sg, (x, y, add.outputs[0])):
            continue
        found[n] = (mul, add.index, (x, scale, shift, *_AFFINE_CLAMPS[act]))
    return found


def _plain_float(sg: Subgraph, tensors: tuple[int, ...]) -> bool:
    """Whether every tensor is float and unquantized (a quantized model's float view
    snaps between ops, which a clamp or affine read would skip)."""
    return all(
        sg.tensors[t].quantization is None and sg.tensors[t].dtype.kind == "f" for t in tensors
    )


def _channel_constant(sg: Subgraph, op: Operator) -> int | None:
    """The constant input of a two-input op holding one value per channel of the other,
    whose shape it keeps; else None."""
    if len(op.inputs) != 2 or len(set(op.inputs)) != 2:
        return None
    for x, c in (op.inputs, op.inputs[::-1]):
        tx, tc = sg.tensors[x], sg.tensors[c]
        if (
            tc.is_constant
            and not tx.is_constant
            and tc.size == tx.shape[-1]
            and tc.shape[-1] == tx.shape[-1]
            and tuple(sg.tensors[op.outputs[0]].shape) == tuple(tx.shape)
        ):
            return c
    return None


def _other_input(op: Operator, t: int) -> int:
    return op.inputs[1] if op.inputs[0] == t else op.inputs[0]


def _depthwise_inputs(
    sg: Subgraph,
    nodes: list[int],
    readers: dict[int, list[int]],
    produced_by: dict[int, int],
    leaving: set[int],
    gated: set[int],
) -> dict[int, int]:
    """Node -> the depthwise convolution producing its input, for nodes whose kernel can
    compute that input as it loads it: the depthwise output read by that node alone,
    neither leaving the partition nor absorbing anything after it."""
    inside = set(nodes)
    found: dict[int, int] = {}
    for n in nodes:
        if n in gated or not _kernel_can(sg, n, "input_depthwise"):
            continue
        d = _sole_input_producer(sg, n, "DEPTHWISE_CONV_2D", readers, produced_by, inside, leaving)
        if d is None or not fuses_into_reader(d, sg):
            continue
        if not _recomputes_too_often(d, sg.operators[n], sg):
            found[n] = d.index
    return found


def _kernel_can(sg: Subgraph, n: int, what: str) -> bool:
    """Whether node n's record says yes to `what` (input_scale, input_pad,
    input_depthwise, input_mean) for this node."""
    op = sg.operators[n]
    record = record_for(op.op)
    ask = getattr(record, what, None) if record is not None else None
    return ask is not None and bool(ask(op, sg))


def _sole_input_producer(
    sg: Subgraph,
    n: int,
    kind: str,
    readers: dict[int, list[int]],
    produced_by: dict[int, int],
    inside: set[int],
    leaving: set[int],
) -> Operator | None:
    """The `kind` node of the partition producing node n's first input, where n alone
    reads its output and that output neither leaves the partition nor the model."""
    p = produced_by.get(sg.operators[n].inputs[0])
    if p is None or p not in inside or sg.operators[p].op != kind:
        return None
    y = sg.operators[p].outputs[0]
    if readers.get(y) != [n] or y in leaving or y in sg.outputs:
        return None
    return sg.operators[p]


def _recomputes_too_often(depthwise: Operator, conv: Operator, sg: Subgraph) -> bool:
    """Whether fusing `depthwise` into `conv` would cost more than it saves (see
    DEPTHWISE_MAX_READER_CHANNELS, DEPTHWISE_MAX_GEMM_MACS and DEPTHWISE_SMALL_MAP_PIXELS)."""
    o = depthwise.options
    strided = o.get("stride_h", 1) > 1 or o.get("stride_w", 1) > 1
    channels = sg.tensors[conv.outputs[0]].shape[-1]
    _, h, w, c = sg.tensors[depthwise.outputs[0]].shape
    if h * w <= DEPTHWISE_SMALL_MAP_PIXELS and channels <= DEPTHWISE_SMALL_MAP_CHANNELS:
        return False
    if c % DEPTHWISE_ALIGNED:
        return True
    _, kh, kw, _ = sg.tensors[depthwise.inputs[1]].shape  # [1, kh, kw, channels]
    if kh * kw * h * w * c * -(-channels // 32) > DEPTHWISE_MAX_GEMM_MACS:
        return True
    return not strided and channels > DEPTHWISE_MAX_READER_CHANNELS


def _pads(
    sg: Subgraph,
    nodes: list[int],
    readers: dict[int, list[int]],
    produced_by: dict[int, int],
    leaving: set[int],
) -> dict[int, tuple[int, tuple[int, int, int]]]:
    """Node -> (the PAD before it, (its input, top, left)) for nodes whose kernel can read
    zero padding itself: a PAD of H and W only, read only by that node."""
    inside = set(nodes)
    found: dict[int, tuple[int, tuple[int, int, int]]] = {}
    for n in nodes:
        if not _kernel_can(sg, n, "input_pad"):
            continue
        p = _sole_input_producer(sg, n, "PAD", readers, produced_by, inside, leaving)
        if p is None:
            continue
        pad, y = p.index, p.outputs[0]
        amounts = sg.tensors[p.inputs[1]].data if len(p.inputs) > 1 else None
        if (
            amounts is None
            or len(sg.tensors[y].shape) != 4
            or np.asarray(amounts).shape != (4, 2)
            or np.asarray(amounts)[[0, 3]].any()
            or (np.asarray(amounts) < 0).any()
            or _padded_zero_is_not_zero(sg, y)
        ):
            continue
        a = np.asarray(amounts)
        found[n] = (pad, (p.inputs[0], int(a[1, 0]), int(a[2, 0])))
    return found


def _padded_zero_is_not_zero(sg: Subgraph, t: int) -> bool:
    """A quantized PAD pads with the zero point, which is 0.0 in the float view; nothing
    else to check, but the float view needs the tensor per-tensor quantized or float."""
    q = sg.tensors[t].quantization
    return q is not None and q.per_channel


def _absorb_next(
    sg: Subgraph,
    chain: Chain,
    readers: dict[int, list[int]],
    inside: set[int],
    leaving: set[int],
) -> tuple[list[int], list[StepSpec], int] | None:
    """The next node(s) the chain can take in after its output, with their steps."""
    t = chain.output
    users = readers.get(t, [])
    if t in leaving or t in sg.outputs or not users or not set(users) <= inside:
        return None
    ops = [sg.operators[u] for u in users]
    if len(ops) == 2:
        return _swish(sg, t, ops, readers, leaving)
    if len(ops) != 1:
        return None
    op = ops[0]
    record = record_for(op.op)
    if record is None or record.as_step is None or len(op.outputs) != 1:
        return None
    out = op.outputs[0]
    if sg.tensors[out].shape != sg.tensors[t].shape:
        return None
    steps = record.as_step(op, sg, t)
    if steps is None:
        return None
    return [op.index], steps + qdq_step(sg, out), out


def _swish(
    sg: Subgraph,
    t: int,
    ops: list[Operator],
    readers: dict[int, list[int]],
    leaving: set[int],
) -> tuple[list[int], list[StepSpec], int] | None:
    """t -> LOGISTIC -> s, MUL(t, s): x * sigmoid(x) as one step; where s is quantized
    (an int8 model's float view), SWISH_QDQ snaps the sigmoid to s's grid in the step."""
    by_name = {op.op: op for op in ops}
    logistic, mul = by_name.get("LOGISTIC"), by_name.get("MUL")
    if logistic is None or mul is None:
        return None
    s = logistic.outputs[0]
    if (
        sorted(mul.inputs) != sorted((t, s))
        or readers.get(s) != [mul.index]
        or s in leaving
        or mul.options.get("fused_activation_function", 0)
        or sg.tensors[mul.outputs[0]].shape != sg.tensors[t].shape
    ):
        return None
    snap = qdq_step(sg, s)
    swish = StepSpec(Step.SWISH_QDQ, params=snap[0].params) if snap else StepSpec(Step.SWISH)
    out = mul.outputs[0]
    return [logistic.index, mul.index], [swish] + qdq_step(sg, out), out
