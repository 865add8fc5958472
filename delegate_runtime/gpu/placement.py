"""Partitions too small to pay for the GPU stay on the CPU.

Every GPU partition costs a round trip whatever it computes: its inputs copied in, its
launches enqueued (about 5 us each), its outputs read back (about 35 us on an H200 for a
five-node model). openWakeWord's wake-word heads (0.1-0.4 million multiply-adds) take
LiteRT's CPU 14-70 us and took our GPU path 36-220 us, its melspectrogram (2.2 million
multiply-adds and elements) 67 us against 136; the smallest model the GPU wins on
(MediaPipe's hand_recrop, 10 million multiply-adds and 1.5 million output elements) runs
2.4x faster on it than on LiteRT's CPU at 16 threads (docs/benchmarks.md). A partition whose work
(its nodes' multiply-adds, or their output elements where an op's work grows with its
tensors) is below the switches' `min_gpu_work` is left to the CPU runtime, as Core ML's and
Hexagon's delegates leave partitions below their minimum size; the session's delegation
says which and why.

At its default the rule holds on GPUs only: on a CPU OpenCL device (PoCL) the delegate is
the thing the farm tests, and the round trip is the CPU's own. A session's
`min_gpu_work` option, or the switch set in the environment, holds on every device;
`--require_full_delegation` sets the option to 0.
"""

from __future__ import annotations

from dataclasses import replace

from ..graph import Subgraph
from ..macs import partition_work
from .partition import DelegationSummary
from .switches import Switches


def wanted_min_work(option: int | None, switches: Switches) -> int:
    """The least work a partition needs if the device suits the rule (min_gpu_work)."""
    return switches.min_gpu_work if option is None else option


def device_decides(option: int | None, switches: Switches) -> bool:
    """Whether the rule holds only on a GPU: neither the option nor the environment set it."""
    return option is None and switches.source("min_gpu_work") == "default"


def keep_small_on_cpu(summary: DelegationSummary, sg: Subgraph, min_work: int) -> DelegationSummary:
    """`summary` with the partitions doing less than `min_work` moved to the CPU."""
    if min_work <= 0:
        return summary
    small = [p for p in summary.partitions if partition_work(sg, p) < min_work]
    if not small:
        return summary
    kept = [p for p in summary.partitions if p not in small]
    return replace(
        summary,
        delegated_nodes=sum(len(p) for p in kept),
        partitions=kept,
        below_min_work=small,
        min_work=min_work,
    )
