"""Raising an exception in another thread of this process, inside a region it marked.

A job run on a thread (worker_agent.group) cannot be stopped by a signal (CPython runs
signal handlers on the main thread only) nor killed (a thread is not a process). Instead
the thread marks the block that may be interrupted (`region`), and another thread raises an
exception class in it (`interrupt`: CPython's PyThreadState_SetAsyncExc). The exception
lands at the thread's next Python instruction: a blocking C call (a long `time.sleep`, a
read without a timeout) ends first. Leaving the region clears one not yet delivered, so it
never lands in the code after the block.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator


def raise_in(ident: int, exc_type: type[BaseException] | None) -> bool:
    """Ask thread `ident` to raise `exc_type` (None: forget one asked for and not yet
    raised); whether that thread exists."""
    obj = ctypes.py_object(exc_type) if exc_type is not None else None
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), obj) == 1


class Interruptible:
    """One thread's region that other threads may interrupt with an exception class."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ident: int | None = None

    @contextlib.contextmanager
    def region(self) -> Iterator[None]:
        """The calling thread's block that `interrupt` may raise into."""
        with self._lock:
            self._ident = threading.get_ident()
        try:
            yield
        finally:
            with self._lock:
                self._ident = None
                raise_in(threading.get_ident(), None)  # one asked for too late is dropped

    def interrupt(self, exc_type: type[BaseException]) -> bool:
        """Raise `exc_type` in the region's thread; False when no thread is inside it."""
        with self._lock:
            if self._ident is None:
                return False
            return raise_in(self._ident, exc_type)
