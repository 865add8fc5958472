"""Measured memory: /proc figures and the peak monitor see a real allocation."""

from __future__ import annotations

import mmap
import sys
import time

import numpy as np
import pytest

from delegate_runtime.tools.memory import (
    PeakMonitor,
    delta_mb,
    hwm_bytes,
    rss_bytes,
    session_device_bytes,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

MB = 1024 * 1024


def _touched_block(size: int) -> mmap.mmap:
    """`size` bytes of new pages, all touched: resident. An anonymous map, not malloc, whose
    free lists may hold pages that are resident already (after LiteRT ran, say)."""
    block = mmap.mmap(-1, size)
    np.frombuffer(block, np.uint8)[:] = 1
    return block


def test_rss_sees_a_touched_allocation():
    before = rss_bytes()
    block = _touched_block(64 * MB)
    after = rss_bytes()
    assert after - before >= 48 * MB
    assert hwm_bytes() >= after
    block.close()


def test_peak_monitor_catches_a_short_lived_peak():
    with PeakMonitor(interval_s=0.005) as monitor:
        start = rss_bytes()
        block = _touched_block(64 * MB)
        time.sleep(0.05)
        block.close()
        time.sleep(0.02)
    assert monitor.samples >= 3
    assert monitor.peak_bytes - start >= 48 * MB


def test_delta_mb():
    assert delta_mb(3 * MB, MB) == 2.0
    assert delta_mb(None, MB) is None


def test_session_device_bytes():
    class Gpu:
        memory_bytes = 1234

    class Cpu:
        pass

    assert session_device_bytes(Gpu()) == 1234
    assert session_device_bytes(Cpu()) is None
