"""The simulated phone's log daemon: its ring buffers (main, system, crash, ...) and the
`threadtime` line logcat prints for an entry.

A phone's buffers are kept beside it (`for_phone`), not on it: entries are what the
phone's processes logged (debuggerd's crash report, above all).
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

#: logd's buffers; `default` is what logcat reads and clears without -b (Android 7+).
BUFFERS = ("main", "radio", "events", "system", "crash", "stats", "security", "kernel")
DEFAULT = ("main", "system", "crash")
#: Priorities as logcat prints them, lowest first (S: silent, only in filters).
PRIORITIES = "VDIWEF"
#: The most entries kept per phone (a ring: the oldest go first).
MAX_ENTRIES = 20000


@dataclass(frozen=True)
class Entry:
    at: float  #: Unix time
    pid: int
    tid: int
    priority: str  #: one of PRIORITIES
    tag: str
    message: str
    buffer: str


class LogBuffers:
    """One phone's log entries, across its buffers, in the order they were written."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.lock = threading.Lock()

    def log(
        self, buffer: str, priority: str, tag: str, message: str, pid: int, tid: int | None = None
    ) -> None:
        """Append one entry per line of `message` (as liblog splits nothing, logcat shows
        one line each: the same entry header repeated)."""
        now = time.time()
        with self.lock:
            for line in message.split("\n"):
                self.entries.append(Entry(now, pid, tid or pid, priority, tag, line, buffer))
            del self.entries[: max(0, len(self.entries) - MAX_ENTRIES)]

    def clear(self, buffers: tuple[str, ...]) -> None:
        with self.lock:
            self.entries = [e for e in self.entries if e.buffer not in buffers]

    def read(self, buffers: tuple[str, ...]) -> list[Entry]:
        with self.lock:
            return [e for e in self.entries if e.buffer in buffers]


_BY_PHONE: weakref.WeakKeyDictionary[Any, LogBuffers] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def for_phone(phone: Any) -> LogBuffers:
    """The log buffers of a simulated phone (made empty on first use)."""
    with _LOCK:
        buffers = _BY_PHONE.get(phone)
        if buffers is None:
            buffers = _BY_PHONE[phone] = LogBuffers()
        return buffers


def _stamp(at: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def format_entry(entry: Entry, fmt: str) -> str:
    """One line as `logcat -v FMT` prints it (liblog's logprint.cpp layouts)."""
    p, tag, msg = entry.priority, entry.tag, entry.message
    if fmt == "threadtime":
        return f"{_stamp(entry.at)} {entry.pid:5d} {entry.tid:5d} {p} {tag:<8}: {msg}"
    if fmt == "time":
        return f"{_stamp(entry.at)} {p}/{tag:<8}({entry.pid:5d}): {msg}"
    if fmt == "tag":
        return f"{p}/{tag:<8}: {msg}"
    if fmt == "process":
        return f"{p}({entry.pid:5d}) {msg}  ({tag})"
    if fmt == "raw":
        return msg
    return f"{p}/{tag:<8}({entry.pid:5d}): {msg}"  # brief
