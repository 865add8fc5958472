"""Example models built with the builder: a small MobileNet-style classifier, and a
one-op model for farm tests, benches and demo data.

Used by the README's main job (`devicefarm example`), so a fresh machine needs no model
download. Weights are random (seeded); the graph is what the converter emits for Keras.
"""

from __future__ import annotations

import numpy as np

from .builder import ModelBuilder

#: (output channels, stride) of each depthwise-separable block.
BLOCKS = ((32, 1), (64, 2), (64, 1), (128, 2), (128, 1))


def tiny_mobilenet(size: int = 96, classes: int = 100, seed: int = 0) -> bytes:
    """A MobileNet v1-style float32 model: conv, depthwise-separable blocks, mean, FC, softmax."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder("devicefarm example: tiny MobileNet")
    g = b.main
    x = g.input("input", (1, size, size, 3))

    def weights(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    h, c = size // 2, 16
    y = g.tensor("conv0", (1, h, h, c))
    g.op(
        "CONV_2D",
        [x, g.const("conv0/w", weights(c, 3, 3, 3)), g.const("conv0/b", np.zeros(c, np.float32))],
        [y],
        padding="SAME",
        stride_w=2,
        stride_h=2,
        fused_activation_function="RELU6",
    )
    for i, (out_c, stride) in enumerate(BLOCKS):
        h = -(-h // stride)
        dw = g.tensor(f"block{i}/dw", (1, h, h, c))
        g.op(
            "DEPTHWISE_CONV_2D",
            [
                y,
                g.const(f"block{i}/dw/w", weights(1, 3, 3, c) * 3),
                g.const(f"block{i}/dw/b", np.zeros(c, np.float32)),
            ],
            [dw],
            padding="SAME",
            stride_w=stride,
            stride_h=stride,
            depth_multiplier=1,
            fused_activation_function="RELU6",
        )
        pw = g.tensor(f"block{i}/pw", (1, h, h, out_c))
        g.op(
            "CONV_2D",
            [
                dw,
                g.const(f"block{i}/pw/w", weights(out_c, 1, 1, c)),
                g.const(f"block{i}/pw/b", np.zeros(out_c, np.float32)),
            ],
            [pw],
            padding="SAME",
            stride_w=1,
            stride_h=1,
            fused_activation_function="RELU6",
        )
        y, c = pw, out_c
    pooled = g.tensor("pool", (1, c))
    g.op("MEAN", [y, g.const("pool/axes", np.array([1, 2], np.int32))], [pooled], keep_dims=False)
    logits = g.tensor("logits", (1, classes))
    g.op(
        "FULLY_CONNECTED",
        [
            pooled,
            g.const("fc/w", weights(classes, c)),
            g.const("fc/b", np.zeros(classes, np.float32)),
        ],
        [logits],
    )
    probs = g.tensor("probs", (1, classes))
    g.op("SOFTMAX", [logits], [probs], beta=1.0)
    g.output(probs)
    b.signature("serving_default", g, {"input": x}, {"probs": probs})
    return b.build()


def scaled_model(scale: float = 1.0) -> bytes:
    """A tiny valid model, y = x * scale on (1, 4) floats; `scale` makes its bytes (and so
    its sha256, the farm's model key) differ."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4), np.float32)
    w = g.const("w", np.full((1, 4), scale, np.float32))
    y = g.tensor("y", (1, 4), np.float32)
    g.op("MUL", [x, w], [y])
    g.output(y)
    return b.build()
