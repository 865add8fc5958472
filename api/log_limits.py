"""A log a flood cannot grow by megabytes: lines of one kind from one client beyond a few
per window are counted, and one line says how many ("… and 14230 more in the last 60 s").

A line's kind: its `summary_key` (logging's `extra`), else an access line's client address
and status, else its logger and message template. A summary is written when the next line
of any kind is logged after its window closed (a flood that stopped is summarised then).
"""

from __future__ import annotations

import collections
import copy
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from .serve_settings import ServeSettings

#: The logger summaries are written to.
SUMMARY_LOGGER = "api.log_limits"
#: Kinds remembered at most; the least recent is summarised and forgotten first.
MAX_KINDS = 10_000
#: s between two sweeps for windows that closed
SWEEP_S = 1.0


@dataclass
class _Window:
    start: float
    example: str
    levelno: int
    passed: int = 0
    held: int = 0


def kind_of(record: logging.LogRecord) -> Hashable:
    """What makes two lines 'the same' for the summary."""
    key = getattr(record, "summary_key", None)
    if key is not None:
        return (record.name, key)
    args = record.args
    if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
        client, status = str(args[0]).rpartition(":")[0] or str(args[0]), args[4]
        return (record.name, client, status)
    return (record.name, record.msg)


class RepeatSummary(logging.Filter):
    """Lets `repeats` lines of each kind through per `window_s`, counts the rest, and logs
    one summary line per kind whose window closed with lines held back."""

    def __init__(
        self,
        repeats: int = 5,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__()
        self.repeats, self.window_s, self.clock = repeats, window_s, clock
        self._windows: collections.OrderedDict[Hashable, _Window] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._swept = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "summary_of", None) is not None:
            return True
        with self._lock:
            now = self.clock()
            closed = self._sweep(now)
            kind = kind_of(record)
            window = self._windows.get(kind)
            if window is None or now - window.start >= self.window_s:
                if window is not None and window.held:
                    closed.append((kind, window))
                window = _Window(now, _message(record), record.levelno)
                self._windows[kind] = window
            self._windows.move_to_end(kind)
            while len(self._windows) > MAX_KINDS:
                old_kind, old = self._windows.popitem(last=False)
                if old.held:
                    closed.append((old_kind, old))
            allowed = window.passed < self.repeats
            if allowed:
                window.passed += 1
            else:
                window.held += 1
        for old_kind, old in closed:  # outside the lock: the summary comes back through here
            self._summarise(old_kind, old, now)
        return allowed

    def flush(self) -> None:
        """Summarise every kind with lines held back now (e.g. at shutdown)."""
        with self._lock:
            held = [(k, w) for k, w in self._windows.items() if w.held]
            self._windows.clear()
        for kind, window in held:
            self._summarise(kind, window, self.clock())

    def _sweep(self, now: float) -> list[tuple[Hashable, _Window]]:
        """Windows that closed (taken out), at most once every SWEEP_S."""
        if now - self._swept < SWEEP_S:
            return []
        self._swept = now
        closed = [(k, w) for k, w in self._windows.items() if now - w.start >= self.window_s]
        for kind, _ in closed:
            del self._windows[kind]
        return [(k, w) for k, w in closed if w.held]

    def _summarise(self, kind: Hashable, window: _Window, now: float) -> None:
        record = logging.LogRecord(
            SUMMARY_LOGGER, window.levelno, __file__, 0,
            "… and %d more in the last %.0f s like: %s",
            (window.held, now - window.start, window.example), None,
        )  # fmt: skip
        record.summary_of = kind
        logging.getLogger(SUMMARY_LOGGER).handle(record)


def _message(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string is still a kind of line
        text = str(record.msg)
    return text if len(text) <= 300 else text[:300] + "…"


def log_config(settings: ServeSettings) -> dict[str, Any]:
    """uvicorn's logging configuration, with every handler behind one RepeatSummary and the
    API's own loggers (and asyncio's, and the root's warnings) on its handlers."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {
        "repeats": {
            "()": RepeatSummary,
            "repeats": settings.log_repeats,
            "window_s": settings.log_window_s,
        }
    }
    for handler in config["handlers"].values():
        handler["filters"] = ["repeats"]
    quiet = {"handlers": ["default"], "propagate": False}
    config["loggers"] |= {
        "api": quiet | {"level": "INFO"},
        SUMMARY_LOGGER: quiet | {"level": "INFO"},
        "asyncio": quiet | {"level": "WARNING"},
    }
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    return config
