"""Whether one phone can run a configuration, from the accelerators its facts record.

Discovery (worker_agent.android.discovery) stores `facts["accelerators"]`:

    {"gpu_backends": ["cl", "gl"],              # OpenCL library found; GLES >= 3.1
     "nnapi_devices": ["google-edgetpu", "nnapi-reference"],   # as NNAPI names them
     "hexagon": {"interface": "/vendor/lib64/libhexagon_interface.so",
                 "skel_dir": "/vendor/lib/rfsa/adsp", "skel": ["libhexagon_nn_skel.so"]},
     "cpu": {"cores": 8, "big": 4, "little": 4, "max_khz": [...]}}

A phone that cannot run a configuration is refused with the words the official tool
would print when it tried (the sources are named), before anything runs: the Hexagon
provider would only warn and run on the CPU, and results would carry the wrong name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .configs import RunConfig

FACTS_KEY = "accelerators"
#: Android 8.1 (API 27) brought NNAPI; a named accelerator needs Android 10 (API 29).
NNAPI_MIN_SDK = 27
NNAPI_NAMED_MIN_SDK = 29
HEXAGON_MISSING = (
    "Could not create Hexagon delegate: platform may not support delegate or required "
    "libraries are missing"  # tflite/tools/delegates/hexagon_delegate_provider.cc
)
NNAPI_UNSUPPORTED = (
    "NNAPI acceleration is unsupported on this platform."  # nnapi_delegate_provider.cc
)


def accelerator_not_found(name: str, devices: list[str]) -> str:
    """nnapi_delegate.cc's words for an accelerator the phone does not have."""
    return (
        f"Could not find the specified NNAPI accelerator: {name}. "
        f"Must be one of: {{{','.join(devices)}}}."
    )


def _sdk(facts: dict[str, Any]) -> int | None:
    raw = str(facts.get("ro.build.version.sdk", ""))
    return int(raw) if raw.isdigit() else None


def check_device(config: RunConfig, facts: dict[str, Any]) -> tuple[bool, str]:
    """(True, "") when the phone whose facts these are can run `config`, else the reason."""
    acc = facts.get(FACTS_KEY)
    if config.delegate in ("cpu", "xnnpack"):
        return True, ""
    if config.delegate == "gpu" and config.option("backend") is None:
        return True, ""  # the delegate picks what the phone has (as before discovery)
    if not isinstance(acc, dict):
        return False, (
            f"{config.name}: this phone's accelerators are unknown (registered before the "
            "agent read them); restart its agent to rediscover it"
        )
    if config.delegate == "gpu":
        backend = config.option("backend")
        have = list(acc.get("gpu_backends") or [])
        if backend not in have:
            return False, (
                f"{config.name}: the GPU delegate cannot use backend {backend} here (the phone "
                f"offers {', '.join(have) or 'no GPU backend'}); with --gpu_backend={backend} "
                "it fails instead of falling back"
            )
        return True, ""
    if config.delegate == "nnapi":
        return _nnapi(config, acc, _sdk(facts))
    if config.delegate == "hexagon":
        hexagon = acc.get("hexagon") or {}
        if not (hexagon.get("interface") and hexagon.get("skel")):
            missing = [n for n, ok in (("libhexagon_interface.so", hexagon.get("interface")),
                       ("libhexagon_nn_skel*.so", hexagon.get("skel"))) if not ok]  # fmt: skip
            return False, f"{config.name}: {HEXAGON_MISSING} (no {', '.join(missing)})"
        return True, ""
    return False, f"{config.name}: no check for delegate {config.delegate!r}"


def _nnapi(config: RunConfig, acc: dict[str, Any], sdk: int | None) -> tuple[bool, str]:
    devices = list(acc.get("nnapi_devices") or [])
    if sdk is not None and sdk < NNAPI_MIN_SDK:
        return False, f"{config.name}: {NNAPI_UNSUPPORTED} (Android API {sdk} < 27)"
    name = config.option("accelerator")
    if name is None:
        return True, ""
    if sdk is not None and sdk < NNAPI_NAMED_MIN_SDK:
        return False, (
            f"{config.name}: a named NNAPI accelerator needs Android 10 (API 29); "
            f"this phone has API {sdk}"
        )
    if name not in devices:
        return False, f"{config.name}: {accelerator_not_found(name, devices)}"
    return True, ""
