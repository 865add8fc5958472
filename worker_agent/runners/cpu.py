"""The host CPU through the numpy reference interpreter."""

from __future__ import annotations

from .tools import ToolsRunner


class CpuRunner(ToolsRunner):
    kind = "cpu"
