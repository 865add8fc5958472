"""The GPU-machine tier: the farm's own flows on a real GPU, with default settings.

CI has no GPU: this tier runs by hand on the GPU machine (`scripts/gpu_tier.sh`, through
the `device` tool; docs/gpu_machine.md) for every change that touches the farm or the
delegate. Elsewhere it is not collected unless DEVICEFARM_GPU_TIER=1, and then a missing
GPU fails rather than skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENABLE = "DEVICEFARM_GPU_TIER"
#: The model the tier measures (MobileNet v1 1.0 224, float32, from ../shared/models).
MODEL_ENV = "DEVICEFARM_GPU_TIER_MODEL"
DEFAULT_MODEL = (
    Path(__file__).resolve().parents[3] / "shared/models/mobilenet_v1_1.0_224_fp32.tflite"
)
#: A model below the GPU's minimum work (gpu/placement.py): openWakeWord's alexa_v0.1
#: (labkit.zoo.openwakeword_model), 0.2 million multiply-adds.
SMALL_MODEL_ENV = "DEVICEFARM_GPU_TIER_SMALL_MODEL"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if os.environ.get(ENABLE) != "1" and collection_path.suffix == ".py":
        return True
    return None


@pytest.fixture(scope="session")
def gpu_model() -> Path:
    path = Path(os.environ.get(MODEL_ENV) or DEFAULT_MODEL)
    assert path.is_file(), f"the GPU tier's model {path} is missing (set {MODEL_ENV})"
    return path


@pytest.fixture(scope="session")
def nvidia_device() -> str:
    from delegate_runtime.gpu.opencl.runtime import list_devices

    names = [d.name for _, _, d in list_devices()]
    gpus = [n for n in names if "NVIDIA" in n.upper()]
    assert gpus, (
        f"no NVIDIA OpenCL device (found {names}); register the driver (docs/gpu_machine.md)"
    )
    return "NVIDIA"


@pytest.fixture(scope="session")
def small_model() -> Path:
    raw = os.environ.get(SMALL_MODEL_ENV)
    if not raw:
        from labkit.zoo import openwakeword_model

        return openwakeword_model("alexa_v0.1")
    path = Path(raw)
    assert path.is_file(), f"the GPU tier's small model {path} is missing ({SMALL_MODEL_ENV})"
    return path
