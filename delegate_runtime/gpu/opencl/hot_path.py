"""The inference hot path: a partition's launches and copies through OpenCL's C API
(capi.py), without event objects.

pyopencl returns an event from every enqueue, and NVIDIA's driver spends microseconds
creating each one; with 30 launches per inference that is most of the host's time. Here a
partition's launches are prepared once (kernel handle, work sizes as C arrays) and each
inference enqueues them with no event, through the C launch loop (launch_loop.c, in the
native library: native_library.py) where it was built, else a Python loop of the same
calls. The handles belong to pyopencl objects, which the caller keeps alive for as long as
it uses them.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import host_copy
from .capi import CLCallError

_i32 = ctypes.c_int32
_vp = ctypes.c_void_p
_size = ctypes.c_size_t
_NO_EVENTS = ctypes.c_uint32(0)  #: an empty wait list's length


def declare_loop(native: ctypes.CDLL) -> None:
    """Declare launch_loop.c's entry point in the native library (native_library.py): its
    result only; it is called with ready ctypes objects."""
    native.enqueue_launches.restype = _i32


def _unchecked(lib: ctypes.CDLL, name: str) -> Any:
    """A second handle on `name` with no argtypes, called with ready ctypes objects only:
    the call skips ctypes' conversion of each argument. On the H200's host that is 1.5 us
    of the 13 a launch costs (docs/notebook/09-2026-11-25-what-a-launch-costs-the-host-a-squeeze-excite.md;
    `bench/diag_gpu.py --only enqueue`)."""
    fn = lib[name]  # indexing makes a new function object; lib.name's keeps its argtypes
    fn.restype = _i32
    return fn


class HotPath:
    """One queue's fixed launch list, plus the copies in and out around it.

    `loop` is "c" when given the native library (`native_library.native_library()`), else
    "python": the same calls in the same order either way, and the same errors (the call
    and the launch).
    The C loop saves the host 1.5-2 us a launch on the H200's hosts
    (docs/notebook/10-2026-11-27-the-launch-loop-in-c-how-the-host-waits.md)."""

    def __init__(
        self,
        lib: ctypes.CDLL,
        queue: Any,
        launches: list[tuple[Any, tuple, Any]],
        native: ctypes.CDLL | None = None,
        copy_settings: host_copy.Settings | None = None,
    ):
        self.lib = lib
        self.queue = _vp(queue.int_ptr)
        self._enqueue = _unchecked(lib, "clEnqueueNDRangeKernel")
        self._flush = _unchecked(lib, "clFlush")
        #: (kernel, dimensions, global size, local size or None), each a ctypes object
        self.launches = []
        for kernel, gsize, lsize in launches:
            gws = (_size * len(gsize))(*gsize)
            lws = (_size * len(lsize))(*lsize) if lsize else None
            self.launches.append((_vp(kernel.int_ptr), ctypes.c_uint32(len(gsize)), gws, lws))
        self.native = native
        #: the input copies' helpers and constants (the session's switches; None: the
        #: environment's now)
        self.copy_settings = copy_settings or host_copy.Settings.current()
        self._native = self._native_args(native) if native is not None else None
        self.loop = "c" if self._native is not None else "python"

    def copy_in(self, dst: np.ndarray, src: np.ndarray) -> None:
        """An input into host memory the device reads (host_copy.py: C helper threads)."""
        host_copy.copy(self.native, dst, src, self.copy_settings)

    def _native_args(self, native: ctypes.CDLL) -> tuple[Any, list[Any]]:
        """launch_loop.c's function and its arguments, each a ready ctypes object."""
        n = len(self.launches)
        glob, loc = (_size * (3 * n))(), (_size * (3 * n))()
        for i, (_, dim, gws, lws) in enumerate(self.launches):
            glob[3 * i : 3 * i + dim.value] = list(gws)
            if lws is not None:
                loc[3 * i : 3 * i + dim.value] = list(lws)
        self._flush_every = ctypes.c_int32(1)
        self._failed_at, self._in_flush = ctypes.c_int32(-1), ctypes.c_int32(0)
        args = [
            _vp(ctypes.cast(self._enqueue, _vp).value),
            _vp(ctypes.cast(self._flush, _vp).value),
            self.queue,
            ctypes.c_int32(n),
            (_vp * n)(*[k.value for k, _, _, _ in self.launches]),
            (ctypes.c_uint32 * n)(*[d.value for _, d, _, _ in self.launches]),
            glob,
            loc,
            (ctypes.c_uint8 * n)(*[lws is not None for _, _, _, lws in self.launches]),
            self._flush_every,
            ctypes.byref(self._failed_at),
            ctypes.byref(self._in_flush),
        ]
        return native.enqueue_launches, args

    def write(self, buffer: Any, host: np.ndarray, offset: int = 0) -> None:
        """Non-blocking copy of `host` to `offset` bytes into `buffer` (`host` kept alive by
        the caller until `finish`)."""
        err = self.lib.clEnqueueWriteBuffer(
            self.queue, _vp(buffer.int_ptr), 0, offset, host.nbytes, host.ctypes.data, 0, None, None
        )
        if err:
            raise CLCallError(err, "clEnqueueWriteBuffer")

    def read(self, buffer: Any, host: np.ndarray, offset: int = 0) -> None:
        """Non-blocking copy from `offset` bytes into `buffer` into `host`; its contents are
        valid after `finish`."""
        err = self.lib.clEnqueueReadBuffer(
            self.queue, _vp(buffer.int_ptr), 0, offset, host.nbytes, host.ctypes.data, 0, None, None
        )
        if err:
            raise CLCallError(err, "clEnqueueReadBuffer")

    def launch(self, i: int) -> None:
        """Launch i alone, unflushed (diagnostics time the driver's call with it)."""
        kernel, dim, gws, lws = self.launches[i]
        err = self._enqueue(self.queue, kernel, dim, None, gws, lws, _NO_EVENTS, None, None)
        if err:
            raise CLCallError(err, "clEnqueueNDRangeKernel")

    def enqueue(self, flush_every: int) -> None:
        """Every launch, in order, flushing the queue every `flush_every` launches."""
        if self._native is not None:
            fn, args = self._native
            self._flush_every.value = flush_every
            err = fn(*args)
            if err:
                call = "clFlush" if self._in_flush.value else "clEnqueueNDRangeKernel"
                raise CLCallError(err, f"{call} (launch {self._failed_at.value})")
            return
        enqueue, flush, q, none = self._enqueue, self._flush, self.queue, _NO_EVENTS
        for i, (kernel, dim, gws, lws) in enumerate(self.launches):
            err = enqueue(q, kernel, dim, None, gws, lws, none, None, None)
            if err:
                raise CLCallError(err, f"clEnqueueNDRangeKernel (launch {i})")
            if i % flush_every == 0 and (err := flush(q)):
                raise CLCallError(err, f"clFlush (launch {i})")

    def finish(self) -> None:
        err = self.lib.clFinish(self.queue)
        if err:
            raise CLCallError(err, "clFinish")
