"""A partition's inputs and outputs in host memory that the GPU reads and writes itself.

Uploading an input with clEnqueueWriteBuffer hands it to NVIDIA's copy engine, and the
first kernel waits for that engine; reading an output back does the same at the other
end. On the H200 a 602 KB input and a 4 KB output cost about 95 us host to host around a
trivial kernel that way, 84 us when a kernel copies the input from host memory and the
last kernel writes the output there (`bench/io_probe.py`, docs/notebook/20-2026-11-28-inputs-and-outputs-in-host-memory-the-classifier.md).
NVIDIA's `cl_nv_create_buffer` extension allocates such memory
(`CL_MEM_LOCATION_HOST_NV`): the buffer lives in page-locked host memory, mapped into
the GPU's address space, so a kernel's loads and stores cross the bus directly.

Each edge buffer is mapped once, when it is made, and stays mapped: the host writes an
input into the mapping before the launches and reads an output from it after clFinish.
OpenCL leaves a buffer used while mapped undefined; for memory that is itself host
memory NVIDIA's driver gives the one copy both sides see, and `check` verifies that on
the device at hand (a copy in through the mapping and out through the queue, and the
reverse) before a session relies on it. Off NVIDIA, or where the check fails, edges are
uploaded and read back as before.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

EXTENSION = "cl_nv_create_buffer"
#: cl_nv_create_buffer's flag: allocate in host memory, mapped for the device.
MEM_LOCATION_HOST_NV = 1 << 0

_checked: dict[int, bool] = {}  #: context handle -> the check's verdict
_lock = threading.Lock()


def offered(device: Any) -> bool:
    """Whether `device` names the extension (no context needed; `HostEdges.usable` still
    checks a buffer on the context)."""
    return EXTENSION in device.extensions.split()


def _creator(lib: ctypes.CDLL, device: Any) -> Any:
    """clCreateBufferNV of the device's platform, or None."""
    if not offered(device):
        return None
    get = lib.clGetExtensionFunctionAddressForPlatform
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
    address = get(ctypes.c_void_p(device.platform.int_ptr), b"clCreateBufferNV")
    if not address:
        return None
    proto = ctypes.CFUNCTYPE(
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_uint64,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int32),
    )
    return proto(address)


class HostEdges:
    """Makes edge buffers in host memory for one context and queue."""

    def __init__(self, lib: ctypes.CDLL, ctx: Any, queue: Any):
        self.ctx, self.queue = ctx, queue
        self._create = _creator(lib, queue.device)

    def buffer(self, nbytes: int) -> tuple[Any, np.ndarray]:
        """A buffer of `nbytes` in host memory and its mapping (uint8), mapped for good."""
        import pyopencl as cl

        if self._create is None:
            raise RuntimeError(f"{EXTENSION} is not offered")
        err = ctypes.c_int32()
        handle = self._create(
            ctypes.c_void_p(self.ctx.int_ptr),
            cl.mem_flags.READ_WRITE,
            MEM_LOCATION_HOST_NV,
            max(nbytes, 4),
            None,
            ctypes.byref(err),
        )
        if err.value or not handle:
            raise cl.Error(f"clCreateBufferNV returned {err.value}")
        buf = cl.Buffer.from_int_ptr(handle, retain=False)  # owns the handle now
        access = cl.map_flags.READ | cl.map_flags.WRITE
        mapped, _ = cl.enqueue_map_buffer(self.queue, buf, access, 0, (max(nbytes, 4),), np.uint8)
        return buf, mapped

    def usable(self) -> bool:
        """The extension is offered and a mapped buffer and the queue see the same bytes
        (checked once per context)."""
        if self._create is None:
            return False
        key = self.ctx.int_ptr
        with _lock:
            if key not in _checked:
                _checked[key] = self._check()
            return _checked[key]

    def _check(self) -> bool:
        import pyopencl as cl

        try:
            buf, mapped = self.buffer(4096)
            pattern = np.arange(4096, dtype=np.uint32).astype(np.uint8)
            mapped[:] = pattern  # in through the mapping, out through the queue
            seen = np.empty(4096, np.uint8)
            cl.enqueue_copy(self.queue, seen, buf)
            self.queue.finish()
            cl.enqueue_copy(self.queue, buf, pattern[::-1].copy())  # and the reverse
            self.queue.finish()
            return bool(np.array_equal(seen, pattern) and np.array_equal(mapped, pattern[::-1]))
        except (cl.Error, RuntimeError):
            return False


def host_edges_for(ctx: Any, queue: Any) -> HostEdges | None:
    """Host-memory edges for sessions on this queue, or None: no C API (capi.py), not
    offered, or the check failed. (Whether a session asks: its plan, execution_plan.py.)"""
    from .capi import opencl_library

    lib = opencl_library()
    if lib is None:
        return None
    edges = HostEdges(lib, ctx, queue)
    return edges if edges.usable() else None
