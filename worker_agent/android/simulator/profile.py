"""What a simulated phone is: its properties, GPU facts, sysfs readings and faults.

A profile is JSON or YAML (or a built-in name from `BUILTIN`):

    serial: sim-pixel7               # informative; adb names a TCP device host:port
    props: {ro.product.model: Pixel 7, ...}
    gles: {vendor: ARM, renderer: Mali-G710, version: OpenGL ES 3.2 v1.r36p0-01eac0}
    thermal: {cpu-0-0: 41500, gpu0: 39800}    # zone type -> millidegrees C
    cpu_khz: [1803000, 1803000, 2348000]       # scaling_cur_freq per CPU
    gpu: {kind: mali, path: ..., hz: 848000000}   # or kind: kgsl
    disk_bytes: 1073741824
    cpu_max_khz: [1803000, ..., 2850000]       # cpuinfo_max_freq per CPU (big/little)
    opencl_lib: libOpenCL.so                   # in /vendor/lib64 ("" : no OpenCL)
    nnapi: [google-edgetpu, nnapi-reference]   # the NNAPI devices, as NNAPI names them
    hexagon: {interface: /vendor/lib64, skel_dir: /vendor/lib/rfsa/adsp}   # {}: none
    faults: {slow_s: 0, drop_after_s: null, garbage: "", disk_free_bytes: null,
             unauthorized: false, offline: false}
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from delegate_runtime.errors import JobError

#: Storage of a simulated phone unless its profile says otherwise.
DEFAULT_DISK_BYTES = 1 << 30


@dataclass
class Faults:
    """Misbehaviour to inject; tests may change these while the phone runs."""

    slow_s: float = 0.0  #: benchmark_model sleeps this long before it starts
    drop_after_s: float | None = None  #: the phone vanishes this long into a tool's run
    garbage: str = ""  #: "noise" (junk instead of output) or "truncated" (half of it)
    disk_free_bytes: int | None = None  #: room left for pushes (None: the whole disk)
    unauthorized: bool = False  #: answer CNXN with AUTH: "accept the USB debugging prompt"
    offline: bool = False  #: never answer CNXN


@dataclass
class Profile:
    serial: str = "sim"
    props: dict[str, str] = field(default_factory=dict)
    gles: dict[str, str] = field(default_factory=dict)
    thermal: dict[str, int] = field(default_factory=dict)
    cpu_khz: list[int] = field(default_factory=list)
    gpu: dict[str, Any] = field(default_factory=dict)
    disk_bytes: int = DEFAULT_DISK_BYTES
    cpu_max_khz: list[int] = field(default_factory=list)
    opencl_lib: str = ""
    nnapi: list[str] = field(default_factory=list)
    hexagon: dict[str, str] = field(default_factory=dict)
    faults: Faults = field(default_factory=Faults)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Profile:
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise JobError(f"unknown profile field(s): {', '.join(sorted(unknown))}")
        data = copy.deepcopy(raw)
        fault_fields = {f.name for f in fields(Faults)}
        faults = data.pop("faults", None) or {}
        bad = set(faults) - fault_fields
        if bad:
            raise JobError(f"unknown fault(s): {', '.join(sorted(bad))}")
        data["props"] = {str(k): str(v) for k, v in (data.get("props") or {}).items()}
        return cls(**data, faults=Faults(**faults))


_PIXEL = {
    "serial": "sim-pixel7",
    "props": {
        "ro.product.manufacturer": "Google",
        "ro.product.model": "Pixel 7",
        "ro.product.name": "panther",
        "ro.product.device": "panther",
        "ro.build.version.sdk": "34",
        "ro.build.version.release": "14",
        "ro.board.platform": "gs201",
        "ro.soc.manufacturer": "Google",
        "ro.soc.model": "GS201",
        "ro.hardware.egl": "mali",
        "ro.product.cpu.abi": "arm64-v8a",
        "ro.product.cpu.abilist": "arm64-v8a",
    },
    "gles": {"vendor": "ARM", "renderer": "Mali-G710", "version": "OpenGL ES 3.2 v1.r36p0-01eac0"},
    "thermal": {"BIG": 41200, "MID": 40100, "LITTLE": 39000, "G3D": 38500, "battery": 31000},
    "cpu_khz": [1803000, 1803000, 1803000, 1803000, 2348000, 2348000, 2850000, 2850000],
    "gpu": {"kind": "mali", "path": "/sys/class/devfreq/28000000.mali", "hz": 848000000},
    "cpu_max_khz": [1803000] * 4 + [2348000] * 2 + [2850000] * 2,
    "opencl_lib": "libOpenCL-pixel.so",
    "nnapi": ["google-edgetpu", "nnapi-reference"],
}
_GALAXY = {
    "serial": "sim-s23",
    "props": {
        "ro.product.manufacturer": "samsung",
        "ro.product.model": "SM-S911B",
        "ro.product.name": "dm1qxxx",
        "ro.product.device": "dm1q",
        "ro.build.version.sdk": "33",
        "ro.build.version.release": "13",
        "ro.board.platform": "kalama",
        "ro.soc.manufacturer": "QTI",
        "ro.soc.model": "SM8550",
        "ro.hardware.egl": "adreno",
        "ro.product.cpu.abi": "arm64-v8a",
        "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
    },
    "gles": {
        "vendor": "Qualcomm",
        "renderer": "Adreno (TM) 740",
        "version": "OpenGL ES 3.2 V@0676.32 (GIT@1b5a8bd4b8, Ia7d1ba3e3f, 1679558012)",
    },
    "thermal": {"cpu-0-0": 36100, "cpu-1-0": 37300, "gpuss-0": 35200, "battery": 29800},
    "cpu_khz": [1094400, 1094400, 1094400, 1555200, 1555200, 1555200, 1555200, 2016000],
    "gpu": {"kind": "kgsl", "path": "/sys/class/kgsl/kgsl-3d0", "hz": 680000000},
    "cpu_max_khz": [2016000] * 3 + [2803200] * 4 + [3360000],
    "opencl_lib": "libOpenCL.so",
    "nnapi": ["qti-default", "qti-dsp", "qti-gpu", "qti-hta", "nnapi-reference"],
}
#: A Snapdragon 855 phone of the Hexagon era: the Hexagon NN libraries where the delegate
#: looks for them, and Qualcomm's NNAPI devices (its HAL names them qti-*).
_PIXEL4 = {
    "serial": "sim-pixel4",
    "props": {
        "ro.product.manufacturer": "Google",
        "ro.product.model": "Pixel 4",
        "ro.product.name": "flame",
        "ro.product.device": "flame",
        "ro.build.version.sdk": "33",
        "ro.build.version.release": "13",
        "ro.board.platform": "msmnile",
        "ro.soc.manufacturer": "QTI",
        "ro.soc.model": "SM8150",
        "ro.hardware.egl": "adreno",
        "ro.product.cpu.abi": "arm64-v8a",
        "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
    },
    "gles": {
        "vendor": "Qualcomm",
        "renderer": "Adreno (TM) 640",
        "version": "OpenGL ES 3.2 V@0502.0 (GIT@7cfc9a2, I5e5cb9d5a5, 1614209032)",
    },
    "thermal": {"cpu-0-0-usr": 35100, "cpu-1-0-usr": 36400, "gpuss-0-usr": 34800},
    "cpu_khz": [1785600] * 4 + [2419200] * 3 + [2841600],
    "gpu": {"kind": "kgsl", "path": "/sys/class/kgsl/kgsl-3d0", "hz": 585000000},
    "cpu_max_khz": [1785600] * 4 + [2419200] * 3 + [2841600],
    "opencl_lib": "libOpenCL.so",
    "nnapi": ["qti-default", "qti-dsp", "qti-gpu", "nnapi-reference"],
    "hexagon": {"interface": "/vendor/lib64", "skel_dir": "/vendor/lib/rfsa/adsp"},
}
#: A low-end phone: a Mali GPU with OpenGL ES only (no OpenCL library), no Hexagon, and
#: only NNAPI's own CPU implementation.
_GALAXY_A = {
    "serial": "sim-a14",
    "props": {
        "ro.product.manufacturer": "samsung",
        "ro.product.model": "SM-A145F",
        "ro.product.name": "a14xx",
        "ro.product.device": "a14",
        "ro.build.version.sdk": "34",
        "ro.build.version.release": "14",
        "ro.board.platform": "mt6769",
        "ro.soc.manufacturer": "Mediatek",
        "ro.soc.model": "MT6769V/CZ",
        "ro.hardware.egl": "mali",
        "ro.product.cpu.abi": "arm64-v8a",
        "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
    },
    "gles": {"vendor": "ARM", "renderer": "Mali-G52 MC2", "version": "OpenGL ES 3.2 v1.r32p1"},
    "thermal": {"soc_max": 38000, "battery": 30500},
    "cpu_khz": [1800000] * 6 + [2000000] * 2,
    "gpu": {"kind": "mali", "path": "/sys/class/devfreq/13000000.mali", "hz": 950000000},
    "cpu_max_khz": [1800000] * 6 + [2000000] * 2,
    "nnapi": ["nnapi-reference"],
}
#: Built-in profiles by name (`devicefarm adb-sim --profile pixel-7`).
BUILTIN: dict[str, dict[str, Any]] = {
    "pixel-7": _PIXEL,
    "galaxy-s23": _GALAXY,
    "pixel-4": _PIXEL4,
    "galaxy-a14": _GALAXY_A,
}


def load_profile(spec: str | Path | dict[str, Any]) -> Profile:
    """A profile from a built-in name, a .json/.yaml file, or a dict."""
    if isinstance(spec, dict):
        return Profile.from_dict(spec)
    if str(spec) in BUILTIN:
        return Profile.from_dict(BUILTIN[str(spec)])
    path = Path(spec)
    try:
        text = path.read_text()
    except OSError as exc:
        raise JobError(
            f"profile {str(spec)!r} is neither a file nor a built-in ({', '.join(BUILTIN)})"
        ) from exc
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise JobError("YAML profiles need PyYAML (pip install pyyaml)") from exc
        raw = yaml.safe_load(text)
    else:
        raw = json.loads(text)
    if not isinstance(raw, dict):
        raise JobError(f"profile {path} must be a mapping")
    return Profile.from_dict(raw)
