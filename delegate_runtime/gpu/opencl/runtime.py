"""OpenCL devices through pyopencl: selection, facts, and errors with their names."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ...errors import DeviceError, JobError

T = TypeVar("T")

#: OpenCL status codes by number (the ones drivers really return).
CL_ERROR_NAMES = {
    -1: "CL_DEVICE_NOT_FOUND",
    -2: "CL_DEVICE_NOT_AVAILABLE",
    -3: "CL_COMPILER_NOT_AVAILABLE",
    -4: "CL_MEM_OBJECT_ALLOCATION_FAILURE",
    -5: "CL_OUT_OF_RESOURCES",
    -6: "CL_OUT_OF_HOST_MEMORY",
    -7: "CL_PROFILING_INFO_NOT_AVAILABLE",
    -11: "CL_BUILD_PROGRAM_FAILURE",
    -30: "CL_INVALID_VALUE",
    -33: "CL_INVALID_DEVICE",
    -36: "CL_INVALID_COMMAND_QUEUE",
    -38: "CL_INVALID_MEM_OBJECT",
    -42: "CL_INVALID_BINARY",
    -45: "CL_INVALID_PROGRAM_EXECUTABLE",
    -48: "CL_INVALID_KERNEL",
    -51: "CL_INVALID_ARG_SIZE",
    -52: "CL_INVALID_KERNEL_ARGS",
    -54: "CL_INVALID_WORK_GROUP_SIZE",
    -55: "CL_INVALID_WORK_ITEM_SIZE",
    -61: "CL_INVALID_BUFFER_SIZE",
    -1001: "CL_PLATFORM_NOT_FOUND_KHR",
}


def cl_error_name(code: int) -> str:
    return CL_ERROR_NAMES.get(code, f"CL_ERROR_{code}")


def device_error(exc: Exception, doing: str) -> DeviceError:
    """A DeviceError naming the OpenCL status of a pyopencl error."""
    status = getattr(exc, "code", None)
    name = cl_error_name(status) if isinstance(status, int) else type(exc).__name__
    return DeviceError(f"OpenCL {name} while {doing}: {exc}")


def guarded(doing: str, fn: Callable[[], T]) -> T:
    """Run `fn`, mapping pyopencl failures and failed C API calls to DeviceError."""
    import pyopencl as cl

    from .capi import CLCallError

    try:
        return fn()
    except (cl.Error, CLCallError) as exc:
        raise device_error(exc, doing) from exc


@dataclass(frozen=True)
class DeviceInfo:
    """Facts about one OpenCL device, as the farm records them."""

    key: str
    platform: str
    name: str
    vendor: str
    driver_version: str
    opencl_version: str
    compute_units: int
    global_mem_bytes: int
    has_fp16: bool
    is_gpu: bool

    def facts(self) -> dict[str, Any]:
        return {
            "kind": "opencl",
            "platform": self.platform,
            "vendor": self.vendor,
            "model": self.name,
            "gpu_renderer": self.name,
            "driver_version": self.driver_version,
            "opencl_version": self.opencl_version,
            "compute_units": self.compute_units,
            "global_mem_bytes": self.global_mem_bytes,
            "fp16": self.has_fp16,
        }


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def describe(device: Any) -> DeviceInfo:
    import pyopencl as cl

    vendor = device.vendor.strip()
    return DeviceInfo(
        key=f"opencl:{_slug(vendor)}:{_slug(device.name)}",
        platform=device.platform.name.strip(),
        name=device.name.strip(),
        vendor=vendor,
        driver_version=device.driver_version.strip(),
        opencl_version=device.version.strip(),
        compute_units=int(device.max_compute_units),
        global_mem_bytes=int(device.global_mem_size),
        has_fp16="cl_khr_fp16" in device.extensions,
        is_gpu=bool(device.type & cl.device_type.GPU),
    )


def list_devices() -> list[tuple[int, int, Any]]:
    """(platform index, device index, device) for every OpenCL device on the host."""
    import pyopencl as cl

    found = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []  # CL_PLATFORM_NOT_FOUND_KHR: no ICD installed
    for pi, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        found.extend((pi, di, d) for di, d in enumerate(devices))
    return found


def select_device(spec: str | None = None) -> Any:
    """Pick a device: None takes the first GPU (else the first device), 'P:D' takes
    platform P device D, any other text the first device whose name or key contains it."""
    devices = list_devices()
    if not devices:
        raise DeviceError("no OpenCL device found (install a driver, or PoCL for the CPU)")
    if spec is None or spec == "":
        gpus = [d for _, _, d in devices if describe(d).is_gpu]
        return gpus[0] if gpus else devices[0][2]
    m = re.fullmatch(r"(\d+):(\d+)", spec)
    if m:
        wanted = (int(m.group(1)), int(m.group(2)))
        for pi, di, d in devices:
            if (pi, di) == wanted:
                return d
        raise JobError(f"no OpenCL device {spec}; devices: {available_names(devices)}")
    needle = spec.lower()
    for _, _, d in devices:
        info = describe(d)
        if needle in info.name.lower() or needle in info.key or needle in info.platform.lower():
            return d
    raise JobError(f"no OpenCL device matches {spec!r}; devices: {available_names(devices)}")


_CONTEXTS: dict[int, Any] = {}
_CONTEXTS_LOCK = threading.Lock()


def shared_context(device: Any) -> Any:
    """The process's OpenCL context for `device`, created on first use and then kept.

    NVIDIA's driver spends about 100 ms on every context it creates (each is a CUDA
    context); a lab agent runs job after job on its device, so it pays that once, and a
    session's initialisation is then what its kernel cache can shorten.
    """
    import pyopencl as cl

    from .capi import create_context, opencl_library

    lib = opencl_library()
    with _CONTEXTS_LOCK:
        ctx = _CONTEXTS.get(device.int_ptr)
        if ctx is None:
            make = (lambda: create_context(lib, device)) if lib else (lambda: cl.Context([device]))
            ctx = guarded("creating an OpenCL context", make)
            _CONTEXTS[device.int_ptr] = ctx
        return ctx


def start_shared_context(device: Any) -> None:
    """shared_context(device) begun in a thread, so that a session's preparation runs
    beside the driver's work and waits only for what is left of it. A failure is left to
    the session's own call, which raises it."""

    def make() -> None:
        with contextlib.suppress(Exception):  # the session's own call reports it
            shared_context(device)

    threading.Thread(target=make, name="opencl-context", daemon=True).start()


def available_names(devices: list[tuple[int, int, Any]]) -> str:
    return ", ".join(f"{pi}:{di} {d.name.strip()}" for pi, di, d in devices)
