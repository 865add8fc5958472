"""A phone's facts (REFERENCE.md, "Reading device facts on Android"): system properties
from `getprop` and the GLES renderer, vendor and version from `dumpsys SurfaceFlinger`."""

from __future__ import annotations

import re
from typing import Any

from ..devices import DeviceInfo

#: Properties recorded with every phone (allowlists are decided on them).
PROPS = (
    "ro.product.manufacturer",
    "ro.product.model",
    "ro.product.device",
    "ro.build.version.sdk",
    "ro.build.version.release",
    "ro.board.platform",
    "ro.soc.manufacturer",
    "ro.soc.model",
    "ro.hardware.egl",
    "ro.product.cpu.abi",
    "ro.product.cpu.abilist",
)
_PROP_LINE = re.compile(r"^\[([^\]]+)\]: \[(.*)\]$")
_GLES_VERSION = re.compile(r"OpenGL ES[- ](?:CM )?(\d+\.\d+)")


def parse_getprop(text: str) -> dict[str, str]:
    """`[name]: [value]` lines of a bare `getprop` (values spanning lines are skipped)."""
    out = {}
    for line in text.splitlines():
        m = _PROP_LINE.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def parse_gles(text: str) -> dict[str, str]:
    """Vendor, renderer and version from the `GLES: vendor, renderer, version` line."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("GLES:"):
            parts = [p.strip() for p in line.removeprefix("GLES:").split(",", 2)]
            parts += [""] * (3 - len(parts))
            return {"vendor": parts[0], "renderer": parts[1], "version": parts[2]}
    return {}


def gles_api(version: str) -> str:
    """`OpenGL ES 3.2` from a GLES version string (empty when there is none)."""
    m = _GLES_VERSION.search(version)
    return f"OpenGL ES {m.group(1)}" if m else ""


def device_info(
    serial: str, props: dict[str, str], gles: dict[str, str], host: str, server: str
) -> DeviceInfo:
    """The phone as the farm registers it: `android:<serial>` with its facts."""
    facts: dict[str, Any] = {p: props.get(p, "") for p in PROPS}
    facts |= {
        "serial": serial,
        "adb_server": server,
        "gles_vendor": gles.get("vendor", ""),
        "gles_renderer": gles.get("renderer", ""),
        "gles_version": gles.get("version", ""),
    }
    sdk = props.get("ro.build.version.sdk", "")
    version = gles.get("version", "")
    return DeviceInfo(
        key=f"android:{serial}",
        kind="android",
        vendor=props.get("ro.product.manufacturer", ""),
        model=props.get("ro.product.model", ""),
        renderer=gles.get("renderer", ""),
        driver_version=version,
        api_version=gles_api(version),
        android_sdk=int(sdk) if sdk.isdigit() else None,
        host=host,
        facts=facts,
    )
