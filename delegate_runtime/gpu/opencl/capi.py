"""OpenCL's C API through ctypes: the library pyopencl links, the calls' signatures, their
failures (CLCallError), and program builds that let other Python threads run.

The hot path (hot_path.py) enqueues through it without pyopencl's event objects; the
program's builds (program.py, build_workers.py) call it so that a build does not hold the
interpreter. The handles passed belong to pyopencl objects, which callers keep alive.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from typing import Any

_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()
_i32 = ctypes.c_int32
_vp = ctypes.c_void_p
_size = ctypes.c_size_t
_size_p = ctypes.POINTER(ctypes.c_size_t)


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
    lib.clCreateContext.restype = _vp
    lib.clCreateContext.argtypes = [_vp, ctypes.c_uint32, _vp, _vp, _vp, ctypes.POINTER(_i32)]
    # kernels (raw_kernel.py)
    lib.clCreateKernel.restype = _vp
    lib.clCreateKernel.argtypes = [_vp, ctypes.c_char_p, ctypes.POINTER(_i32)]
    lib.clSetKernelArg.restype = _i32
    lib.clSetKernelArg.argtypes = [_vp, ctypes.c_uint32, ctypes.c_size_t, _vp]
    lib.clReleaseKernel.restype = _i32
    lib.clReleaseKernel.argtypes = [_vp]


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


def create_context(lib: ctypes.CDLL, device: Any) -> Any:
    """A pyopencl Context for `device`, made through the C API: NVIDIA's driver takes
    100-250 ms over it, and pyopencl's constructor held the GIL for all of it, so a thread
    making the context stopped the session's lowering beside it."""
    import pyopencl as cl

    status = _i32(0)
    handle = lib.clCreateContext(
        None, ctypes.c_uint32(1), (_vp * 1)(device.int_ptr), None, None, ctypes.byref(status)
    )
    if status.value or not handle:
        raise CLCallError(status.value, "clCreateContext")
    return cl.Context.from_int_ptr(handle, retain=False)  # owns the handle now


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
