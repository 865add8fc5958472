"""The agent's device groups: which devices share a process (worker_agent.group), and those
processes started, steered and restarted.

Opt-in: `devicefarm worker --group-devices N` (or `DEVICEFARM_GROUP_DEVICES=N`) serves the
devices whose jobs need no process of their own, N to a process; 0, the default, gives
every device a consumer process of its own, as before. Grouped: no-op devices and phones
(the tool runs on the phone and its output is captured per run). CPU reference and OpenCL
devices measure on this host and keep their own consumer (measurement isolation).

A device stays in the group it was first given; the agent says `serve` when it should
consume and `pause` when it should not (quarantined), and restarts a group process that
exited, serving its devices again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from delegate_runtime.errors import UsageError

from .devices import DeviceInfo

ENV_GROUP_DEVICES = "DEVICEFARM_GROUP_DEVICES"
#: Device kinds a group serves; the others keep a consumer process each.
GROUPED_KINDS = frozenset({"noop", "android"})
#: The most devices one group process may serve.
MAX_GROUP_DEVICES = 10_000
#: A group process that exits is started again after this long.
RESTART_DELAY_S = 2.0


def group_devices_default() -> int:
    """Devices per group process from `DEVICEFARM_GROUP_DEVICES` (0, the default: none)."""
    raw = os.environ.get(ENV_GROUP_DEVICES, "").strip()
    if not raw:
        return 0
    try:
        size = int(raw)
    except ValueError:
        raise UsageError(f"{ENV_GROUP_DEVICES}={raw[:40]!r} is not a whole number") from None
    return checked_size(size, ENV_GROUP_DEVICES)


def checked_size(size: int, what: str = "--group-devices") -> int:
    if not 0 <= size <= MAX_GROUP_DEVICES:
        raise UsageError(f"{what} must be from 0 to {MAX_GROUP_DEVICES}, not {size}")
    return size


@dataclass
class GroupProcess:
    """One group process and the devices given to it."""

    number: int
    proc: subprocess.Popen
    members: set[str] = field(default_factory=set)  #: given to it (kept across restarts)
    served: set[str] = field(default_factory=set)  #: told to consume now
    exited_at: float | None = None

    def tell(self, line: str) -> bool:
        """Send one control line; False when the process is gone."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True


class DeviceGroups:
    """An agent's group processes, `size` devices each at most (0: no groups)."""

    def __init__(self, size: int, spawn: Callable[[int], subprocess.Popen]):
        self.size = size
        self.spawn = spawn  #: spawn(number) starts group process `number`
        self.groups: list[GroupProcess] = []

    def takes(self, device: DeviceInfo) -> bool:
        """Whether `device` is served by a group (else by a consumer of its own)."""
        return self.size > 0 and device.kind in GROUPED_KINDS

    def group_of(self, key: str) -> GroupProcess | None:
        return next((g for g in self.groups if key in g.members), None)

    def keep(self, wanted: dict[str, DeviceInfo], say: Callable[[str], None]) -> None:
        """Serve exactly `wanted` (the grouped devices that are not quarantined): restart
        exited processes after RESTART_DELAY_S, pause the rest, serve the new."""
        now = time.monotonic()
        for g in self.groups:
            if g.proc.poll() is None:
                continue
            g.exited_at = g.exited_at or now
            if now - g.exited_at >= RESTART_DELAY_S:
                say(
                    f"device group {g.number} exited ({g.proc.returncode}); restarting it "
                    f"for {len(g.members)} devices"
                )
                g.proc = self.spawn(g.number)
                g.served.clear()
                g.exited_at = None
        for g in self.groups:
            for key in sorted(g.served - set(wanted)):
                g.tell(f"pause {key}")
                g.served.discard(key)
        for key, device in wanted.items():
            g = self.group_of(key) or self._room()
            g.members.add(key)
            live = g.exited_at is None and g.proc.poll() is None
            if key not in g.served and live and g.tell(f"serve {device.to_json()}"):
                g.served.add(key)

    def _room(self) -> GroupProcess:
        """A group with room for one more device, started when none has."""
        for g in self.groups:
            if len(g.members) < self.size:
                return g
        number = len(self.groups)
        g = GroupProcess(number, self.spawn(number))
        self.groups.append(g)
        return g

    def processes(self) -> list[subprocess.Popen]:
        return [g.proc for g in self.groups]

    def stop(self, grace_s: float) -> None:
        """Warm shutdown of every group (jobs under way end), SIGKILL after `grace_s`."""
        live = [g.proc for g in self.groups if g.proc.poll() is None]
        for proc in live:
            with contextlib.suppress(OSError, ValueError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in live:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
