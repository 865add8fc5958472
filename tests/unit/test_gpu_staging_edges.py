"""A partition's float32 edges planned as launches (opencl/staging_edges.py): which launch
reads or writes a float32 staging buffer itself, and where a conversion launch runs instead."""

from __future__ import annotations

import numpy as np

from delegate_runtime.gpu.opencl.launch import Buf, Launch, Lowered, Staging
from delegate_runtime.gpu.opencl.staging_edges import with_staging_edges


def _launch(kernel: str, *args: object, node: int = 0) -> Launch:
    return Launch(kernel, list(args), (128,), (128,), node)


SIZES = {0: 10, 1: 10, 2: 10, 3: 10, 9: 10}


def test_edge_variants_take_the_staging_buffers() -> None:
    """The one reader of an input with a float32 variant (conv2d_direct, argument 0) and
    the last writer of an output with one (softmax_rows, argument 1) take the staging
    buffers themselves: no conversion launches."""
    lowered = Lowered(
        [
            _launch("conv2d_direct", Buf(0), Buf(1), np.int32(3), node=0),
            _launch("softmax_rows", Buf(1), Buf(2), node=1),
        ]
    )
    out = with_staging_edges(lowered, SIZES, [0], [2])
    assert [ln.kernel for ln in out.launches] == ["conv2d_direct_f32in", "softmax_rows_f32out"]
    assert out.launches[0].args[:2] == [Staging(0), Buf(1)]
    assert out.launches[1].args == [Buf(1), Staging(2)]
    assert lowered.launches[0].kernel == "conv2d_direct"  # the input is left as it was


def test_conversions_where_no_variant_serves() -> None:
    """An input read by two launches, and an output whose writer has no float32 variant,
    pass through conversion launches: to_storage first, from_storage last, node -1."""
    lowered = Lowered(
        [
            _launch("conv2d_direct", Buf(0), Buf(1), node=0),
            _launch("binary", Buf(0), Buf(1), Buf(2), node=1),
        ]
    )
    out = with_staging_edges(lowered, SIZES, [0], [2])
    kernels = [ln.kernel for ln in out.launches]
    assert kernels == ["to_storage", "conv2d_direct", "binary", "from_storage"]
    first, last = out.launches[0], out.launches[-1]
    assert first.args[:2] == [Staging(0), Buf(0)] and first.node == -1
    assert last.args[:2] == [Buf(2), Staging(2)] and last.node == -1
    assert int(first.args[2]) == 10 and first.gsize == (128,)


def test_an_output_read_twice_by_its_writer_converts() -> None:
    """A softmax whose output buffer it also reads (two positions) keeps the storage
    copy: its output converts after it."""
    lowered = Lowered([_launch("softmax_rows", Buf(2), Buf(2), node=0)])
    out = with_staging_edges(lowered, SIZES, [], [2])
    assert [ln.kernel for ln in out.launches] == ["softmax_rows", "from_storage"]


def test_aliases_resolve_to_their_root() -> None:
    """An input living in another tensor's buffer (an alias) is found through its root."""
    lowered = Lowered([_launch("softmax_rows", Buf(1), Buf(3), node=0)], alias={9: 1})
    out = with_staging_edges(lowered, SIZES, [9], [3])
    assert [ln.kernel for ln in out.launches] == ["to_storage", "softmax_rows_f32out"]
    assert out.launches[0].args[:2] == [Staging(9), Buf(1)]
