"""A simulated phone that speaks adbd's TCP transport, for tests without phones.

`adb connect 127.0.0.1:PORT` adds it as a device of the real adb server; it serves the
`shell:` (v1, raw) and `sync:` services from an in-memory filesystem, answers `getprop`,
`dumpsys SurfaceFlinger` and a few file commands, and runs a `benchmark_model` that
measures with delegate_runtime. Its shell is not a shell: command lines are split with
shlex and only simulated commands run; every line received is recorded.
"""

from .device import SimulatedPhone
from .profile import Faults, Profile, load_profile

__all__ = ["Faults", "Profile", "SimulatedPhone", "load_profile"]
