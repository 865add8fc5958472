"""A fusion chain: a producer node and what its kernel absorbs (fusions/ plans them,
lowering.py and the records' lowerings read them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .lowering_api import StepSpec


@dataclass
class Chain:
    """A producer node and what its kernel absorbs."""

    producer: int
    absorbed: list[int] = field(default_factory=list)
    steps: list[StepSpec] = field(default_factory=list)
    output: int = -1  #: the tensor the kernel finally writes
    before: list[int] = field(default_factory=list)  #: a gate MUL or PAD absorbed before it
    #: (input it reads, per-channel scale, QDQ params of the product or None)
    input_scale: tuple[int, int, tuple[float, float, float, float] | None] | None = None
    #: (input it reads, top, left zero rows); with `input_depthwise`, the depthwise's PAD
    input_pad: tuple[int, int, int] | None = None
    input_depthwise: int | None = None  #: the depthwise node it computes its input from
    input_mean: int | None = None  #: the MEAN node it computes its input from
    #: (input it reads, per-channel scale, per-channel shift, clamp low, clamp high): a
    #: MUL and an ADD of constants before it (a BatchNormalization and its activation)
    input_affine: tuple[int, int, int, float, float] | None = None
    #: chains its kernel runs after its own result (a squeeze-excite's two convolutions)
    then: list[Chain] = field(default_factory=list)
    #: a depthwise convolution's chain its kernel runs first, storing that chain's output
    #: too (a squeeze-excite computing its input)
    first: Chain | None = None
    #: tensor -> (the tensor read instead, low, high): an elided RELU's output, which its
    #: kernel reads as its input clamped (fusions/relu_into_readers.py)
    clamped: dict[int, tuple[int, float, float]] = field(default_factory=dict)
    #: the elided RELUs its launches are named after (each RELU by one reader's kernel)
    clamps: list[int] = field(default_factory=list)

    @property
    def nodes(self) -> list[int]:
        """Every node its kernel runs but the producer."""
        runs = [*self.then, *([self.first] if self.first else [])]
        more = [n for c in runs for n in (c.producer, *c.before, *c.absorbed)]
        return [*self.before, *self.absorbed, *more]
