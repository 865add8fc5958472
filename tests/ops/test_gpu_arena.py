"""A partition's arena (opencl/arena.py): its regions on a real OpenCL device, and the
copies that read their buffers through it (opencl/specialize.py) against LiteRT's
reference kernels and against the generic kernels, to the bit."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from delegate_runtime import read_model
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import check_against_litert
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device
from tests.ops.test_gpu_squeeze_excite import float_block

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

CONSTS = {
    "weights": np.arange(1000, dtype=np.float32) - 0.5,
    "indices": np.array([7, -1, 3], np.int32),
    "halves": np.arange(5, dtype=np.float16),
}


def _arena(whole: bool) -> tuple[Any, Any, Any]:
    import pyopencl as cl

    from delegate_runtime.gpu.opencl.arena import Arena, ArenaImage
    from delegate_runtime.gpu.opencl.runtime import select_device

    device = select_device(None)
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    image = ArenaImage.lay_out(device.mem_base_addr_align, CONSTS, 5, [100, 4096, 1], 64, whole)
    arena = Arena(ctx, queue, image)
    return arena, queue, device


def _read(queue: Any, buffer: Any, offset: int, like: np.ndarray) -> np.ndarray:
    import pyopencl as cl

    out = np.empty_like(like)
    cl.enqueue_copy(queue, out, buffer, src_offset=offset)
    return out


def test_whole_arena_regions_are_aligned_apart_and_uploaded(opencl_device):
    """Every region starts at a multiple of ARENA_UNIT and of the device's sub-buffer
    alignment, none overlaps the next, the constants read back as given, the counters as
    zeros; a sub-buffer is made only when asked for, and holds its region."""
    from delegate_runtime.gpu.opencl.arena import ARENA_UNIT

    arena, queue, device = _arena(whole=True)
    step = max(ARENA_UNIT, device.mem_base_addr_align // 8)
    spans = sorted((arena.offsets[k], arena.offsets[k] + arena.sizes[k]) for k in arena.sizes)
    assert all(start % step == 0 for start, _ in spans)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] <= arena.nbytes
    for key, value in CONSTS.items():
        buffer, offset = arena.locate(("const", key))
        np.testing.assert_array_equal(_read(queue, buffer, offset, value), value)
        assert arena.units(("const", key)) * ARENA_UNIT == offset
    buffer, offset = arena.locate(("counters",))
    np.testing.assert_array_equal(_read(queue, buffer, offset, np.ones(5, np.int32)), 0)
    assert arena.sub_buffers == 0
    sub = arena.region(("const", "weights"))
    assert arena.region(("const", "weights")) is sub and arena.sub_buffers == 1
    np.testing.assert_array_equal(_read(queue, sub, 0, CONSTS["weights"]), CONSTS["weights"])


def test_separate_regions_are_buffers_of_their_own(opencl_device):
    """Without copies that take the arena, each region is a buffer of its own (offset 0),
    holding its constant; no sub-buffers."""
    arena, queue, _ = _arena(whole=False)
    for key, value in CONSTS.items():
        buffer, offset = arena.locate(("const", key))
        assert offset == 0 and buffer is arena.region(("const", key))
        np.testing.assert_array_equal(_read(queue, buffer, offset, value), value)
    buffer, _ = arena.locate(("counters",))
    np.testing.assert_array_equal(_read(queue, buffer, 0, np.ones(5, np.int32)), 0)
    assert arena.sub_buffers == 0


@pytest.mark.parametrize("precision", PRECISIONS)
def test_copies_through_the_arena_beyond_sixteen_buffers(opencl_device, monkeypatch, precision):
    """EfficientNet's squeeze-excite launch takes 17 buffers: its copy reads them through
    the arena with two offset vectors. Every launch's copy takes no buffer of the arena as
    an argument, no sub-buffer is made (the half-storage edges included), and the outputs
    equal the generic kernels' to the bit and LiteRT's reference kernels' within the
    precision's tolerance."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import specialize
    from delegate_runtime.gpu.opencl.launch import Buf, Const, Counters, Scratch

    built = float_block((5, 6), 16, 4)()
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    session = check_against_litert(built.model, built.inputs, precision, runs=2)
    ex = session.executors[0]
    assert ex.arena.whole and ex.arena.sub_buffers == 0
    copies = [launch.copy_args for launch in ex.launches]
    assert all(c is not None and c.offsets for c in copies)
    in_arena = (Buf, Const, Counters, Scratch)
    for launch, c in zip(ex.launches, copies, strict=True):
        assert not any(isinstance(launch.args[p], in_arena) for p in c.kept), launch.kernel
    assert max(len(c.offsets) for c in copies) > specialize.OFFSETS_PER_PARAM
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "0")
    generic = GpuSession(read_model(built.model), precision, log=io.StringIO())
    assert not generic.executors[0].arena.whole
    for a, b in zip(session.invoke(built.inputs), generic.invoke(built.inputs), strict=True):
        np.testing.assert_array_equal(a, b)
