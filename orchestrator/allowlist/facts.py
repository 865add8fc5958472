"""A device's facts as the compatibility list's variables (`tflite.*`), canonicalised.

TFLite's runtime (`GPUCompatibilityList::InfosToMap`) gives the list only the GL renderer,
the GLES version, the manufacturer, model and device name and the Android SDK. We key on
those first, then on facts a stock app does not pass (GPU vendor, SoC, the driver version):
a tree built that way still answers a stock app (see `devicedb`), and an app that passes the
driver version gets the exact, per-driver decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .canonical import canonical_value_with_key

GPU_MODEL = "tflite.gpu_model"
GLES_VERSION = "tflite.opengl_es_version"
MANUFACTURER = "tflite.manufacturer"
DEVICE_MODEL = "tflite.device_model"
DEVICE_NAME = "tflite.device_name"
SDK = "tflite.android_sdk_version"
GPU_VENDOR = "tflite.gpu_vendor"
SOC_MODEL = "tflite.soc_model"
DRIVER = "tflite.opengl_driver_version"

#: What TFLite's runtime fills in itself, in the order the tree tests them.
RUNTIME_VARIABLES = (GPU_MODEL, GLES_VERSION, MANUFACTURER, DEVICE_MODEL, DEVICE_NAME, SDK)
#: Facts an app must pass itself (GetStatus with a map); tested after the runtime ones.
EXTRA_VARIABLES = (GPU_VENDOR, SOC_MODEL, DRIVER)
ORDER = RUNTIME_VARIABLES + EXTRA_VARIABLES

_GLES = re.compile(r"(\d+)\.(\d+)")


#: Device kinds that never enter a list: no-op test devices do no GPU work.
UNLISTED_KINDS = ("noop",)


def _pick(facts: Mapping[str, Any], *keys: str) -> str:
    for k in keys:
        v = facts.get(k)
        if v not in (None, ""):
            return str(v).strip()
    return ""


def list_variables(device: Mapping[str, Any]) -> dict[str, str]:
    """The list's variables for a device row (devices-table columns, or a result's
    `device_facts`); values canonicalised as LiteRT does, empty facts left out. No-op
    test devices have none (they never appear in a list)."""
    facts = device.get("facts") or {}
    kind = device.get("kind") or ""
    if kind in UNLISTED_KINDS:
        return {}
    out = {
        GPU_MODEL: str(device.get("renderer") or device.get("model") or ""),
        DRIVER: str(device.get("driver_version") or ""),
    }
    if kind == "android":
        sdk = device.get("android_sdk")
        gles = _GLES.search(_pick(facts, "gles_version") or str(device.get("api_version") or ""))
        out |= {
            MANUFACTURER: _pick(facts, "ro.product.manufacturer", "manufacturer")
            or str(device.get("vendor") or ""),
            DEVICE_MODEL: _pick(facts, "ro.product.model", "product_model")
            or str(device.get("model") or ""),
            DEVICE_NAME: _pick(facts, "ro.product.device", "product_device"),
            SDK: str(sdk) if sdk is not None else _pick(facts, "ro.build.version.sdk"),
            # variables.h: the SoC model is ro.board.platform (e.g. "sdm450"), not ro.soc.model
            SOC_MODEL: _pick(facts, "ro.board.platform", "soc_model"),
            GLES_VERSION: f"{gles.group(1)}.{gles.group(2)}" if gles else "",
            GPU_VENDOR: _pick(facts, "gles_vendor", "gpu_vendor"),
        }
    else:
        out[GPU_VENDOR] = str(device.get("vendor") or "")
    return {k: canonical_value_with_key(k, v.strip()) for k, v in out.items() if v and v.strip()}


def signature(variables: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables in tree order: devices with equal signatures are one to the list."""
    return tuple((v, variables[v]) for v in ORDER if v in variables)
