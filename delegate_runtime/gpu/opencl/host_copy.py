"""An input's copy into the host memory the GPU reads (host_edges.py's mappings).

With host edges the invoke copies each input into its mapping before the launch, and the
GPU then reads it across the bus. `host_copy.c` (in the native library with the launch
loop: native_library.py) shares a large copy with helper threads. Smaller copies, and
processes without the library (no compiler, or DEVICEFARM_NATIVE_LOOP=0), copy with numpy.

The helpers' CPU. A helper spins (busy, one core) for SPIN_US after a copy so that the
next invoke finds it awake, then sleeps on a futex until a copy wakes it. In a stream of
back-to-back invokes the helpers therefore never sleep: each costs a core for the whole
stream (MobileNet v1 on an H200 host: 1.0-1.1 ms of CPU per 0.27 ms invoke with three
helpers, 0.33-0.35 ms with none). They spin only after a copy that came within SPIN_US of
the one before: a paced stream (a camera's 33 ms between frames, a server between
requests) wakes them for each copy, and they sleep again at once: a quarter to two fifths
of the CPU that spinning after every copy cost, at the same wall time within 2% (6% slower
paced just past the spin; docs/notebook/23-2026-12-02-the-input-copy-s-helpers-cpu-per-invoke-spinning.md).

How many. `helper_plan()` decides, and says why, for the result records: a quarter of the
CPUs this process may use (`delegate_runtime.host_cpus`: affinity and cgroup quota, not
the machine's count), at most the switches' `copy_helpers_default`, none under 4 usable
CPUs; a worker agent lowers it with BUDGET_ENV so that the consumers of its host's devices
fit its CPUs beside the CPU reference (worker_agent/cpu_sets.py); ENV, the user's explicit
choice, overrides both. The switches (gpu/switches.py) parse both variables and hold the
copy's tuning constants.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from delegate_runtime import host_cpus

from ..switches import KNOBS, MAX_COPY_HELPERS, Switches

#: The user's explicit helper count (0: the caller alone), still a quarter of the usable
#: CPUs at most; overrides the default and the agent's budget.
ENV = KNOBS["copy_helpers"].env
#: Set by the worker agent for its GPU consumers: the most helpers a job there may start,
#: so that the host's consumers, their helpers and the CPU reference fit its CPUs.
BUDGET_ENV = KNOBS["copy_helper_budget"].env

#: time.monotonic() when this process's last shared copy ended.
_last_end = float("-inf")


def helper_plan(switches: Switches | None = None) -> dict[str, Any]:
    """The helper threads a session with `switches` (None: from the environment now)
    starts, and why: {"helpers": n, "usable_cpus": m, "source": "default" | "env" |
    "agent", "why": "3 (16 usable CPUs: a quarter, at most 3)"}. `source` names the rule
    that set n: ENV (the user's), the agent's BUDGET_ENV where it lowered the default, or
    the default."""
    switches = Switches.from_env() if switches is None else switches
    usable = host_cpus.usable_cpus()
    quarter = min(usable // 4, MAX_COPY_HELPERS)  # spinning helpers want CPUs of their own
    # the user's count is a request (host_copy.c starts MAX_COPY_HELPERS at most); the
    # agent's budget a ceiling, which on a large host may be above it
    wanted, budget = switches.copy_helpers, switches.copy_helper_budget
    default = switches.copy_helpers_default
    if wanted is not None:
        n = max(0, min(wanted, quarter))
        why = f"{ENV}={wanted}"
        why += f": a quarter of {_cpus(usable)} at most" if n < wanted else ""
        why += f"; the agent's budget of {budget} overridden" if budget is not None else ""
        return _plan(n, usable, "env", why)
    n = min(default, quarter)
    if quarter == 0:  # under 4 usable CPUs
        why = _cpus(usable)
    else:
        why = f"{_cpus(usable)}: a quarter" + (f", at most {default}" if n < quarter else "")
    if budget is not None and budget < n:
        n = budget
        return _plan(
            n,
            usable,
            "agent",
            f"{_cpus(usable)}; the agent's budget beside its other consumers",
        )
    why += f"; within the agent's budget of {budget}" if budget is not None else ""
    return _plan(n, usable, "default", why)


def _cpus(n: int) -> str:
    return f"{n} usable CPU" + ("" if n == 1 else "s")


def _plan(helpers: int, usable: int, source: str, why: str) -> dict[str, Any]:
    return {
        "helpers": helpers,
        "usable_cpus": usable,
        "source": source,
        "why": f"{helpers} ({why})",
    }


@dataclass(frozen=True)
class Settings:
    """What a session's input copies use: its helper plan and its switches' copy
    constants."""

    helpers: int
    min_bytes: int
    chunk_bytes: int
    spin_us: int

    @classmethod
    def current(cls, switches: Switches | None = None) -> Settings:
        """The settings of `switches` (None: from the environment now)."""
        switches = Switches.from_env() if switches is None else switches
        helpers = helper_plan(switches)["helpers"]
        return cls(
            helpers, switches.copy_min_bytes, switches.copy_chunk_bytes, switches.copy_spin_us
        )


def declare_copy(native: ctypes.CDLL) -> None:
    """Declare host_copy.c's entry point in the native library (native_library.py)."""
    fn = native.host_copy
    fn.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_uint32,
    ]
    fn.restype = ctypes.c_uint32


def copy(native: ctypes.CDLL | None, dst: np.ndarray, src: np.ndarray, how: Settings) -> None:
    """dst[...] = src, through the C helpers where they are and the copy is large."""
    global _last_end
    if (
        native is None
        or how.helpers == 0  # the C copy alone is no faster than numpy's
        or src.nbytes < how.min_bytes
        or src.dtype != dst.dtype
        or src.shape != dst.shape
        or not src.flags.c_contiguous
        or not dst.flags.c_contiguous
    ):
        np.copyto(dst, src)
        return
    # the helpers spin after this copy only if it came while they would still be spinning
    back_to_back = (time.monotonic() - _last_end) * 1e6 <= how.spin_us
    native.host_copy(
        dst.ctypes.data,
        src.ctypes.data,
        src.nbytes,
        how.chunk_bytes,
        how.helpers,
        how.spin_us if back_to_back else 0,
    )
    _last_end = time.monotonic()
