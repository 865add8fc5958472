"""Sparse constant tensors: TFLite's SparsityParameters, checked, expanded and written.

A sparse tensor stores only some of its values plus a tree of per-level metadata. The
levels walk the dimensions in `traversal_order`: first a permutation of the tensor's own
dimensions (each blocked one reduced to its number of blocks), then the block dimensions
named by `block_map`. A DENSE level holds every coordinate (`dense_size` of them); a
SPARSE_CSR level holds, for each element of the level above, the segment
`indices[segments[p]:segments[p + 1]]` of coordinates present. Values are stored in
traversal order. Semantics: TFLite's FormatConverter (sparsity_format_converter.cc) and
the verifier's checks (core/tools/verifier.cc), which this module mirrors, stricter where
TFLite would silently read garbage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ModelError

DENSE, SPARSE_CSR = "DENSE", "SPARSE_CSR"
#: DimensionType codes of the schema.
FORMAT_CODES = {0: DENSE, 1: SPARSE_CSR}
#: SparseIndexVector union members, by the numpy type of their values.
INDEX_VECTOR_TYPES = {
    np.dtype(np.int32): "Int32Vector",
    np.dtype(np.uint16): "Uint16Vector",
    np.dtype(np.uint8): "Uint8Vector",
}


@dataclass(frozen=True)
class DimMetadata:
    """One level: DENSE with its size, or SPARSE_CSR with segments and indices."""

    format: str
    dense_size: int = 0
    segments: np.ndarray | None = None  #: as stored (int32, uint16 or uint8)
    indices: np.ndarray | None = None

    @property
    def stored_bytes(self) -> int:
        return sum(a.nbytes for a in (self.segments, self.indices) if a is not None)


@dataclass(frozen=True)
class Sparsity:
    """A tensor's SparsityParameters and how many values its buffer holds."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dims: tuple[DimMetadata, ...]
    num_values: int = 0

    def stored_bytes(self, itemsize: int) -> int:
        """Bytes in the file: the values and every level's segments and indices."""
        return self.num_values * itemsize + sum(d.stored_bytes for d in self.dims)


# -- checks -------------------------------------------------------------------------------


def _expanded_sizes(sp: Sparsity, shape: tuple[int, ...], where: str) -> list[int]:
    """Size of each expanded dimension: the tensor's (blocked ones as block counts), then
    the blocks'. Raises ModelError when the traversal order or the block map is unsound."""
    rank, levels = len(shape), len(sp.traversal_order)
    order = list(sp.traversal_order)
    if levels < rank or len(sp.dims) != levels:
        raise ModelError(
            f"{where}: sparsity has a traversal order of {levels} and {len(sp.dims)} dimension "
            f"metadata for a tensor of rank {rank}"
        )
    n_blocks = levels - rank
    if len(sp.block_map) != n_blocks:
        raise ModelError(
            f"{where}: sparsity block map {list(sp.block_map)} has {len(sp.block_map)} entries "
            f"but the traversal order {order} has {n_blocks} block dimensions"
        )
    if sorted(order[:rank]) != list(range(rank)):
        raise ModelError(
            f"{where}: sparsity traversal order {order} does not start with a permutation of "
            f"the tensor's dimensions 0..{rank - 1}"
        )
    # NOTE: TFLite's verifier and its converter read permuted block levels differently, so
    # only the order they agree on is accepted.
    if order[rank:] != list(range(rank, levels)):
        raise ModelError(
            f"{where}: sparsity traversal order {order} must list its block dimensions "
            f"{list(range(rank, levels))} last and in order"
        )
    block_map = list(sp.block_map)
    if any(not 0 <= d < rank for d in block_map) or block_map != sorted(set(block_map)):
        raise ModelError(
            f"{where}: sparsity block map {block_map} must name distinct dimensions of the "
            f"rank-{rank} tensor in increasing order"
        )
    sizes = list(shape) + [0] * n_blocks
    for k, d in enumerate(block_map):
        level = sp.dims[rank + k]
        block = int(level.dense_size)
        if level.format != DENSE or block <= 0:
            raise ModelError(
                f"{where}: sparsity block dimension {rank + k} must be DENSE with a positive "
                f"size (got {level.format} of size {block})"
            )
        if shape[d] % block:
            raise ModelError(
                f"{where}: dimension {d} of shape {list(shape)} is not a multiple of its "
                f"sparsity block size {block}"
            )
        sizes[d] //= block
        sizes[rank + k] = block
    return sizes


def _check_csr(dim: DimMetadata, level: int, size: int, parents: int, where: str) -> int:
    """Checks one SPARSE_CSR level under `parents` elements; returns its element count."""
    what = f"{where}: sparsity level {level}"
    if dim.segments is None or dim.indices is None:
        raise ModelError(f"{what} is SPARSE_CSR but lacks its segments or indices")
    seg = dim.segments.astype(np.int64)
    idx = dim.indices.astype(np.int64)
    if seg.size != parents + 1:
        raise ModelError(
            f"{what}: {seg.size} segment bounds for {parents} elements above (expected "
            f"{parents + 1})"
        )
    if seg[0] != 0 or np.any(np.diff(seg) < 0):
        raise ModelError(f"{what}: segments must start at 0 and never decrease")
    if seg[-1] != idx.size:
        raise ModelError(f"{what}: segments end at {int(seg[-1])} but there are {idx.size} indices")
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        bad = int(idx[(idx < 0) | (idx >= size)][0])
        raise ModelError(f"{what}: index {bad} is outside its dimension of size {size}")
    return int(idx.size)


def check_sparsity(sp: Sparsity, shape: tuple[int, ...], where: str) -> list[int]:
    """Raise ModelError (naming `where`) unless `sp` soundly describes a tensor of `shape`
    whose buffer holds `sp.num_values` values; returns the expanded dimension sizes."""
    sizes = _expanded_sizes(sp, shape, where)
    count = 1
    for level, (d, dim) in enumerate(zip(sp.traversal_order, sp.dims, strict=True)):
        if dim.format == DENSE:
            if dim.dense_size != sizes[d]:
                raise ModelError(
                    f"{where}: sparsity level {level} is DENSE of size {dim.dense_size} but "
                    f"its dimension has size {sizes[d]}"
                )
            count *= sizes[d]
        elif dim.format == SPARSE_CSR:
            count = _check_csr(dim, level, sizes[d], count, where)
        else:
            raise ModelError(f"{where}: sparsity level {level} has unknown format {dim.format}")
    if count != sp.num_values:
        raise ModelError(
            f"{where}: buffer holds {sp.num_values} values but its sparsity describes {count}"
        )
    return sizes


# -- sparse to dense ----------------------------------------------------------------------


def _level_weights(sp: Sparsity, shape: tuple[int, ...], sizes: list[int]) -> list[int]:
    """Flat-index weight of one step along each expanded dimension."""
    rank = len(shape)
    strides = [int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(rank)]
    weights = strides + [0] * len(sp.block_map)
    for k, d in enumerate(sp.block_map):
        weights[rank + k] = strides[d]
        weights[d] = strides[d] * sizes[rank + k]
    return weights


def densify(values: np.ndarray, shape: tuple[int, ...], sp: Sparsity, where: str) -> np.ndarray:
    """The dense tensor of `shape` that sparse `values` describe (checked first; zeros
    elsewhere; where a coordinate is stored twice the later value wins, as in TFLite)."""
    sizes = check_sparsity(sp, shape, where)
    weights = _level_weights(sp, shape, sizes)
    flat = np.zeros(1, np.int64)  # flat dense index of each element of the current level
    pos = np.zeros(1, np.int64)  # its position within the level (the CSR "parent" index)
    for d, dim in zip(sp.traversal_order, sp.dims, strict=True):
        if dim.format == DENSE:
            step = np.arange(sizes[d], dtype=np.int64)
            flat = (flat[:, None] + step * weights[d]).ravel()
            pos = (pos[:, None] * sizes[d] + step).ravel()
        else:
            seg = dim.segments.astype(np.int64)
            starts, counts = seg[pos], seg[pos + 1] - seg[pos]
            run_start = np.cumsum(counts) - counts
            pos = np.repeat(starts - run_start, counts) + np.arange(int(counts.sum()))
            flat = np.repeat(flat, counts) + dim.indices.astype(np.int64)[pos] * weights[d]
    dense = np.zeros(int(np.prod(shape, dtype=np.int64)), values.dtype)
    written = np.zeros(dense.size, np.bool_)
    written[flat] = True
    if np.count_nonzero(written) != flat.size:  # keep the last write of each coordinate
        _, last_reversed = np.unique(flat[::-1], return_index=True)
        keep = np.sort(flat.size - 1 - last_reversed)
        flat, values = flat[keep], values[keep]
    dense[flat] = values
    return dense.reshape(shape)


# -- dense to sparse (for writing models) -------------------------------------------------


def _blocked_view(
    dense: np.ndarray, block_map: Sequence[int], block_size: Sequence[int]
) -> np.ndarray:
    """`dense` as the expanded tensor: its dimensions (block counts), then the blocks."""
    split_shape, outer_axes, inner_axes = [], [], []
    blocks = dict(zip(block_map, block_size, strict=True))
    for d, n in enumerate(dense.shape):
        outer_axes.append(len(split_shape))
        if d in blocks:
            split_shape += [n // blocks[d], blocks[d]]
            inner_axes.append(len(split_shape) - 1)
        else:
            split_shape.append(n)
    return dense.reshape(split_shape).transpose(outer_axes + inner_axes)


def sparsify(
    dense: np.ndarray,
    formats: Sequence[str],
    traversal_order: Sequence[int] | None = None,
    block_map: Sequence[int] = (),
    block_size: Sequence[int] = (),
    index_type: np.dtype | type = np.int32,
) -> tuple[np.ndarray, Sparsity]:
    """Values and SparsityParameters that store `dense` with per-level `formats`, as
    TFLite's converter does: a SPARSE_CSR level keeps the coordinates whose subtree holds
    a non-zero; a DENSE level keeps every coordinate."""
    dense = np.asarray(dense)
    levels = dense.ndim + len(block_map)
    order = list(traversal_order) if traversal_order is not None else list(range(levels))
    if len(formats) != levels or len(block_size) != len(block_map):
        raise ValueError(f"{levels} levels need as many formats and one block size per block")
    tree = _blocked_view(dense, block_map, block_size).transpose(order)
    nonzero = tree != 0
    prefixes = np.zeros((1, 0), np.int64)  # kept coordinates of the levels so far
    dims = []
    for level, fmt in enumerate(formats):
        size = tree.shape[level]
        if fmt == DENSE:
            rows = np.repeat(np.arange(len(prefixes)), size)
            cols = np.tile(np.arange(size), len(prefixes))
            dims.append(DimMetadata(DENSE, dense_size=size))
        else:
            below = tuple(range(level + 1, levels))
            present = np.any(nonzero, axis=below) if below else nonzero
            mask = present[tuple(prefixes.T)].reshape(len(prefixes), size)
            rows, cols = np.nonzero(mask)
            segments = np.concatenate([[0], np.cumsum(mask.sum(axis=1))])
            if max(segments[-1], size - 1) > np.iinfo(index_type).max:
                raise ValueError(f"level {level}: segments or indices overflow {index_type}")
            dims.append(
                DimMetadata(
                    SPARSE_CSR,
                    segments=segments.astype(index_type),
                    indices=cols.astype(index_type),
                )
            )
        prefixes = np.column_stack([prefixes[rows], cols])
    values = tree[tuple(prefixes.T)]
    sp = Sparsity(tuple(order), tuple(block_map), tuple(dims), num_values=int(values.size))
    return np.ascontiguousarray(values), sp


def summary(name: str, shape: tuple[int, ...], dtype: np.dtype, sp: Sparsity) -> str:
    """One line for `inspect`: the tensor, its levels, and its size dense vs stored."""
    dense = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    stored = sp.stored_bytes(dtype.itemsize)
    formats = ",".join("D" if d.format == DENSE else "S" for d in sp.dims)
    saved = 100.0 * (dense - stored) / dense if dense else 0.0
    return (
        f"{name} {list(shape)} {dtype.name} levels {formats}"
        f"{' blocks on ' + str(list(sp.block_map)) if sp.block_map else ''}: "
        f"{dense} bytes dense, {stored} stored ({saved:.0f}% saved)"
    )
