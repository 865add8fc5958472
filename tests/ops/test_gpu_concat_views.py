"""Channel concatenations without copies (opencl/concat_views.py) against LiteRT's
reference kernels: DenseNet's growing block, NASNet's many-branch cells, and the cases
that must keep their copies. Each case checks the outputs (two invokes: the views share
one buffer across layers) and how many copies the partition still launches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import check_against_litert
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device, randn

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]

F = np.float32


@dataclass
class Built:
    model: bytes
    inputs: list[np.ndarray]
    copies: int  #: copy4d launches the partition keeps
    tol_abs: float = 0.0  #: extra absolute tolerance (int8 outputs: grid steps)


class Net:
    """A model under construction: NHWC tensors of one spatial size."""

    def __init__(self, batch: int, h: int, w: int, c: int, seed: int):
        self.b = ModelBuilder()
        self.g = self.b.main
        self.n, self.h, self.w = batch, h, w
        self.x = self.g.input("x", (batch, h, w, c), F)
        self.inputs = [np.random.default_rng(seed).uniform(-2, 2, (batch, h, w, c)).astype(F)]
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def tensor(self, c: int, name: str):
        return self.g.tensor(name, (self.n, self.h, self.w, c), F)

    def conv(self, x, cin: int, cout: int, k: int, act: str = "NONE"):
        name = self._name("conv")
        w = self.g.const(name + "w", randn(name + "w", cout, k, k, cin, scale=1 / np.sqrt(cin * k)))
        bias = self.g.const(name + "b", randn(name + "b", cout, scale=0.1))
        y = self.tensor(cout, name)
        self.g.op(
            "CONV_2D",
            [x, w, bias],
            [y],
            padding="SAME",
            stride_h=1,
            stride_w=1,
            fused_activation_function=act,
        )
        return y

    def batch_norm_relu(self, x, c: int):
        """MUL by a per-channel scale, ADD a per-channel shift with RELU: how the converter
        writes Keras' BatchNormalization + ReLU before a convolution."""
        name = self._name("bn")
        scaled = self.tensor(c, name + "m")
        self.g.op(
            "MUL", [x, self.g.const(name + "s", 1 + randn(name + "s", c, scale=0.2))], [scaled]
        )
        y = self.tensor(c, name + "a")
        shift = self.g.const(name + "t", randn(name + "t", c, scale=0.2))
        self.g.op("ADD", [scaled, shift], [y], fused_activation_function="RELU")
        return y

    def concat(self, parts: list, channels: int, axis: int = 3):
        y = self.tensor(channels, self._name("cat"))
        self.g.op("CONCATENATION", parts, [y], axis=axis)
        return y

    def pool(self, x, c: int):
        y = self.tensor(c, self._name("pool"))
        self.g.op(
            "AVERAGE_POOL_2D",
            [x],
            [y],
            padding="SAME",
            stride_h=1,
            stride_w=1,
            filter_height=3,
            filter_width=3,
        )
        return y

    def built(self, outputs: list, copies: int) -> Built:
        for t in outputs:
            self.g.output(t)
        return Built(self.b.build(), self.inputs, copies)


def dense_block(
    batch: int = 1, hw: int = 6, c0: int = 16, growth: int = 8, mid: int = 16, layers: int = 3
) -> Callable[[], Built]:
    """DenseNet: x = concat(x, conv3x3(conv1x1(bn_relu(x)))) per layer; the block's input
    comes from a convolution, then a BN + ReLU reads the block's end. Without views: two
    copies per layer."""

    def make() -> Built:
        net = Net(batch, hw, hw, 3, seed=c0 + growth)
        x = net.conv(net.x, 3, c0, 1, "RELU")  # a 1x1: a GEMM
        c = c0
        for _ in range(layers):
            y = net.conv(net.batch_norm_relu(x, c), c, mid, 1, "RELU")
            f = net.conv(y, mid, growth, 3)  # K = 9 * mid: the patch GEMM
            x = net.concat([x, f], c + growth)
            c += growth
        # the block's input, read by the first BN too, is copied once for the whole block
        return net.built([net.batch_norm_relu(x, c)], copies=1)

    return make


def block_after_a_pool() -> Built:
    """The block's first input made by a pooling kernel (DenseNet's transition): that one
    input is copied, once for the whole block."""
    net = Net(1, 5, 5, 8, seed=3)
    x = net.pool(net.x, 8)
    c = 8
    for _ in range(2):
        f = net.conv(net.batch_norm_relu(x, c), c, 4, 1)
        x = net.concat([x, f], c + 4)
        c += 4
    return net.built([net.batch_norm_relu(x, c)], copies=1)


def split_k_into_a_slot() -> Built:
    """A 1x1 convolution of K = 512 on a 2x2 map (K split across work groups, the last
    slice storing) writing the second slot of three."""
    net = Net(1, 2, 2, 512, seed=5)
    a = net.conv(net.x, 512, 8, 1)
    b = net.conv(net.x, 512, 12, 1, "RELU6")
    c = net.conv(net.x, 512, 4, 1)
    return net.built([net.concat([a, b, c], 24)], copies=0)


def cell_with_branches() -> Built:
    """NASNet: branches of GEMMs and a pool concatenated; the pool's output is copied."""
    net = Net(1, 6, 6, 12, seed=7)
    a = net.conv(net.x, 12, 8, 1, "RELU")
    b = net.conv(net.x, 12, 24, 3)  # 24 outputs: the patch GEMM
    p = net.pool(net.x, 12)
    d = net.conv(p, 12, 4, 1)
    return net.built([net.concat([a, p, b, d], 48)], copies=1)


def cell_of_sums() -> Built:
    """NASNet's cell outputs: sums made by a pooling kernel (ADD in its epilogue), a GEMM
    (ADD of the other branch in its epilogue) and binary4d, each written in its slot."""
    net = Net(2, 5, 6, 8, seed=17)
    pooled = net.tensor(8, "pooled")
    net.g.op("ADD", [net.pool(net.x, 8), net.x], [pooled])
    a = net.conv(net.x, 8, 8, 1)
    summed = net.tensor(8, "summed")
    net.g.op("ADD", [net.conv(net.x, 8, 8, 1), a], [summed], fused_activation_function="RELU")
    squared = net.tensor(8, "squared")
    net.g.op("MUL", [net.x, net.x], [squared])
    return net.built([net.concat([pooled, summed, squared], 24)], copies=0)


def read_by_a_convolution() -> Built:
    """A concatenation's output read by a convolution as well as by the next one: the
    GEMM reads its input whole, so it stays a tensor of its own and is copied."""
    net = Net(1, 4, 4, 6, seed=9)
    a = net.conv(net.x, 6, 8, 1)
    b = net.conv(net.x, 6, 8, 1)
    x = net.concat([a, b], 16)
    f = net.conv(x, 16, 8, 3)
    return net.built([net.concat([x, f], 24)], copies=1)


def slot_read_twice() -> Built:
    """An input also read by another node: copied, never written in place."""
    net = Net(1, 4, 4, 6, seed=11)
    a = net.conv(net.x, 6, 8, 1)
    b = net.conv(net.x, 6, 8, 1)
    y = net.concat([a, b], 16)
    return net.built([y, net.batch_norm_relu(b, 8)], copies=1)


def prefix_is_a_model_output() -> Built:
    """The block so far is also a model output: it keeps a buffer of its own."""
    net = Net(1, 4, 4, 6, seed=13)
    a = net.conv(net.x, 6, 8, 1)
    b = net.conv(net.x, 6, 4, 1)
    x = net.concat([a, b], 12)
    f = net.conv(net.batch_norm_relu(x, 12), 12, 4, 1)
    return net.built([net.concat([x, f], 16), x], copies=1)


def prefix_broadcast_by_its_reader() -> Built:
    """The block so far is read by an ADD that broadcasts it over a batch of two: read
    through its own strides, so it keeps its buffer and is copied into the next one."""
    net = Net(1, 4, 4, 6, seed=19)
    z = net.g.input("z", (2, 4, 4, 16), F)
    net.inputs.append(np.random.default_rng(20).uniform(-2, 2, (2, 4, 4, 16)).astype(F))
    x = net.concat([net.conv(net.x, 6, 8, 1), net.conv(net.x, 6, 8, 1)], 16)
    y = net.g.tensor("y", (2, 4, 4, 16), F)
    net.g.op("ADD", [z, x], [y])  # the larger first: the delegate's broadcast rule
    return net.built([y, net.concat([x, net.conv(net.x, 6, 4, 1)], 20)], copies=1)


def concat_on_width() -> Built:
    """Along the width, not channels: every input copied as before."""
    net = Net(1, 4, 4, 6, seed=15)
    a = net.conv(net.x, 6, 8, 1)
    b = net.conv(net.x, 6, 8, 1)
    y = net.g.tensor("wide", (1, 4, 8, 8), F)
    net.g.op("CONCATENATION", [a, b], [y], axis=2)
    return net.built([y], copies=2)


def int8_block() -> Callable[[], Built]:
    """An int8 DenseNet step: QUANTIZE -> x; c1 = concat(x, conv1x1(x)); an int8 MUL by
    a per-channel constant (absorbed by the next conv's GEMM, reading c1 as a prefix
    through its row stride) before the conv whose features c2 appends -> DEQUANTIZE. One
    grid for every concatenated tensor (LiteRT's int8 CONCATENATION requires it): the
    slots are written in place, no quantize-and-dequantize runs after a concatenation,
    and only x, made by the QUANTIZE, is copied."""

    def make() -> Built:
        from delegate_runtime.builder import Quant
        from tests.ops.test_gpu_fusion import _int8_pointwise

        b = ModelBuilder()
        g = b.main
        shape = (1, 5, 6, 8)
        grid = Quant(0.05, 3)
        x = g.input("x", shape, F)
        q = g.tensor("q", shape, np.int8, quant=grid)
        g.op("QUANTIZE", [x], [q])
        f1 = _int8_pointwise(g, q, 0.05, 8, 4, "f1", grid)
        c1 = g.tensor("c1", (1, 5, 6, 12), np.int8, quant=grid)
        g.op("CONCATENATION", [q, f1], [c1], axis=3)
        scale = np.random.default_rng(1).integers(60, 120, 12).astype(np.int8)
        m = g.tensor("m", (1, 5, 6, 12), np.int8, quant=Quant(0.04, -2))
        g.op("MUL", [c1, g.const("s", scale, quant=Quant(0.01, 0))], [m], version=2)
        f2 = _int8_pointwise(g, m, 0.04, 12, 4, "f2", grid)
        c2 = g.tensor("c2", (1, 5, 6, 16), np.int8, quant=grid)
        g.op("CONCATENATION", [c1, f2], [c2], axis=3)
        out = g.tensor("out", (1, 5, 6, 16), F)
        g.op("DEQUANTIZE", [c2], [out], version=2)
        g.output(out)
        xs = [np.random.default_rng(2).uniform(-3, 3, shape).astype(F)]
        return Built(b.build(), xs, copies=1, tol_abs=2 * 0.05)

    return make


CASES = {
    "dense-block": dense_block(),
    "dense-block-batch2-odd-channels": dense_block(2, 5, 5, 3, 17, 4),
    "dense-block-wide-layers": dense_block(1, 4, 32, 32, 64, 2),
    "block-after-a-pool": block_after_a_pool,
    "split-k-into-a-slot": split_k_into_a_slot,
    "cell-with-branches": cell_with_branches,
    "cell-of-sums": cell_of_sums,
    "read-by-a-convolution": read_by_a_convolution,
    "slot-read-twice": slot_read_twice,
    "prefix-is-a-model-output": prefix_is_a_model_output,
    "prefix-broadcast-by-its-reader": prefix_broadcast_by_its_reader,
    "concat-on-width": concat_on_width,
    "int8-one-grid": int8_block(),
}


@pytest.mark.parametrize(
    "make,precision",
    [pytest.param(m, p, id=f"{n}-{p}") for n, m in CASES.items() for p in PRECISIONS],
)
def test_concatenation_in_place_matches_litert(opencl_device, make, precision):
    built = make()
    session = check_against_litert(built.model, built.inputs, precision, 2, built.tol_abs)
    names = session.executors[0].kernel_names
    assert names.count("copy4d") == built.copies, names


def test_a_dense_block_lives_in_its_last_output():
    """The plan for three DenseNet layers: each block-so-far a prefix of the last output,
    each layer's features a slot at its running offset, all 40 channels apart; the
    block's input (read by the first BN as well) is neither."""
    from delegate_runtime import read_model
    from delegate_runtime.gpu.opencl.concat_views import View, plan_concat_views

    sg = read_model(dense_block(layers=3)().model).main
    concats = [op for op in sg.operators if op.op == "CONCATENATION"]
    nodes = [op.index for op in sg.operators]
    plan = plan_concat_views(sg, nodes, set(), set())
    root = concats[-1].outputs[0]
    assert plan.prefix == {c.outputs[0]: View(root, 0, 40) for c in concats[:-1]}
    features = [c.inputs[1] for c in concats]
    assert plan.slots == {f: View(root, 16 + 8 * i, 40) for i, f in enumerate(features)}
    assert plan.concats == {c.index for c in concats}
    # a block-so-far read after the partition keeps its own buffer
    leaving = {concats[0].outputs[0]}
    assert concats[0].outputs[0] not in plan_concat_views(sg, nodes, leaving, set()).prefix


def test_grids_that_differ_keep_the_copies():
    """A concatenation whose inputs lie on another int8 grid than its output requantizes:
    it gets no views (LiteRT's reference kernel refuses such a model, so the plan is
    checked alone)."""
    from delegate_runtime import read_model
    from delegate_runtime.builder import Quant
    from delegate_runtime.gpu.opencl.concat_views import plan_concat_views

    b = ModelBuilder()
    g = b.main
    shape = (1, 3, 3, 4)
    a = g.input("a", shape, np.int8, quant=Quant(0.05, 3))
    c = g.input("c", shape, np.int8, quant=Quant(0.04, 3))
    y = g.tensor("y", (1, 3, 3, 8), np.int8, quant=Quant(0.05, 3))
    g.op("CONCATENATION", [a, c], [y], axis=3)
    g.output(y)
    sg = read_model(b.build()).main
    assert plan_concat_views(sg, [0], set(), set()).concats == set()
