"""host_copy.c: an input's copy shared with helper threads, against numpy's copy, byte for
byte: sizes around its chunks, unaligned ends, callers in several threads
at once, and a forked child that inherits no helper threads. host_copy.py: the helpers
sized from the usable CPUs, the agent's budget and the user's override, and their spin
after a copy only in a back-to-back stream."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from delegate_runtime.gpu.opencl import host_copy, native_library
from delegate_runtime.gpu.switches import DEFAULTS, MAX_COPY_HELPERS
from tests.conftest import require

CHUNK = 32 * 1024
SPIN_US = 500


@pytest.fixture(autouse=True)
def _no_helper_switches(monkeypatch):
    """The tests set the user's override and the agent's budget themselves."""
    monkeypatch.delenv(host_copy.ENV, raising=False)
    monkeypatch.delenv(host_copy.BUDGET_ENV, raising=False)


def usable(monkeypatch, cpus: int) -> None:
    monkeypatch.setattr(host_copy.host_cpus, "usable_cpus", lambda: cpus)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    native_library.forget()
    found = native_library.native_library(tmp_path_factory.mktemp("native"))
    require(
        found is not None,
        f"a C compiler for the hot path's helpers ({native_library.unavailable()})",
    )
    yield found
    native_library.forget()


def source(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def copied(lib, src: np.ndarray, helpers: int, dst_offset: int = 0) -> np.ndarray:
    """src through host_copy into a zeroed buffer at `dst_offset` bytes (unaligned ends),
    with a guard byte either side that must stay zero."""
    room = np.zeros(src.size + dst_offset + 2, np.uint8)
    dst = room[1 + dst_offset : 1 + dst_offset + src.size]
    lib.host_copy(dst.ctypes.data, src.ctypes.data, src.size, CHUNK, helpers, SPIN_US)
    assert room[0] == 0 and room[-1] == 0, "wrote outside the destination"
    return dst


@pytest.mark.parametrize(
    "size", [0, 1, 63, CHUNK - 1, CHUNK, CHUNK + 1, 602_112, 5 * CHUNK + 17, 3_000_001]
)
@pytest.mark.parametrize("helpers", [0, 1, 3])
def test_copy_equals_the_source(lib, size, helpers):
    src = source(size)
    np.testing.assert_array_equal(copied(lib, src, helpers), src)


@pytest.mark.parametrize("size", [15, 64, 602_112, 5 * CHUNK + 17])
@pytest.mark.parametrize("dst_offset", [0, 1, 8, 15])
def test_copy_equals_the_source_at_any_alignment(lib, size, dst_offset):
    src = source(size, seed=dst_offset)
    np.testing.assert_array_equal(copied(lib, src, 3, dst_offset), src)


def test_copies_in_a_row_each_see_their_own_source(lib):
    """Helpers left spinning by one copy take the next one's pointers, not stale ones."""
    dst = np.zeros(602_112, np.uint8)
    for seed in range(50):
        src = source(dst.size, seed)
        lib.host_copy(dst.ctypes.data, src.ctypes.data, src.size, CHUNK, 3, SPIN_US)
        assert np.array_equal(dst, src), f"copy {seed} differs"


def test_callers_in_several_threads_at_once(lib):
    """Sessions invoked from several threads: one copy shares the helpers, the others copy
    alone; every destination ends equal to its own source."""
    failures: list[str] = []

    def caller(k: int) -> None:
        src, dst = source(700_000, seed=100 + k), np.zeros(700_000, np.uint8)
        for i in range(40):
            dst[:] = 0
            lib.host_copy(dst.ctypes.data, src.ctypes.data, src.size, CHUNK, 2 + i % 2, SPIN_US)
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
        ctypes.c_uint32(SPIN_US),
    )
    queue.put(bool(np.array_equal(dst, src)))


def test_a_forked_child_copies_without_the_parents_helpers(lib):
    """fork copies the state that says helpers run, not the threads: the child's caller
    copies every chunk itself instead of waiting for helpers that do not exist."""
    copied(lib, source(602_112), helpers=3)  # the parent's helpers started
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

    usable(monkeypatch, 2)
    few = host_copy.Settings.current()
    assert few.helpers == 0
    big = np.arange(DEFAULTS.copy_min_bytes, dtype=np.float32)
    out = np.zeros_like(big)
    host_copy.copy(Refusing(), out, big, few)
    np.testing.assert_array_equal(out, big)


def test_a_large_copy_goes_through_the_helpers(lib, monkeypatch):
    usable(monkeypatch, 16)
    how = host_copy.Settings.current()
    assert how.helpers == min(DEFAULTS.copy_helpers_default, 4)
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
    usable(monkeypatch, 64)
    monkeypatch.setenv(host_copy.ENV, "0")
    assert host_copy.Settings.current().helpers == 0
    monkeypatch.setenv(host_copy.ENV, "2")
    assert host_copy.Settings.current().helpers == 2
    monkeypatch.setenv(host_copy.ENV, "15")  # host_copy.c's most
    assert host_copy.Settings.current().helpers == 15
    usable(monkeypatch, 8)  # a quarter of the CPUs at most
    assert host_copy.Settings.current().helpers == 2


@pytest.mark.parametrize("value", ["many", "-1", "16", "99999", "2.5"])
def test_a_helper_count_it_cannot_take_is_a_usage_error(monkeypatch, value):
    from delegate_runtime.errors import UsageError

    monkeypatch.setenv(host_copy.ENV, value)
    with pytest.raises(UsageError, match=r"DEVICEFARM_GPU_COPY_HELPERS must be .* from 0 to 15"):
        host_copy.Settings.current()


@pytest.mark.parametrize(
    ("cpus", "env", "budget", "plan"),
    [
        (16, None, None, (3, "default", "3 (16 usable CPUs: a quarter, at most 3)")),
        (8, None, None, (2, "default", "2 (8 usable CPUs: a quarter)")),
        (2, None, None, (0, "default", "0 (2 usable CPUs)")),
        (
            16,
            None,
            "14",
            (
                3,
                "default",
                "3 (16 usable CPUs: a quarter, at most 3; within the agent's budget of 14)",
            ),
        ),
        (
            16,
            None,
            "1",
            (1, "agent", "1 (16 usable CPUs; the agent's budget beside its other consumers)"),
        ),
        (16, "2", "0", (2, "env", f"2 ({host_copy.ENV}=2; the agent's budget of 0 overridden)")),
        (16, "9", None, (4, "env", f"4 ({host_copy.ENV}=9: a quarter of 16 usable CPUs at most)")),
    ],
)
def test_the_helper_plan_says_how_many_and_why(monkeypatch, cpus, env, budget, plan):
    usable(monkeypatch, cpus)
    for name, value in ((host_copy.ENV, env), (host_copy.BUDGET_ENV, budget)):
        if value is not None:
            monkeypatch.setenv(name, value)
    helpers, source, why = plan
    assert host_copy.helper_plan() == {
        "helpers": helpers,
        "usable_cpus": cpus,
        "source": source,
        "why": why,
    }
    assert host_copy.Settings.current().helpers == helpers


def test_a_bad_budget_is_a_clear_error(monkeypatch):
    from delegate_runtime.errors import UsageError

    monkeypatch.setenv(host_copy.BUDGET_ENV, "lots")
    with pytest.raises(UsageError, match=host_copy.BUDGET_ENV):
        host_copy.helper_plan()


def test_helpers_are_sized_from_the_cpus_the_process_may_use():
    """A process confined to one CPU of a big machine (os.cpu_count() says 64) starts no
    helper: they would queue for the caller's CPU."""
    code = (
        "import json, os\n"
        f"os.sched_setaffinity(0, {{{min(os.sched_getaffinity(0))}}})\n"
        "os.cpu_count = lambda: 64\n"
        "from delegate_runtime.gpu.opencl import host_copy\n"
        "print(host_copy.Settings.current().helpers)\n"
        "print(json.dumps(host_copy.helper_plan()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (host_copy.ENV, host_copy.BUDGET_ENV)}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True
    )
    lines = out.stdout.splitlines()
    assert lines[:1] == ["0"], out.stderr
    assert out.returncode == 0, out.stderr
    assert json.loads(lines[1]) == {
        "helpers": 0,
        "usable_cpus": 1,
        "source": "default",
        "why": "0 (1 usable CPU)",
    }


class Recording:
    """A native library that records host_copy's arguments and copies nothing."""

    def __init__(self):
        self.calls: list[tuple] = []

    def host_copy(self, *args):
        self.calls.append(args)


def test_helpers_spin_only_after_a_copy_in_a_back_to_back_stream():
    """The spin passed to host_copy.c: SPIN after a copy that came within the spin of the
    one before, none after a longer gap; the helpers take part in every copy."""
    spin_us = 100_000  # long, so that this machine's load never makes quick copies slow
    how = host_copy.Settings(3, DEFAULTS.copy_min_bytes, CHUNK, spin_us)
    src = np.zeros(DEFAULTS.copy_min_bytes, np.uint8)
    dst = np.zeros_like(src)
    native = Recording()
    for gap_s in (0.3, 0, 0, 0.3, 0):
        time.sleep(gap_s)
        host_copy.copy(native, dst, src, how)
    assert [call[5] for call in native.calls] == [0, spin_us, spin_us, 0, spin_us]
    assert {call[4] for call in native.calls} == {3}


def test_copies_far_apart_leave_the_helpers_asleep(lib):
    """CPU time of copies 30 ms apart with a 20 ms spin: the helper sleeps again after
    each instead of spinning 20 ms (10 copies: 200 ms of CPU before, 2 ms now)."""
    how = host_copy.Settings(1, DEFAULTS.copy_min_bytes, CHUNK, 20_000)
    src = source(602_112, seed=5)
    dst = np.zeros_like(src)
    time.sleep(0.05)  # the spins of copies before this test are over
    start = time.process_time()
    for _ in range(10):
        host_copy.copy(lib, dst, src, how)
        time.sleep(0.03)
    spent_s = time.process_time() - start
    np.testing.assert_array_equal(dst, src)
    assert spent_s < 0.05, f"{spent_s * 1000:.0f} ms of CPU for 10 copies"


def test_a_large_hosts_budget_may_exceed_what_one_session_starts(monkeypatch):
    from delegate_runtime.errors import DevicefarmError

    usable(monkeypatch, 64)
    monkeypatch.setenv(host_copy.BUDGET_ENV, "62")  # 64 CPUs, one GPU consumer
    assert host_copy.helper_plan()["helpers"] <= MAX_COPY_HELPERS
    monkeypatch.setenv(host_copy.BUDGET_ENV, "-3")
    with pytest.raises(DevicefarmError, match=host_copy.BUDGET_ENV):
        host_copy.helper_plan()
