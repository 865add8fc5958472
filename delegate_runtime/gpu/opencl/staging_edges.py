"""A partition's edges in float32 staging buffers: inputs arrive and outputs leave as
float32 whatever the storage.

Used with half storage (the host then does no per-element conversion) and where inputs and
outputs lie in host memory the GPU maps (host_edges.py: the staging buffers are those).
Each input is uploaded into (or written to) a float32 staging buffer and each output read
back from one. The one launch reading an input (or last writing an output) reads
(writes) the staging buffer itself where its kernel has a float32 variant for that
argument; elsewhere a conversion launch (`to_storage`, `from_storage`) runs first (last).
The edges are planned into the launch list before the program is made, so a model's own
program holds them as copies like any launch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .launch import LOCAL_1D, Buf, Launch, Lowered, Staging, round_up

#: The conversion kernels at a partition's edges (fp16, or inputs and outputs in host
#: memory: host_edges.py).
CONVERSIONS = ("to_storage", "from_storage")
#: (kernel, argument position, is input) -> the variant reading/writing float32 there.
FLOAT32_EDGE_VARIANTS = {
    ("conv2d_direct", 0, True): "conv2d_direct_f32in",
    ("softmax_rows", 1, False): "softmax_rows_f32out",
}


def with_staging_edges(
    lowered: Lowered, sizes: dict[int, int], inputs: list[int], outputs: list[int]
) -> Lowered:
    """`lowered` with its inputs and outputs in float32 staging buffers (`sizes`: each
    edge tensor's element count)."""

    def root(t: int) -> int:
        while t in lowered.alias:
            t = lowered.alias[t]
        return t

    launches = list(lowered.launches)
    before, after = [], []
    done: set[int] = set()
    for t in [*inputs, *outputs]:
        if t in done:
            continue
        done.add(t)
        is_input = t in inputs
        at = _float32_user(launches, Buf(root(t)), is_input, root)
        if at is not None:
            i, pos, variant = at
            args = list(launches[i].args)
            args[pos] = Staging(t)
            launches[i] = replace(launches[i], kernel=variant, args=args)
            continue
        n = sizes[t]
        src, dst = (Staging(t), Buf(root(t))) if is_input else (Buf(root(t)), Staging(t))
        conversion = Launch(
            "to_storage" if is_input else "from_storage",
            [src, dst, np.int32(n)],
            (round_up(n, LOCAL_1D),),
            (LOCAL_1D,),
            node=-1,
        )
        (before if is_input else after).append(conversion)
    return Lowered(before + launches + after, lowered.consts, lowered.alias)


def _float32_user(
    launches: list[Launch], buf: Buf, is_input: bool, root: Any
) -> tuple[int, int, str] | None:
    """The one launch that reads input `buf` (or last writes output `buf`), the argument
    position and the float32 variant of its kernel there, where it has one."""

    def positions(launch: Launch) -> list[int]:
        return [
            p
            for p, a in enumerate(launch.args)
            if isinstance(a, Buf) and root(a.tensor) == buf.tensor
        ]

    users = [i for i, launch in enumerate(launches) if positions(launch)]
    if not users:
        return None
    i = users[0] if is_input else users[-1]
    found = positions(launches[i])
    variant = FLOAT32_EDGE_VARIANTS.get((launches[i].kernel, found[0], is_input))
    if variant is None or len(found) != 1 or (is_input and len(users) != 1):
        return None  # e.g. also read by an epilogue step: it needs the storage copy
    return i, found[0], variant
