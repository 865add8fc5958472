"""The inference hot path through OpenCL's C API: copies and launches without event objects.

pyopencl returns an event from every enqueue, and NVIDIA's driver spends microseconds
creating each one; with 30 launches per inference that is most of the host's time. Here a
partition's launches are prepared once (kernel handle, work sizes as C arrays) and each
inference enqueues them with no event. The handles belong to pyopencl objects, which the
caller keeps alive for as long as it uses them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from typing import Any

import numpy as np

from . import host_copy

_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()
_i32 = ctypes.c_int32
_vp = ctypes.c_void_p
_size = ctypes.c_size_t
_size_p = ctypes.POINTER(ctypes.c_size_t)
_NO_EVENTS = ctypes.c_uint32(0)  #: an empty wait list's length


class CLCallError(RuntimeError):
    """An OpenCL call returned `code` (a negative CL status)."""

    def __init__(self, code: int, call: str):
        super().__init__(f"{call} returned {code}")
        self.code = code


def opencl_library() -> ctypes.CDLL | None:
    """The OpenCL ICD loader pyopencl itself links (its wheel bundles one), else the
    system's; None when neither loads, and callers then stay on pyopencl."""
    global _lib
    with _lib_lock:
        if _lib is None:
            import pyopencl

            bundled = glob.glob(
                os.path.join(os.path.dirname(pyopencl.__file__), ".libs", "libOpenCL*")
            )
            name = sorted(bundled)[0] if bundled else ctypes.util.find_library("OpenCL")
            if name is None:
                return None
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                return None
            _declare(lib)
            _lib = lib
        return _lib


def _declare(lib: ctypes.CDLL) -> None:
    lib.clEnqueueNDRangeKernel.argtypes = [_vp, _vp, ctypes.c_uint32, _size_p, _size_p, _size_p]
    lib.clEnqueueNDRangeKernel.argtypes += [ctypes.c_uint32, _vp, _vp]
    copy = [_vp, _vp, ctypes.c_uint32, _size, _size, _vp, ctypes.c_uint32, _vp, _vp]
    lib.clEnqueueWriteBuffer.argtypes = copy
    lib.clEnqueueReadBuffer.argtypes = copy
    lib.clFlush.argtypes = [_vp]
    lib.clFinish.argtypes = [_vp]
    for fn in ("clEnqueueNDRangeKernel", "clEnqueueWriteBuffer", "clEnqueueReadBuffer"):
        getattr(lib, fn).restype = _i32
    lib.clFlush.restype = _i32
    lib.clFinish.restype = _i32
    # building programs (build_from_source, build_from_binary, program_binary)
    lib.clCreateProgramWithSource.restype = _vp
    lib.clCreateProgramWithBinary.restype = _vp
    lib.clBuildProgram.restype = _i32
    lib.clGetProgramInfo.restype = _i32


#: clGetProgramInfo's CL_PROGRAM_BINARY_SIZES and CL_PROGRAM_BINARIES
_BINARY_SIZES, _BINARIES = ctypes.c_uint32(0x1165), ctypes.c_uint32(0x1166)


def build_from_source(lib: ctypes.CDLL, ctx: Any, device: Any, source: str, options: str):
    """A pyopencl Program made from `source` and built for `device`, and clBuildProgram's
    status (0: built); `build_from_binary` likewise from a program binary. Through the C
    API because ctypes lets other Python threads run during the call, where pyopencl holds
    the interpreter for all of it, and a lab agent's heartbeat thread with it (its devices
    went offline while PoCL compiled)."""
    text = source.encode()
    status = _i32(0)
    handle = lib.clCreateProgramWithSource(
        _vp(ctx.int_ptr),
        ctypes.c_uint32(1),
        (ctypes.c_char_p * 1)(text),
        (_size * 1)(len(text)),
        ctypes.byref(status),
    )
    return _build(lib, handle, status, device, options, "clCreateProgramWithSource")


def build_from_binary(lib: ctypes.CDLL, ctx: Any, device: Any, binary: bytes, options: str):
    """As build_from_source, from a binary that clGetProgramInfo gave for this device."""
    status, binary_status = _i32(0), _i32(0)
    handle = lib.clCreateProgramWithBinary(
        _vp(ctx.int_ptr),
        ctypes.c_uint32(1),
        (_vp * 1)(device.int_ptr),
        (_size * 1)(len(binary)),
        (ctypes.c_char_p * 1)(binary),
        ctypes.byref(binary_status),
        ctypes.byref(status),
    )
    return _build(lib, handle, status, device, options, "clCreateProgramWithBinary")


def _build(lib: ctypes.CDLL, handle: Any, status: Any, device: Any, options: str, made_by: str):
    import pyopencl as cl

    if status.value or not handle:
        raise CLCallError(status.value, made_by)
    program = cl.Program.from_int_ptr(handle, retain=False)  # owns the handle now
    err = lib.clBuildProgram(
        _vp(handle), ctypes.c_uint32(1), (_vp * 1)(device.int_ptr), options.encode(), None, None
    )
    return program, err


def program_binary(lib: ctypes.CDLL, program: Any) -> bytes:
    """The built program's binary for its one device (b"" if the driver gives none). On
    PoCL this compiles every kernel (about 90 s cold on a 2-core machine): through the C
    API, so other threads run meanwhile."""
    info = lib.clGetProgramInfo
    handle = _vp(program.int_ptr)
    size = (_size * 1)()
    err = info(handle, _BINARY_SIZES, _size(ctypes.sizeof(size)), size, None)
    if err:
        raise CLCallError(err, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)")
    if not size[0]:
        return b""
    data = ctypes.create_string_buffer(size[0])
    pointers = (ctypes.c_char_p * 1)(ctypes.cast(data, ctypes.c_char_p))
    err = info(handle, _BINARIES, _size(ctypes.sizeof(pointers)), pointers, None)
    if err:
        raise CLCallError(err, "clGetProgramInfo(CL_PROGRAM_BINARIES)")
    return data.raw


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

    `loop` is "c" when given the C loop (`native_loop.native_loop()`), else "python": the
    same calls in the same order either way, and the same errors (the call and the launch).
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
