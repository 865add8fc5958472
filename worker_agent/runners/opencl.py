"""A desktop OpenCL device through delegate_runtime's GPU delegate (PoCL included)."""

from __future__ import annotations

from typing import Any

from .tools import ToolsRunner


class OpenclRunner(ToolsRunner):
    kind = "opencl"

    def device_spec(self) -> str | None:
        # NOTE: platform/device indices can change between boots; the agent rediscovers
        # its devices at every start, so the spec is fresh for this process.
        return self.device.facts.get("opencl_spec")

    def check_canary_session(self, session: Any) -> None:
        refuse_another_launch_loop(session)

    def versions(self) -> dict[str, Any]:
        out = super().versions()
        try:
            import pyopencl

            out["pyopencl"] = pyopencl.VERSION_TEXT
        except ImportError:
            pass
        out["opencl_driver"] = self.device.driver_version
        return out


def refuse_another_launch_loop(session: Any) -> None:
    """A GPU whose session asked for the C launch loop (the shipped path, unless the
    native_loop switch is off) but runs another: this agent image would time another path
    than the GPU's other agents (a missing C compiler), so its canary fails and the device
    is quarantined with the reason, rather than storing figures of another loop."""
    from delegate_runtime.errors import DeviceError

    info, plan = getattr(session, "device_info", None), getattr(session, "plan", None)
    if info is None or plan is None or not info.is_gpu or not plan.native_library:
        return
    if session.launch_loop != "c":
        raise DeviceError(
            f"the GPU's launch loop would run in {session.launch_loop or 'no'} loop, not C "
            f"({session.launch_loop_why or 'the native library is unavailable'}): install a "
            "C compiler (or set CC), or set DEVICEFARM_NATIVE_LOOP=0 on every agent of this GPU"
        )
