"""The project's own graph objects: what a `.tflite` file becomes once read.

The flatbuffer stays at the reader's edge; everything else works on these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .sparsity import Sparsity


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per channel."""

    scale: np.ndarray  #: float32, one value per tensor or per channel along `axis`
    zero_point: np.ndarray  #: int64, same length as `scale`
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def broadcast_shape(self, rank: int) -> tuple[int, ...]:
        """Shape that broadcasts scale/zero_point against a tensor of `rank`."""
        if not self.per_channel:
            return (1,) * rank
        shape = [1] * rank
        shape[self.axis] = self.scale.size
        return tuple(shape)


@dataclass
class Tensor:
    """A tensor of one subgraph. `data` is a read-only array for constants, else None."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    shape_signature: tuple[int, ...] | None = None
    quantization: Quantization | None = None
    data: np.ndarray | None = None
    is_variable: bool = False
    #: how a sparse constant is stored in the file (`data` holds it densified), else None
    sparsity: Sparsity | None = None

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass
class Operator:
    """One node: a builtin op (by name and code), its version, inputs, outputs, options.

    Optional inputs are -1, as in the file.
    """

    index: int
    op: str  #: builtin name, e.g. "CONV_2D"; custom ops are "CUSTOM:<code>"
    code: int  #: builtin code (BuiltinOperator)
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    intermediates: tuple[int, ...] = ()

    def describe(self) -> str:
        return f"operator #{self.index} ({self.op} v{self.version})"


@dataclass
class Subgraph:
    """A list of tensors and the operators over them, in execution order."""

    name: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass
class Signature:
    """A named entry point: a subgraph and the names of its inputs and outputs."""

    key: str
    subgraph_index: int
    inputs: dict[str, int]  #: name -> tensor index in the subgraph
    outputs: dict[str, int]


@dataclass
class Model:
    """A whole model: subgraphs (0 is the main one), signatures, identity."""

    subgraphs: list[Subgraph]
    signatures: list[Signature]
    version: int = 3
    description: str = ""
    sha256: str = ""  #: content address of the file bytes (the model token)
    size_bytes: int = 0

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]

    def op_summary(self) -> dict[str, int]:
        """Count of each op name over all subgraphs."""
        counts: dict[str, int] = {}
        for sg in self.subgraphs:
            for op in sg.operators:
                counts[op.op] = counts.get(op.op, 0) + 1
        return counts
