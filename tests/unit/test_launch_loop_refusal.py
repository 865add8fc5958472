"""An agent image whose GPU would run another launch loop than the C one its session asked
for (no C compiler) fails its canary with the reason, so the device is quarantined instead
of storing figures of another path (worker_agent.runners.opencl)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from delegate_runtime.errors import DeviceError
from worker_agent.runners.opencl import refuse_another_launch_loop


def session(is_gpu: bool, asked: bool, loop: str, why: str = "") -> SimpleNamespace:
    return SimpleNamespace(
        device_info=SimpleNamespace(is_gpu=is_gpu),
        plan=SimpleNamespace(native_library=asked),
        launch_loop=loop,
        launch_loop_why=why,
    )


def test_a_gpu_without_the_c_loop_it_asked_for_is_refused_with_the_reason() -> None:
    with pytest.raises(DeviceError, match="no C compiler: cc not found.*DEVICEFARM_NATIVE_LOOP"):
        refuse_another_launch_loop(session(True, True, "python", "no C compiler: cc not found"))


@pytest.mark.parametrize(
    "case",
    [
        session(True, True, "c"),  # the shipped path
        session(True, False, "python"),  # native_loop switched off: every agent alike
        session(False, True, "python"),  # a CPU's OpenCL (PoCL): no GPU's figures claimed
        SimpleNamespace(),  # no GPU partition: nothing was opened
    ],
    ids=["c-loop", "switched-off", "cpu-device", "no-partition"],
)
def test_other_sessions_pass(case: SimpleNamespace) -> None:
    refuse_another_launch_loop(case)
