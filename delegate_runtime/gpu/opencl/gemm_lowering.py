"""The tiled GEMM's lowering: which variant and K split a product gets (`gemm_plan`,
`k_split`: the switches' rules, gpu/switches.py) and its launch (`lower_gemm`), with A read
plainly, scaled, snapped, through an affine map, or computed as it is loaded (a depthwise
convolution's output, a convolution's patches, a mean): `ReadA` (lowering_api.py, where
the records see it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operator
from ..switches import DEFAULTS, Switches
from .launch import Buf, Counters, Scratch
from .lowering_api import PLAIN, Lowering, ReadA
from .records import gemm_kernel
from .records.conv import patch_runs


def gemm_plan(
    m: int,
    n: int,
    k: int,
    compute_units: int,
    computed_a: bool = False,
    depthwise: bool = False,
    groups_per_cu: int | None = None,
    switches: Switches = DEFAULTS,
) -> tuple[str, int, int]:
    """The GEMM variant (a GEMM_VARIANTS key), the number of K slices and K per slice for
    an [m, k] x [k, n] product: the larger tile where it fills the device, else the
    smaller, and K split where even that leaves compute units idle and K is long (or A
    is `computed_a`, dearer to load). A computed from a `depthwise` window takes the
    16-wide tile where the 32-wide one leaves compute units idle
    (`depthwise_small_tile_groups_per_cu`). `groups_per_cu`: work groups wanted in flight
    per compute unit (the switches' `gemm_groups_per_cu` unless given)."""
    target = (groups_per_cu or switches.gemm_groups_per_cu) * compute_units
    tiles64 = -(-m // 64) * -(-n // 64)
    name = "gemm64" if tiles64 >= target else "gemm32"
    splits, kps = k_split(name, m, n, k, compute_units, computed_a, groups_per_cu, switches)
    if depthwise and name == "gemm32":
        groups = -(-m // 32) * -(-n // 32) * splits
        if groups < switches.depthwise_small_tile_groups_per_cu * compute_units:
            name = "gemm16"
            splits, kps = k_split(name, m, n, k, compute_units, computed_a, groups_per_cu, switches)
    return name, splits, kps


def k_split(
    name: str,
    m: int,
    n: int,
    k: int,
    compute_units: int,
    computed_a: bool = False,
    groups_per_cu: int | None = None,
    switches: Switches = DEFAULTS,
) -> tuple[int, int]:
    """The number of K slices and K per slice of an [m, k] x [k, n] product on the tile of
    GEMM variant `name`: K split where the tiles leave compute units idle and K is long
    (or A is `computed_a`, dearer to load); `groups_per_cu` and `switches` as
    gemm_plan's."""
    target = (groups_per_cu or switches.gemm_groups_per_cu) * compute_units
    ts, _, tk = gemm_kernel.GEMM_VARIANTS[name]
    tiles = -(-m // ts) * -(-n // ts)
    splits, steps = 1, -(-k // tk)
    least_k = switches.min_computed_split_k
    if tiles < target and computed_a and k >= 2 * least_k:
        splits = min(-(-target // tiles), k // least_k)
    elif tiles < target and not computed_a and steps >= switches.min_split_steps:
        splits = min(-(-target // tiles), steps // switches.min_steps_per_split)
    kps = -(-k // splits)
    kps = -(-kps // tk) * tk  # K per split, a multiple of the k step
    return -(-k // kps), kps


def lower_gemm(
    lw: Lowering,
    op: Operator,
    buffers: tuple[Any, Any, Any, Any],
    dims: tuple[int, int, int],
    act: int,
    read: ReadA = PLAIN,
) -> None:
    """Append the launch of `op`'s [m, k] x [k, n] product (`dims`) of `buffers` (a, b,
    bias, out) with fused activation `act`, A read as `read` says; small outputs split K
    across work groups to fill the device."""
    a, b, bias, out = buffers
    m, n, k = dims
    name, splits, kps = gemm_plan(
        m,
        n,
        k,
        lw.compute_units,
        read.computed,
        read.depthwise is not None,
        lw.gemm_groups_per_cu,
        lw.switches,
    )
    ts, wpt, _ = gemm_kernel.GEMM_VARIANTS[name]
    rts = ts // wpt
    gsize = (-(-n // ts) * rts, -(-m // ts) * rts, splits)
    scratch = Scratch(4 * splits * m * n if splits > 1 else 4)
    counters = Counters(gsize[0] // rts * (gsize[1] // rts))
    scale, scaled, snap = _scaling(lw, read)
    view = lw.view(a.tensor) if read.plain and isinstance(a, Buf) else None
    lda = view.stride if view is not None else k
    if read.depthwise is not None:
        if read.scale is not None:
            raise ValueError("a GEMM computes a depthwise input or scales it, not both")
        name += gemm_kernel.DEPTHWISE_SUFFIX
        args = [a, b, bias, out, scratch, counters, *read.depthwise]
    else:
        args = [a, b, bias, out, scratch, counters, scale, np.int32(scaled), snap]
        if read.scale is not None and (read.patch is not None or read.mean is not None):
            raise ValueError("a GEMM scales its input or reads it another way, not both")
        if read.patch is not None:
            name += gemm_kernel.PATCH_SUFFIX
            args.append(read.patch)
        elif read.mean is not None:
            name += gemm_kernel.MEAN_SUFFIX
            args.append(read.mean)
    ldc, coff = lw.store_view(out) or (n, 0)
    args += list(map(np.int32, (m, n, k, kps, lda, ldc, coff)))
    args += lw.epilogue(act)
    # four at a time where no load crosses a row of A, nor for patches a contiguous run
    runs = (k, lda) if read.patch is None else (k, *patch_runs(read.patch))
    if n % 4 == 0 and all(r % 4 == 0 for r in runs):
        name += gemm_kernel.VECTOR_SUFFIX
    lw.emit(op, name, args, gsize, (rts, rts, 1))


def _scaling(lw: Lowering, read: ReadA) -> tuple[Any, int, np.ndarray]:
    """The GEMM's (scale operand, scaling mode, snap parameters): none (0), a scale (1),
    a scale then a snap (2), or an affine map (3)."""
    scale = (
        read.scale
        if read.scale is not None
        else lw.add_const("epilogue_none", np.zeros(1, np.float32))
    )
    scaled = 0 if read.scale is None else 2 if read.snap is not None else 1
    snap = np.array(read.snap or (0.0, 0.0, 1.0, 0.0), np.float32)
    if read.affine is not None:
        if read.scale is not None:
            raise ValueError("a GEMM scales its input or applies an affine map, not both")
        scale, (low, high) = read.affine[0], read.affine[1:]
        scaled, snap = 3, np.array([low, high, 1.0, 0.0], np.float32)
    return scale, scaled, snap
