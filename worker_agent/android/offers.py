"""What a phone offers each delegate, read from the files a real phone has: the OpenCL
library (the names opencl_wrapper.cc loads), the NNAPI devices its HAL manifest declares
(plus NNAPI's own `nnapi-reference`), the Hexagon libraries where the delegate looks for
them, and each CPU's top clock (big and little cores). Stored as `facts["accelerators"]`
(farm_core.device_support reads it). A phone that answers none of it still registers:
what it did not say stays empty.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: opencl_wrapper.cc: libOpenCL.so, then libOpenCL-pixel.so, then libOpenCL-car.so.
OPENCL_LIBS = ("libOpenCL.so", "libOpenCL-pixel.so", "libOpenCL-car.so")
VENDOR_LIBS = ("/vendor/lib64", "/system/vendor/lib64")
VINTF_MANIFEST = "/vendor/etc/vintf/manifest.xml"
#: Where the Hexagon skel libraries may be: the provider's default --hexagon_lib_path,
#: then the DSP's own library folder.
HEXAGON_SKEL_DIRS = ("/data/local/tmp", "/vendor/lib/rfsa/adsp", "/vendor/dsp/cdsp")
HEXAGON_INTERFACE = "libhexagon_interface.so"
HEXAGON_SKEL = re.compile(r"^libhexagon_nn_skel(?:_v\d+)?\.so$")
NNAPI_REFERENCE = "nnapi-reference"
#: Android 10 (API 29) lists NNAPI devices by name (ANeuralNetworks_getDevice).
NNAPI_NAMED_MIN_SDK = 29
_NN_HAL = re.compile(r"<hal\b[^>]*>(?:(?!</hal>).)*?android\.hardware\.neuralnetworks"
                     r"(?:(?!</hal>).)*</hal>", re.S)  # fmt: skip
_FQNAME = re.compile(r"<fqname>\s*(?:@[\d.]+::)?IDevice/([A-Za-z0-9._-]{1,40})\s*</fqname>")
_INSTANCE = re.compile(r"<instance>\s*([A-Za-z0-9._-]{1,40})\s*</instance>")
_GLES = re.compile(r"OpenGL ES (\d+)\.(\d+)")

Shell = Callable[[str], str]  #: runs one fixed command line on the phone, returns its output


def _names(listing: str) -> list[str]:
    """`ls` output: one name a line; error lines (`ls: ...`) are not names."""
    return [n.strip() for n in listing.splitlines() if n.strip() and not n.startswith("ls:")]


def gpu_backends(vendor_listing: str, gles_api: str) -> list[str]:
    """`cl` when an OpenCL library is in the vendor libraries; `gl` with OpenGL ES 3.1+."""
    out = []
    if set(OPENCL_LIBS) & set(_names(vendor_listing)):
        out.append("cl")
    m = _GLES.search(gles_api)
    if m and (int(m.group(1)), int(m.group(2))) >= (3, 1):
        out.append("gl")
    return out


def nnapi_devices(manifest: str, sdk: int | None) -> list[str]:
    """The NNAPI devices as NNAPI names them: the HAL's instances, then nnapi-reference."""
    names: list[str] = []
    for hal in _NN_HAL.findall(manifest):
        names += _FQNAME.findall(hal) or _INSTANCE.findall(hal)
    if sdk is not None and sdk >= NNAPI_NAMED_MIN_SDK:
        names.append(NNAPI_REFERENCE)
    return list(dict.fromkeys(names))


def hexagon(vendor_listing: str, skel_listings: dict[str, str]) -> dict[str, Any]:
    """Where the Hexagon libraries are ({} when the phone has none)."""
    interface = next((f"{d}/{HEXAGON_INTERFACE}" for d in VENDOR_LIBS[:1]
                      if HEXAGON_INTERFACE in _names(vendor_listing)), "")  # fmt: skip
    for folder, listing in skel_listings.items():
        skel = sorted(n for n in _names(listing) if HEXAGON_SKEL.match(n))
        if skel:
            return {"interface": interface, "skel_dir": folder, "skel": skel}
    return {"interface": interface, "skel_dir": "", "skel": []} if interface else {}


def cpu_cores(max_khz_text: str) -> dict[str, Any]:
    """Cores, and how many are big (above the lowest top clock) and little."""
    khz = [int(x) for x in max_khz_text.split() if x.isdigit()]
    if not khz:
        return {}
    low = min(khz)
    little = sum(k == low for k in khz)
    return {"cores": len(khz), "little": little, "big": len(khz) - little, "max_khz": khz}


def _online(text: str) -> int:
    """CPUs from `/sys/devices/system/cpu/online` (`0-7`, or `0-3,5`)."""
    top = -1
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        if (hi or lo).strip().isdigit():
            top = max(top, int((hi or lo).strip()))
    return top + 1


def read(shell: Shell, sdk: int | None, gles_api: str) -> dict[str, Any]:
    """Everything above, through `shell` (fixed command lines only)."""
    vendor = shell(f"ls {VENDOR_LIBS[0]}")
    skels = {d: shell(f"ls {d}") for d in HEXAGON_SKEL_DIRS}
    cpus = _online(shell("cat /sys/devices/system/cpu/online"))
    paths = " ".join(f"/sys/devices/system/cpu/cpu{i}/cpufreq/cpuinfo_max_freq"
                     for i in range(min(cpus, 64)))  # fmt: skip
    return {
        "gpu_backends": gpu_backends(vendor, gles_api),
        "nnapi_devices": nnapi_devices(shell(f"cat {VINTF_MANIFEST}"), sdk),
        "hexagon": hexagon(vendor, skels),
        "cpu": cpu_cores(shell(f"cat {paths}")) if paths else {},
    }
