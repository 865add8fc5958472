"""pad_into_reader: a PAD of the height and width run by the kernel reading it, which
reads the zero rows and columns itself (opencl/fusions/pad_into_reader.py)."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.gpu.opencl.fusions import pad_into_reader
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import F, X, _graph, pad_into
from tests.ops.test_gpu_ops import opencl_device, randn

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

PAD, CONV = 0, 1  #: the nodes of pad_into(...) and channel_pad_into_conv


def channel_pad_into_conv():
    """PAD of H, W and channels (8 -> 10) -> 3x3 VALID conv: the model and its inputs."""
    b, g, (x,), ins = _graph(X)
    padded = g.tensor("p", (1, X[1] + 2, X[2] + 2, 10), F)
    amounts = np.array([[0, 0], [1, 1], [1, 1], [0, 2]], np.int32)
    g.op("PAD", [x, g.const("pads", amounts)], [padded])
    y = g.tensor("y", X, F)
    w = g.const("w", randn("cpw", 8, 3, 3, 10, scale=0.2))
    g.op(
        "CONV_2D",
        [padded, w, g.const("b", randn("cpb", 8))],
        [y],
        padding="VALID",
        stride_h=1,
        stride_w=1,
    )
    g.output(y)
    return b.build(), ins


def test_the_strided_conv_reads_the_padding_itself():
    model = pad_into("CONV_2D", 2)().model
    chains = plan(model)
    assert kernels(chains) == {CONV: (PAD,)}
    assert chains[CONV].input_pad == (0, 1, 2)  # the model's input, top, left
    assert kernels(plan(model, pad_into_reader.NAME)) == {}


def test_a_pad_of_the_channels_stays_a_launch():
    model, _ = channel_pad_into_conv()
    assert kernels(plan(model)) == {}


@pytest.mark.gpu
def test_the_conv_reads_the_padding(opencl_device, monkeypatch):
    built = pad_into("DEPTHWISE_CONV_2D", 1)()
    fused, plain = fused_equals_unfused(
        monkeypatch, built.model, built.inputs, pad_into_reader.NAME
    )
    assert len(fused) == len(plain) - 1, (fused, plain)
