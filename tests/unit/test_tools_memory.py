"""Measured memory: /proc figures and the peak monitor see a real allocation."""

from __future__ import annotations

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


def test_rss_sees_a_touched_allocation():
    before = rss_bytes()
    block = np.ones(64 * MB, np.uint8)  # touched: resident
    after = rss_bytes()
    assert after - before >= 48 * MB
    assert hwm_bytes() >= after
    del block


def test_peak_monitor_catches_a_short_lived_peak():
    with PeakMonitor(interval_s=0.005) as monitor:
        start = rss_bytes()
        block = np.ones(64 * MB, np.uint8)
        time.sleep(0.05)
        del block
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
