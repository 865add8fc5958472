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
#: Standard deviation the classifier's logits are calibrated to over random inputs, so
#: its softmax is peaked (a random head leaves it uniform, and every diff near zero).
LOGIT_STD = 4.0
#: Random inputs (uniform in [-1, 1], a normalised image's range) the head is calibrated on.
CALIBRATION_INPUTS = 8


def tiny_mobilenet(size: int = 96, classes: int = 100, seed: int = 0) -> bytes:
    """A MobileNet v1-style float32 classifier: conv, depthwise-separable blocks, mean, FC,
    softmax. Weights are random (seeded, He-scaled); the FC head is then calibrated so the
    logits vary by LOGIT_STD around zero over random inputs: the top class changes with the
    input and its probability is far from 1/classes, so outputs carry signal."""
    rng = np.random.default_rng(seed)
    backbone = _backbone_weights(rng)
    fc_w = rng.standard_normal((classes, BLOCKS[-1][0])).astype(np.float32)
    features = _pooled_features(size, backbone, rng)
    centred = features - features.mean(axis=0)
    scale = LOGIT_STD / max(float(np.std(centred @ fc_w.T)), 1e-30)
    fc_w = (fc_w * scale).astype(np.float32)
    fc_b = (-fc_w @ features.mean(axis=0)).astype(np.float32)
    return _build(size, backbone, (fc_w, fc_b))


def _backbone_weights(rng: np.random.Generator) -> list[np.ndarray]:
    """Conv and block weights (He-scaled, so activations keep their size through ReLU6)."""

    def he(*shape: int, fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    weights, c = [he(16, 3, 3, 3, fan_in=27)], 16
    for out_c, _ in BLOCKS:
        weights += [he(1, 3, 3, c, fan_in=9), he(out_c, 1, 1, c, fan_in=c)]
        c = out_c
    return weights


def _pooled_features(size: int, backbone: list[np.ndarray], rng: np.random.Generator):
    """The pooled features of CALIBRATION_INPUTS random inputs, by the reference
    interpreter on the backbone alone."""
    from .interpreter import Interpreter
    from .reader import read_model

    session = Interpreter(read_model(_build(size, backbone, None)))
    shape = (1, size, size, 3)
    return np.concatenate(
        [
            session.invoke([rng.uniform(-1, 1, shape).astype(np.float32)])[0]
            for _ in range(CALIBRATION_INPUTS)
        ]
    )


def _build(size: int, backbone: list[np.ndarray], head: tuple[np.ndarray, np.ndarray] | None):
    """The model's bytes; without `head` it ends at the pooled features."""
    b = ModelBuilder("devicefarm example: tiny MobileNet")
    g = b.main
    x = g.input("input", (1, size, size, 3))
    weights = iter(backbone)
    h, c = size // 2, 16
    y = g.tensor("conv0", (1, h, h, c))
    g.op(
        "CONV_2D",
        [x, g.const("conv0/w", next(weights)), g.const("conv0/b", np.zeros(c, np.float32))],
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
                g.const(f"block{i}/dw/w", next(weights)),
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
                g.const(f"block{i}/pw/w", next(weights)),
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
    if head is None:
        g.output(pooled)
        return b.build()
    fc_w, fc_b = head
    classes = fc_w.shape[0]
    logits = g.tensor("logits", (1, classes))
    g.op(
        "FULLY_CONNECTED",
        [pooled, g.const("fc/w", fc_w), g.const("fc/b", fc_b)],
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
