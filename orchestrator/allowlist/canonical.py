"""Values as LiteRT canonicalises them before walking a list (`canonicalize_value.cc`).

`CanonicalizeValue`: ASCII lower case, ' ' and '-' become '_', nothing else changes.
`CanonicalizeValueWithKey`: the same, and for `tflite.gpu_model` only, ANGLE renderers are
reduced to the GPU they run on (the Vulkan and driver versions dropped), so that one list
entry covers every driver build:

- Samsung Xclipse: `angle_(samsung_xclipse_920)_on_vulkan`;
- Imagination PowerVR: `angle_(powervr_c_series_cxtp_48_1536_mc1)`;
- VirtIO Venus: `angle_(virtio_gpu_venus_(mali_g72))`.
"""

from __future__ import annotations

import re

GPU_MODEL = "tflite.gpu_model"

# The patterns match whole canonical values, as RE2::FullMatch does in LiteRT.
_XCLIPSE = re.compile(r"angle_\({1,2}(samsung_xclipse_[0-9]*)\)_on_vulkan(?:_[^)]*)?\)?")
_POWERVR = re.compile(
    r"angle_\(imagination_technologies,_?vulkan_[0-9.]*_?\((powervr_[a-z0-9_]*)_\(0x[0-9a-f]*\)\)"
    r",_?powervr_[a-z0-9_]*_vulkan_driver_[0-9.]*\)"
)
_VIRTIO_VENUS = re.compile(
    r"angle_\((?:intel|arm|amd),_?vulkan_[0-9.]*_?\((virtio_gpu_venus_\(.*?\))_\(0x[0-9a-f]*\)\)"
    r",_?venus_[0-9.]*\)"
)


#: ASCII upper case to lower case (nothing else), ' ' and '-' to '_'.
_CANONICAL = str.maketrans(
    {**{chr(c): chr(c + 32) for c in range(ord("A"), ord("Z") + 1)}, " ": "_", "-": "_"}
)


def canonical_value(text: str) -> str:
    """`CanonicalizeValue`: ASCII lower case; ' ' and '-' become '_'."""
    return str(text).translate(_CANONICAL)


def canonical_value_with_key(key: str, text: str) -> str:
    """`CanonicalizeValueWithKey`: `canonical_value`, plus the ANGLE reductions of
    `tflite.gpu_model`."""
    value = canonical_value(text)
    if key != GPU_MODEL:
        return value
    if m := _XCLIPSE.fullmatch(value):
        return f"angle_({m.group(1)})_on_vulkan"
    if m := _POWERVR.fullmatch(value):
        return f"angle_({m.group(1)})"
    if m := _VIRTIO_VENUS.fullmatch(value):
        return f"angle_({m.group(1)})"
    return value
