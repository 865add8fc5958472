"""A phone's facts (REFERENCE.md, "Reading device facts on Android"): system properties
from `getprop` and the GLES renderer, vendor and version from `dumpsys SurfaceFlinger`.

What a phone says is untrusted input: every value loses its control characters and is cut to
fit its column, ABIs are kept only from the set Android defines (they name folders of host
tools), and a serial that could not be a real one is refused (it names log files and queues).
A phone that fails these checks raises UntrustedFacts and is skipped; the others are served.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Any

from delegate_runtime.errors import DeviceError
from farm_core.device_support import FACTS_KEY
from farm_core.schema import Device

from ..devices import DeviceInfo

log = logging.getLogger(__name__)

#: The ABIs Android defines (NDK "Android ABIs"); any other entry a phone lists is dropped.
KNOWN_ABIS = ("arm64-v8a", "armeabi-v7a", "armeabi", "x86", "x86_64", "riscv64")
#: Most characters kept of a fact that has no column of its own.
MAX_FACT_CHARS = 255
#: What adb serials look like: a USB serial number, or host:port of a TCP device.
_SERIAL = re.compile(r"[A-Za-z0-9._:\[\]-]{1,128}")

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
#: Where the version may start: ", OpenGL ES" (ANGLE-on-GL renderers hold one inside
#: their parentheses: "ANGLE (Qualcomm, Adreno (TM) 740, OpenGL ES 3.2)").
_VERSION_START = re.compile(r",\s*(?=OpenGL ES)")


def parse_getprop(text: str) -> dict[str, str]:
    """`[name]: [value]` lines of a bare `getprop` (values spanning lines are skipped)."""
    out = {}
    for line in text.splitlines():
        m = _PROP_LINE.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _version_start(body: str) -> re.Match[str] | None:
    """The first `, OpenGL ES` outside parentheses: where the version starts."""
    for m in _VERSION_START.finditer(body):
        head = body[: m.start()]
        if head.count("(") == head.count(")"):
            return m
    return None


def _split_top_level(head: str) -> tuple[str, str]:
    """`vendor, renderer`: an ANGLE renderer starts at `ANGLE (` (it holds commas, and
    so may the vendor: "Samsung Electronics Co., Ltd."); otherwise the first comma
    outside parentheses ends the vendor."""
    angle = re.search(r"(?:^|,\s*)(ANGLE \()", head)
    if angle:
        return head[: angle.start()].strip(), head[angle.start(1) :].strip()
    depth = 0
    for i, c in enumerate(head):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            return head[:i].strip(), head[i + 1 :].strip()
    return head.strip(), ""


def parse_gles(text: str) -> dict[str, str]:
    """Vendor, renderer and version from the `GLES: vendor, renderer, version` line.

    Not split on every comma: ANGLE renderers hold commas ("ANGLE (Imagination
    Technologies, Vulkan 1.4.317 (PowerVR ...), PowerVR ... Driver 1.662.3024)"), and
    so do some versions ("V@415.0 (GIT@a1, I2, 1587)"). The version is the first
    `OpenGL ES ...` outside parentheses; the vendor and renderer are what comes before it.
    """
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("GLES:"):
            body = line.removeprefix("GLES:").strip()
            m = _version_start(body)
            head, version = (body[: m.start()], body[m.end() :]) if m else (body, "")
            vendor, renderer = _split_top_level(head)
            return {"vendor": vendor, "renderer": renderer, "version": version.strip()}
    return {}


def gles_api(version: str) -> str:
    """`OpenGL ES 3.2` from a GLES version string (empty when there is none)."""
    m = _GLES_VERSION.search(version)
    return f"OpenGL ES {m.group(1)}" if m else ""


class UntrustedFacts(DeviceError):
    """A phone's facts cannot be used (a serial that is no serial, no ABI Android defines)."""


def clean(value: str, limit: int = MAX_FACT_CHARS) -> str:
    """`value` without control or format characters, stripped, cut to `limit` characters."""
    kept = "".join(ch for ch in value if unicodedata.category(ch) not in ("Cc", "Cf"))
    return kept.strip()[:limit]


def _column(name: str) -> int:
    return int(Device.__table__.c[name].type.length)


def check_serial(serial: str) -> str:
    """The serial, if it can be one; UntrustedFacts otherwise."""
    if not _SERIAL.fullmatch(serial):
        raise UntrustedFacts(
            f"android:{clean(serial, 60)!r} has a serial adb never gives (letters, digits, "
            "'._:-[]', at most 128): skipped"
        )
    return serial


def known_abis(props: dict[str, str]) -> list[str]:
    """The phone's ABIs that Android defines, in its order (`abilist`, else `abi`)."""
    listed = [a.strip() for a in props.get("ro.product.cpu.abilist", "").split(",")]
    listed = [a for a in listed if a] or [props.get("ro.product.cpu.abi", "").strip()]
    return list(dict.fromkeys(a for a in listed if a in KNOWN_ABIS))


def device_info(
    serial: str,
    props: dict[str, str],
    gles: dict[str, str],
    host: str,
    server: str,
    accelerators: dict[str, Any] | None = None,
) -> DeviceInfo:
    """The phone as the farm registers it: `android:<serial>` with its facts, each checked.

    Raises UntrustedFacts for a serial that is no serial or a phone listing ABIs of which
    none is known (one listing none registers with none, and has no tools)."""
    check_serial(serial)
    props = {p: clean(props.get(p, "")) for p in PROPS}
    gles = {k: clean(gles.get(k, "")) for k in ("vendor", "renderer", "version")}
    abis = known_abis(props)
    reported = props["ro.product.cpu.abilist"] or props["ro.product.cpu.abi"]
    if reported and not abis:
        raise UntrustedFacts(
            f"android:{serial} lists no ABI Android defines ({reported[:80]!r}; known: "
            f"{', '.join(KNOWN_ABIS)}): skipped"
        )
    if reported != ",".join(abis):
        log.warning("android:%s: ABIs %r reduced to the known %s", serial, reported[:80], abis)
    primary = props["ro.product.cpu.abi"]
    props["ro.product.cpu.abi"] = primary if primary in abis else (abis or [""])[0]
    props["ro.product.cpu.abilist"] = ",".join(abis)
    facts: dict[str, Any] = dict(props)
    facts |= {
        "serial": serial,
        "adb_server": server,
        "gles_vendor": gles["vendor"],
        "gles_renderer": gles["renderer"],
        "gles_version": gles["version"],
    }
    if accelerators is not None:  # worker_agent.android.offers (names and paths checked there)
        facts[FACTS_KEY] = accelerators
    sdk = props["ro.build.version.sdk"]
    version = gles["version"]
    return DeviceInfo(
        key=f"android:{serial}",
        kind="android",
        vendor=props["ro.product.manufacturer"][: _column("vendor")],
        model=props["ro.product.model"][: _column("model")],
        renderer=gles["renderer"][: _column("renderer")],
        driver_version=version[: _column("driver_version")],
        api_version=gles_api(version),
        android_sdk=int(sdk) if sdk.isdigit() and len(sdk) <= 4 else None,
        host=host,
        facts=facts,
    )
