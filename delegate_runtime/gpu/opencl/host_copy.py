"""An input's copy into the host memory the GPU reads (host_edges.py's mappings).

With host edges the invoke copies each input into its mapping before the launch, and the
GPU then reads it across the bus. `host_copy.c` (built with the launch loop,
native_loop.py) shares a large copy with helper threads that spin a while after each copy
and sleep after that, and may write it with non-temporal stores, which the GPU reads
without snooping a core's cache. Smaller copies, and processes without the C helpers,
copy with numpy.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

import numpy as np

#: Helper threads beside the caller, at most a quarter of the machine's cores (0: numpy).
HELPERS = 3
#: Overrides HELPERS (e.g. 0 on a host whose cores are all spoken for).
ENV = "DEVICEFARM_GPU_COPY_HELPERS"
#: Copies below this many bytes stay with numpy (a helper's wake-up costs more).
MIN_BYTES = 128 * 1024
#: Bytes a thread claims at a time.
CHUNK_BYTES = 32 * 1024
#: Non-temporal stores (the lines leave the cores' caches on the way).
STREAMING = False
#: How long a helper spins for the next copy before it sleeps (microseconds): back-to-back
#: invokes find it awake; a camera's 33 ms between frames does not (the caller then wakes
#: it and starts alone).
SPIN_US = 500


@dataclass(frozen=True)
class Settings:
    """The constants above, as a session read them when it was made."""

    helpers: int
    min_bytes: int
    chunk_bytes: int
    streaming: bool
    spin_us: int

    @classmethod
    def current(cls) -> Settings:
        wanted = HELPERS
        if os.environ.get(ENV, "").strip():
            try:
                wanted = int(os.environ[ENV])
            except ValueError:
                raise ValueError(f"{ENV} must be a whole number of threads") from None
        # spinning helpers want cores of their own: a quarter of the machine at most
        helpers = max(0, min(wanted, (os.cpu_count() or 1) // 4))
        return cls(helpers, MIN_BYTES, CHUNK_BYTES, STREAMING, SPIN_US)


def copy(native: ctypes.CDLL | None, dst: np.ndarray, src: np.ndarray, how: Settings) -> None:
    """dst[...] = src, through the C helpers where they are and the copy is large."""
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
    native.host_copy(
        dst.ctypes.data,
        src.ctypes.data,
        src.nbytes,
        how.chunk_bytes,
        how.helpers,
        how.streaming,
        how.spin_us,
    )
