"""host_copy.c: an input's copy shared with helper threads, against numpy's copy, byte for
byte: sizes around its chunks, unaligned ends, streaming stores, callers in several threads
at once, and a forked child that inherits no helper threads."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from delegate_runtime.gpu.opencl import host_copy, native_loop
from tests.conftest import require

CHUNK = 32 * 1024
SPIN_US = 500


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    native_loop.forget()
    found = native_loop.native_loop(tmp_path_factory.mktemp("native"))
    require(
        found is not None, f"a C compiler for the hot path's helpers ({native_loop.unavailable()})"
    )
    yield found
    native_loop.forget()


def source(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def copied(lib, src: np.ndarray, helpers: int, streaming: bool, dst_offset: int = 0) -> np.ndarray:
    """src through host_copy into a zeroed buffer at `dst_offset` bytes (unaligned ends),
    with a guard byte either side that must stay zero."""
    room = np.zeros(src.size + dst_offset + 2, np.uint8)
    dst = room[1 + dst_offset : 1 + dst_offset + src.size]
    lib.host_copy(dst.ctypes.data, src.ctypes.data, src.size, CHUNK, helpers, streaming, SPIN_US)
    assert room[0] == 0 and room[-1] == 0, "wrote outside the destination"
    return dst


@pytest.mark.parametrize(
    "size", [0, 1, 63, CHUNK - 1, CHUNK, CHUNK + 1, 602_112, 5 * CHUNK + 17, 3_000_001]
)
@pytest.mark.parametrize("helpers", [0, 1, 3])
def test_copy_equals_the_source(lib, size, helpers):
    src = source(size)
    np.testing.assert_array_equal(copied(lib, src, helpers, streaming=False), src)


@pytest.mark.parametrize("size", [15, 64, 602_112, 5 * CHUNK + 17])
@pytest.mark.parametrize("dst_offset", [0, 1, 8, 15])
def test_streaming_copy_equals_the_source_at_any_alignment(lib, size, dst_offset):
    src = source(size, seed=dst_offset)
    np.testing.assert_array_equal(copied(lib, src, 3, True, dst_offset), src)


def test_copies_in_a_row_each_see_their_own_source(lib):
    """Helpers left spinning by one copy take the next one's pointers, not stale ones."""
    dst = np.zeros(602_112, np.uint8)
    for seed in range(50):
        src = source(dst.size, seed)
        lib.host_copy(dst.ctypes.data, src.ctypes.data, src.size, CHUNK, 3, 0, SPIN_US)
        assert np.array_equal(dst, src), f"copy {seed} differs"


def test_callers_in_several_threads_at_once(lib):
    """Sessions invoked from several threads: one copy shares the helpers, the others copy
    alone; every destination ends equal to its own source."""
    failures: list[str] = []

    def caller(k: int) -> None:
        src, dst = source(700_000, seed=100 + k), np.zeros(700_000, np.uint8)
        for i in range(40):
            dst[:] = 0
            lib.host_copy(dst.ctypes.data, src.ctypes.data, src.size, CHUNK, 2, i % 2, SPIN_US)
            if not np.array_equal(dst, src):
                failures.append(f"thread {k} copy {i}")

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a copy never finished"
    assert failures == []


def _copy_in_child(path: str, queue) -> None:
    import ctypes

    child = ctypes.CDLL(path)
    src = source(602_112, seed=7)
    dst = np.zeros_like(src)
    child.host_copy.restype = ctypes.c_uint32
    child.host_copy(
        ctypes.c_void_p(dst.ctypes.data),
        ctypes.c_void_p(src.ctypes.data),
        ctypes.c_size_t(src.size),
        ctypes.c_size_t(CHUNK),
        ctypes.c_int32(3),
        ctypes.c_int32(0),
        ctypes.c_uint32(SPIN_US),
    )
    queue.put(bool(np.array_equal(dst, src)))


def test_a_forked_child_copies_without_the_parents_helpers(lib):
    """fork copies the state that says helpers run, not the threads: the child's caller
    copies every chunk itself instead of waiting for helpers that do not exist."""
    copied(lib, source(602_112), helpers=3, streaming=False)  # the parent's helpers started
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_copy_in_child, args=(lib._name, queue))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child's copy never finished")
    assert queue.get(timeout=5) is True


def test_small_copies_and_machines_of_few_cores_stay_with_numpy(lib, monkeypatch):
    """Below MIN_BYTES, or with no helper to spare (a quarter of the cores), numpy copies:
    the C path is never called."""

    class Refusing:
        def host_copy(self, *args):
            raise AssertionError("the C copy was called")

    src = np.arange(1000, dtype=np.float32)
    dst = np.zeros_like(src)
    host_copy.copy(Refusing(), dst, src, host_copy.Settings.current())
    np.testing.assert_array_equal(dst, src)

    monkeypatch.setattr(host_copy.os, "cpu_count", lambda: 2)
    few = host_copy.Settings.current()
    assert few.helpers == 0
    big = np.arange(host_copy.MIN_BYTES, dtype=np.float32)
    out = np.zeros_like(big)
    host_copy.copy(Refusing(), out, big, few)
    np.testing.assert_array_equal(out, big)


def test_a_large_copy_goes_through_the_helpers(lib, monkeypatch):
    monkeypatch.setattr(host_copy.os, "cpu_count", lambda: 16)
    how = host_copy.Settings.current()
    assert how.helpers == min(host_copy.HELPERS, 4)
    calls = []

    class Counting:
        def host_copy(self, *args):
            calls.append(args)
            return lib.host_copy(*args)

    src = np.random.default_rng(3).standard_normal((1, 224, 224, 3)).astype(np.float32)
    dst = np.zeros_like(src)
    host_copy.copy(Counting(), dst, src, how)
    np.testing.assert_array_equal(dst, src)
    assert len(calls) == 1 and calls[0][2] == src.nbytes


def test_the_environment_sets_the_helpers(monkeypatch):
    monkeypatch.setattr(host_copy.os, "cpu_count", lambda: 64)
    monkeypatch.setenv(host_copy.ENV, "0")
    assert host_copy.Settings.current().helpers == 0
    monkeypatch.setenv(host_copy.ENV, "2")
    assert host_copy.Settings.current().helpers == 2
    monkeypatch.setenv(host_copy.ENV, "99")  # still a quarter of the cores at most
    assert host_copy.Settings.current().helpers == 16
    monkeypatch.setenv(host_copy.ENV, "many")
    with pytest.raises(ValueError, match="DEVICEFARM_GPU_COPY_HELPERS"):
        host_copy.Settings.current()
