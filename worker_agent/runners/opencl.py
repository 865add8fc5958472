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

    def versions(self) -> dict[str, Any]:
        out = super().versions()
        try:
            import pyopencl

            out["pyopencl"] = pyopencl.VERSION_TEXT
        except ImportError:
            pass
        out["opencl_driver"] = self.device.driver_version
        return out
