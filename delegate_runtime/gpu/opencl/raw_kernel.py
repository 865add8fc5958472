"""A kernel made and given its arguments through OpenCL's C API.

pyopencl's Kernel object generates (and looks up in an on-disk cache) a Python argument
invoker for every kernel it wraps: about 0.3-0.5 ms a kernel, 30-50 ms of a warm start
on the H200 for a model of a hundred launches, all of it holding the GIL. The session's
launches need only a handle with its arguments set once (the hot path enqueues handles,
hot_path.py), so a RawKernel is that handle; `pyopencl` wraps the same handle as a
pyopencl Kernel, made on first use, where pyopencl itself enqueues it (profiling);
`enqueue` launches it once through the C API (persistent kernels' trial runs).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .capi import CLCallError

_vp = ctypes.c_void_p
_i32 = ctypes.c_int32
_size = ctypes.c_size_t


class RawKernel:
    """Kernel `name` of `program` (a pyopencl Program, kept alive with it); `lib` is
    capi.opencl_library(), which declares the calls."""

    def __init__(self, lib: ctypes.CDLL, program: Any, name: str):
        status = _i32(0)
        handle = lib.clCreateKernel(_vp(program.int_ptr), name.encode(), ctypes.byref(status))
        if status.value or not handle:
            raise CLCallError(status.value, f"clCreateKernel({name})")
        self._lib, self._program, self._handle = lib, program, handle
        self.function_name = name
        self._wrapped: Any = None
        self._held: dict[int, Any] = {}  # each argument's value, alive while it is set

    @property
    def int_ptr(self) -> int:
        return self._handle

    @property
    def context(self) -> Any:
        return self._program.context

    @property
    def pyopencl(self) -> Any:
        """The same kernel as a pyopencl Kernel (its arguments as set here)."""
        if self._wrapped is None:
            import pyopencl as cl

            self._wrapped = cl.Kernel.from_int_ptr(self._handle, retain=True)
        return self._wrapped

    def enqueue(self, queue: Any, gsize: tuple[int, ...], lsize: tuple[int, ...] | None) -> None:
        """One launch on `queue` (a pyopencl CommandQueue), no event: clEnqueueNDRangeKernel."""
        dims = len(gsize)
        local = (_size * dims)(*lsize) if lsize else None
        status = self._lib.clEnqueueNDRangeKernel(
            _vp(queue.int_ptr), _vp(self._handle), dims, None, (_size * dims)(*gsize), local, 0,
            None, None,
        )  # fmt: skip
        if status:
            raise CLCallError(status, f"clEnqueueNDRangeKernel({self.function_name})")

    def set_args(self, *args: Any) -> None:
        for index, value in enumerate(args):
            self.set_arg(index, value)

    def set_arg(self, index: int, value: Any) -> None:
        """Argument `index`: a buffer, local memory, None, or a numpy scalar or array (its
        bytes: a vector type is its array)."""
        import pyopencl as cl

        if isinstance(value, cl.MemoryObjectHolder):
            held: Any = _vp(value.int_ptr)
            size, pointer = ctypes.sizeof(_vp), ctypes.byref(held)
        elif isinstance(value, cl.LocalMemory):
            held, size, pointer = None, value.size, None
        elif value is None:
            held, size, pointer = None, ctypes.sizeof(_vp), None
        elif isinstance(value, (np.generic, np.ndarray)):
            held = np.ascontiguousarray(value)
            size, pointer = held.nbytes, _vp(held.ctypes.data)
        else:
            raise TypeError(
                f"{self.function_name} argument {index}: {type(value).__name__} "
                "(give a numpy scalar or array, a buffer, or local memory)"
            )
        status = self._lib.clSetKernelArg(_vp(self._handle), index, size, pointer)
        if status:
            raise CLCallError(status, f"clSetKernelArg({self.function_name}, {index})")
        self._held[index] = held

    def __del__(self) -> None:
        if getattr(self, "_handle", None):
            self._lib.clReleaseKernel(_vp(self._handle))
            self._handle = None
