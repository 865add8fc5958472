"""GPU driver versions read the way their vendor writes them, for `driver>=` selectors.

A device's driver string holds more than its version: a phone's is SurfaceFlinger's GLES
version (`OpenGL ES 3.2 v1.r36p0-01eac0.…`), whose first number is the GLES version, not
the driver's. Each family's version is parsed from its own notation:

- ARM Mali: `v1.r36p0` -> (1, 36, 0) (major, release, patch).
- Qualcomm Adreno: `V@0676.0` -> (676, 0); its Vulkan spelling `512.676` is the same driver
  (the 512 is a constant prefix) -> (676,).
- Mesa: `Mesa 24.2.1` -> (24, 2, 1); NVIDIA `580.159`, PoCL and others: the first dotted
  number after any `OpenGL ES x.y` prefix.

A selector's value is read in the family of the device it is compared with; a value in
Mali's or Adreno's own notation only matches devices of that family.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MALI, ADRENO, OTHER = "mali", "adreno", "other"

_MALI = re.compile(r"(?<![a-z0-9@])v(\d+)\.r(\d+)(?:p(\d+))?", re.IGNORECASE)
_MALI_RELEASE = re.compile(r"^r(\d+)(?:p(\d+))?$", re.IGNORECASE)
_ADRENO = re.compile(r"V@(\d+)(?:\.(\d+))?", re.IGNORECASE)
#: Adreno's Vulkan driver version: 512.<driver>[.<patch>]
_ADRENO_VULKAN = re.compile(r"^512\.(\d+)(?:\.(\d+))?$")
_GLES_PREFIX = re.compile(r"OpenGL ES(?:[- ]\w+)?\s+\d+(?:\.\d+)?", re.IGNORECASE)
_MESA = re.compile(r"Mesa\s+(\d+(?:\.\d+)*)", re.IGNORECASE)
_DOTTED = re.compile(r"\d+(?:\.\d+)*")


def _ints(groups: tuple[str | None, ...]) -> tuple[int, ...]:
    return tuple(int(g) for g in groups if g is not None)


def family(device: Mapping[str, Any]) -> str:
    """The GPU driver family of a device (from its driver string, renderer and vendor)."""
    facts = device.get("facts") or {}
    words = " ".join(
        str(x or "")
        for x in (
            device.get("driver_version"),
            device.get("renderer"),
            device.get("vendor"),
            facts.get("gles_vendor") if isinstance(facts, Mapping) else "",
        )
    ).lower()
    if "mali" in words or _MALI.search(words) or re.search(r"\barm\b", words):
        return MALI
    if "adreno" in words or "qualcomm" in words or _ADRENO.search(words):
        return ADRENO
    return OTHER


def device_version(device: Mapping[str, Any]) -> tuple[int, ...]:
    """The driver version of a device in its family's notation; () when none is found."""
    text = str(device.get("driver_version") or "")
    kind = family(device)
    if kind == MALI and (m := _MALI.search(text)):
        return _ints(m.groups())
    if kind == ADRENO:
        if m := _ADRENO.search(text):
            return _ints(m.groups())
        if m := _ADRENO_VULKAN.match(text.strip()):
            return _ints(m.groups())
    return _plain(text)


def _plain(text: str) -> tuple[int, ...]:
    if m := _MESA.search(text):
        return _ints(tuple(m.group(1).split(".")))
    m = _DOTTED.search(_GLES_PREFIX.sub(" ", text, count=1))
    return _ints(tuple(m.group(0).split("."))) if m else ()


def value_family(value: str) -> str:
    """The family a selector value's notation belongs to (OTHER for plain numbers)."""
    value = value.strip()
    if _MALI.fullmatch(value) or _MALI_RELEASE.match(value):
        return MALI
    if _ADRENO.fullmatch(value):
        return ADRENO
    return OTHER


def value_version(value: str, device_family: str) -> tuple[int, ...] | None:
    """A selector value as a version of `device_family`; None when it cannot be compared
    with that family's versions (a Mali value against an Adreno device)."""
    value = value.strip()
    notation = value_family(value)
    if notation not in (OTHER, device_family):
        return None
    if notation == MALI:
        if m := _MALI.fullmatch(value):
            return _ints(m.groups())
        m = _MALI_RELEASE.match(value)
        return (1, *_ints(m.groups())) if m else None  # Mali drivers are all v1
    if notation == ADRENO:
        m = _ADRENO.fullmatch(value)
        return _ints(m.groups()) if m else None
    if device_family == ADRENO and (m := _ADRENO_VULKAN.match(value)):
        return _ints(m.groups())
    return _plain(value) or None


def is_version(value: str) -> bool:
    """Whether a selector value reads as a driver version in some notation."""
    return value_family(value) != OTHER or bool(_plain(value.strip()))


def compare(device: Mapping[str, Any], op: str, value: str) -> bool:
    """`device's driver OP value` with OP `>=` or `<=`; False when not comparable."""
    kind = family(device)
    have, want = device_version(device), value_version(value, kind)
    if not have or want is None:
        return False
    have = have[: len(want)]  # `driver<=v1.r36` holds for r36p0, `<=535` for 535.104.05
    return have >= want if op == ">=" else have <= want
