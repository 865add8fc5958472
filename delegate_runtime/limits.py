"""Caps on what a model may ask of the host: the reader checks them, the validator and the
reference kernels hold them (a module of its own, below all three)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Caps that keep a hostile model from exhausting the host."""

    max_file_bytes: int = 2 * 1024**3  #: 2 GiB, the flatbuffer limit
    max_rank: int = 8
    max_tensor_elements: int = 1 << 28  #: 256 Mi elements (1 GiB of float32)
    max_total_elements: int = 1 << 30  #: over all tensors of all subgraphs
    max_tensor_bytes: int = 1 << 30  #: 1 GiB a tensor, whatever its type
    #: declared tensors of all subgraphs together, and the tensors a subgraph holds at
    #: once while it runs (the farm's per-job memory limit is 4 GiB)
    max_total_bytes: int = 3 << 30
    max_op_macs: int = 10**11  #: multiply-adds of one op (macs.op_macs)
    max_model_macs: int = 10**12  #: of all ops of all subgraphs, run once each
    max_subgraphs: int = 1024


DEFAULT_LIMITS = Limits()
