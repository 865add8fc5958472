"""Measured memory: process RSS from /proc/self/status and a periodic peak monitor.

Figures are read from the kernel, never estimated. Where /proc is missing (macOS,
Windows) the resident size falls back to `resource.getrusage` (the peak only).
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass

#: How often the peak monitor samples the resident size (TFLite's default is 50 ms).
MONITOR_INTERVAL_S = 0.05
BYTES_PER_MB = 1024 * 1024  #: TFLite's "MB" is KiB / 1024

_STATUS = "/proc/self/status"


def _status_bytes(field: str) -> int | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # the kernel reports kB
    except OSError:
        return None
    return None


def _rusage_peak_bytes() -> int | None:
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # NOTE: Linux reports ru_maxrss in KiB, macOS in bytes.
    return int(peak) if os.uname().sysname == "Darwin" else int(peak) * 1024


def rss_bytes() -> int | None:
    """Current resident set size of this process (VmRSS), or None where unknown."""
    value = _status_bytes("VmRSS")
    return value if value is not None else _rusage_peak_bytes()


def hwm_bytes() -> int | None:
    """Peak resident set size of this process so far (VmHWM), or None where unknown."""
    value = _status_bytes("VmHWM")
    return value if value is not None else _rusage_peak_bytes()


class PeakMonitor:
    """A daemon thread that samples RSS every `interval_s`; `peak_bytes` is the largest.

    Use as a context manager; the first sample is taken on entry, the last on exit.
    """

    def __init__(self, interval_s: float = MONITOR_INTERVAL_S):
        self.interval_s = interval_s
        self.peak_bytes: int | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        value = rss_bytes()
        if value is not None:
            self.samples += 1
            self.peak_bytes = value if self.peak_bytes is None else max(self.peak_bytes, value)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> PeakMonitor:
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="peak-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> int | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        return self.peak_bytes

    def __enter__(self) -> PeakMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class MemoryReport:
    """Memory figures of one benchmark. MB figures are MiB, as TFLite prints them."""

    init_mb: float | None = None  #: RSS after initialisation minus RSS at the start
    overall_mb: float | None = None  #: RSS after the timed runs minus RSS at the start
    peak_mb: float | None = None  #: largest RSS sampled by the monitor (absolute)
    host_start_bytes: int | None = None
    host_init_bytes: int | None = None
    host_end_bytes: int | None = None
    host_peak_bytes: int | None = None  #: the monitor's peak, else VmHWM at the end
    device_bytes: int | None = None  #: device memory the session holds, when it says

    def to_dict(self) -> dict:
        return asdict(self)


def delta_mb(later: int | None, start: int | None) -> float | None:
    """(later - start) in MiB, or None when either is unknown."""
    if later is None or start is None:
        return None
    return (later - start) / BYTES_PER_MB


def session_device_bytes(session: object) -> int | None:
    """Device bytes the session reports (`memory_bytes`, `device_memory_bytes`), else None."""
    for attr in ("memory_bytes", "device_memory_bytes"):
        value = getattr(session, attr, None)
        if callable(value):
            value = value()
        if isinstance(value, (int, float)):
            return int(value)
    return None
