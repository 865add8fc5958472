"""Space/depth/batch rearrangements on NHWC tensors: SPACE_TO_DEPTH, DEPTH_TO_SPACE,
SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND.

Values only move, so quantized tensors pass through; SPACE_TO_BATCH_ND pads quantized
tensors with the output's zero point, as TFLite.
"""

from __future__ import annotations

import numpy as np

from .common import quant_params
from .registry import OpContext, register
from .shape import check_output, data_input, index_values, is_quantized, op_error

SPACE_TYPES = (np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64)


def _nhwc(ctx: OpContext) -> np.ndarray:
    x = data_input(ctx, 0, SPACE_TYPES)
    if x.ndim != 4:
        raise op_error(ctx, f"input must be 4-D NHWC, got shape {list(x.shape)}")
    return x


def _block_size(ctx: OpContext) -> int:
    block = int(ctx.opt("block_size", 0))
    if block < 1:
        raise op_error(ctx, f"block_size {block} must be positive")
    return block


@register("SPACE_TO_DEPTH", versions=(1, 2))
def space_to_depth(ctx: OpContext) -> np.ndarray:
    """SPACE_TO_DEPTH: each block×block patch becomes channels, (row, column, channel) order."""
    x, bs = _nhwc(ctx), _block_size(ctx)
    n, h, w, c = x.shape
    if h % bs or w % bs:
        raise op_error(ctx, f"height {h} and width {w} must be multiples of block_size {bs}")
    y = x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h // bs, w // bs, bs * bs * c)


@register("DEPTH_TO_SPACE", versions=(1, 2))
def depth_to_space(ctx: OpContext) -> np.ndarray:
    """DEPTH_TO_SPACE: the inverse of SPACE_TO_DEPTH (TensorFlow's DCR order)."""
    x, bs = _nhwc(ctx), _block_size(ctx)
    n, h, w, c = x.shape
    if c % (bs * bs):
        raise op_error(ctx, f"depth {c} must be a multiple of block_size² {bs * bs}")
    oc = c // (bs * bs)
    y = x.reshape(n, h, w, bs, bs, oc).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h * bs, w * bs, oc)


def _batch_space_input(ctx: OpContext) -> tuple[np.ndarray, bool]:
    """The input as 4-D (a 3-D input gets a width of 1, as TFLite), and whether it was 3-D."""
    x = data_input(ctx, 0, SPACE_TYPES)
    if x.ndim == 3:
        return x[:, :, None, :], True
    if x.ndim != 4:
        raise op_error(ctx, f"input must be 3-D or 4-D, got shape {list(x.shape)}")
    return x, False


def _block_shape(ctx: OpContext, spatial: int) -> list[int]:
    block = index_values(ctx, 1, "block_shape").reshape(-1).tolist()
    if len(block) != spatial or any(b < 1 for b in block):
        raise op_error(ctx, f"block_shape {block} must be {spatial} positive values")
    return block + [1] * (2 - spatial)


def _pairs(ctx: OpContext, spatial: int, what: str) -> list[tuple[int, int]]:
    pairs = index_values(ctx, 2, what)
    if pairs.shape != (spatial, 2) or np.any(pairs < 0):
        raise op_error(ctx, f"{what} {pairs.tolist()} must be [{spatial}, 2] non-negative values")
    return [(int(a), int(b)) for a, b in pairs] + [(0, 0)] * (2 - spatial)


@register("SPACE_TO_BATCH_ND", versions=(1, 2, 3, 4))
def space_to_batch_nd(ctx: OpContext) -> np.ndarray:
    """SPACE_TO_BATCH_ND: pad the spatial dims, then move block offsets into the batch."""
    x, was_3d = _batch_space_input(ctx)
    spatial = 1 if was_3d else 2
    (bh, bw), pads = _block_shape(ctx, spatial), _pairs(ctx, spatial, "paddings")
    fill = 0
    if is_quantized(ctx, 0, output=True):
        fill = int(quant_params(ctx.out_tensors[0]).zero_point[0])
    padded = [
        x.shape[0],
        *(d + a + b for d, (a, b) in zip(x.shape[1:3], pads, strict=True)),
        x.shape[3],
    ]
    check_output(ctx, padded, x.dtype)
    x = np.pad(x, [(0, 0), *pads, (0, 0)], constant_values=np.array(fill, x.dtype))
    n, h, w, c = x.shape
    if h % bh or w % bw:
        raise op_error(ctx, f"padded spatial shape {[h, w]} is not a multiple of {[bh, bw]}")
    y = x.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
    y = y.reshape(bh * bw * n, h // bh, w // bw, c)
    return y[:, :, 0, :] if was_3d else y


@register("BATCH_TO_SPACE_ND", versions=(1, 2, 3, 4))
def batch_to_space_nd(ctx: OpContext) -> np.ndarray:
    """BATCH_TO_SPACE_ND: move batch blocks back into the spatial dims, then crop."""
    x, was_3d = _batch_space_input(ctx)
    spatial = 1 if was_3d else 2
    (bh, bw), crops = _block_shape(ctx, spatial), _pairs(ctx, spatial, "crops")
    nb, h, w, c = x.shape
    if nb % (bh * bw):
        raise op_error(ctx, f"batch {nb} is not a multiple of the block size {bh * bw}")
    n = nb // (bh * bw)
    y = x.reshape(bh, bw, n, h, w, c).transpose(2, 3, 0, 4, 1, 5).reshape(n, h * bh, w * bw, c)
    (ct, cb), (cl, cr) = crops
    if ct + cb > h * bh or cl + cr > w * bw:
        raise op_error(ctx, f"crops {crops[:spatial]} exceed the spatial shape {[h * bh, w * bw]}")
    y = y[:, ct : h * bh - cb, cl : w * bw - cr, :]
    return y[:, :, 0, :] if was_3d else y
