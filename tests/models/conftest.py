"""The real-model tier: fixtures for zoo models, LiteRT goldens and the OpenCL device.

MediaPipe models are fetched from PyPI at test time (a failed download fails under CI=true);
Keras models are present where scripts/make_keras_zoo.py has run (scripts/test.sh runs it
where a file is missing, in CI too). The cases and goldens are labkit.zoo_cases' (benches
share them); here what is missing becomes a skip, or a failure under CI=true.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pytest

from labkit import zoo_cases
from labkit.zoo import ZooUnavailable
from labkit.zoo_cases import (
    KERAS_CPU_OPS,
    OPENWAKEWORD_CPU_OPS,
    REFERENCE,
    XNNPACK,
    Golden,
    ZooCase,
    input_sets,
    output_scale,
)
from tests.conftest import require

__all__ = [
    "KERAS_CPU_OPS",
    "OPENWAKEWORD_CPU_OPS",
    "REFERENCE",
    "XNNPACK",
    "Golden",
    "ZooCase",
    "golden",
    "goldens",
    "input_sets",
    "keras_case",
    "mediapipe_case",
    "openwakeword_case",
    "output_scale",
]

T = TypeVar("T")


def _required(make: Callable[..., T], *args) -> T:
    try:
        return make(*args)
    except ZooUnavailable as e:
        require(False, str(e))
        raise  # unreachable: require skips or fails


def golden(case: ZooCase) -> Golden:
    """The model's outputs in LiteRT, once per session (shared by the three backends)."""
    return _required(zoo_cases.golden, case)


def goldens(case: ZooCase, sets: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """The golden of each input set (zoo_cases.goldens)."""
    return _required(zoo_cases.goldens, case, sets)


def mediapipe_case(name: str) -> ZooCase:
    return _required(zoo_cases.mediapipe_case, name)


def openwakeword_case(name: str) -> ZooCase:
    return _required(zoo_cases.openwakeword_case, name)


def keras_case(name: str, variant: str) -> ZooCase:
    return _required(zoo_cases.keras_case, name, variant)


@pytest.fixture(scope="session")
def opencl_device() -> str:
    """The OpenCL device the delegate will pick (skip locally, fail in CI without one)."""
    try:
        from delegate_runtime.gpu.opencl.runtime import describe, list_devices
    except ImportError:
        require(False, "pyopencl (the GPU delegate's OpenCL binding)")
    devices = list_devices()
    require(bool(devices), "an OpenCL device (a GPU driver or PoCL)")
    return describe(devices[0][2]).name
