"""Devices as an agent knows them: a stable key and the facts allowlists are decided on."""

from __future__ import annotations

import json
import re
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

_ODD = re.compile(r"[^a-z0-9_.]+")


def canonical(text: str) -> str:
    """Lower case; spaces and '-' become '_' (as the GPU compatibility list does)."""
    out = _ODD.sub("_", text.strip().lower().replace("-", "_").replace(" ", "_"))
    return re.sub(r"_+", "_", out).strip("_") or "unknown"


def host_name() -> str:
    return canonical(socket.gethostname())


@dataclass
class DeviceInfo:
    """One device on this host, with its facts (columns of the devices table)."""

    key: str
    kind: str  #: cpu, opencl, android, noop: picks the runner
    vendor: str = ""
    model: str = ""
    renderer: str = ""
    driver_version: str = ""
    api_version: str = ""
    android_sdk: int | None = None
    host: str = ""
    tags: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  #: everything else discovered

    def row(self) -> dict[str, Any]:
        """The devices-table columns for this device."""
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.row())

    @classmethod
    def from_json(cls, text: str) -> DeviceInfo:
        return cls(**json.loads(text))
