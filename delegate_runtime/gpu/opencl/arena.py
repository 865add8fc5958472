"""One device allocation holding a partition's buffers: its constants, the GEMM tile
counters, the memory plan's buffers and the shared scratch, each a region at a multiple of
ARENA_UNIT bytes (where the session runs copies that take the arena; else a buffer each).

A model's own kernels (opencl/specialize.py) take the arena itself and their buffers'
offsets in it: NVIDIA's driver spends about 0.37 us of host time per buffer argument on
every launch (11 buffers: 12.0 us a launch, one: 7.9 us;
docs/notebook/15-2026-11-28-one-allocation-per-partition-every-launch-a-copy.md), and the
host's time per launch is what bounds most models. Kernels that take buffers (the
conversions, the shared program's) get a region as a sub-buffer, made when first asked
for: each sub-buffer made every launch naming the arena dearer on NVIDIA (NASNet's 588:
12.9 us a launch against 4.6 with none), so copies in and out address the arena at an
offset instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .launch import round_up

#: Regions start at multiples of this many bytes; specialized kernels take their buffers'
#: offsets in these units (one int each).
ARENA_UNIT = 512

#: A region's key: ("buffer", plan buffer id), ("const", key), ("scratch",), ("counters",).
RegionKey = tuple


@dataclass
class ArenaImage:
    """A partition's regions laid out without the device: their sizes and, in a whole
    arena, their offsets and the host bytes of its uploaded part (the constants, then the
    zeroed counters), else what each uploaded region holds. A warm start lays it out while
    NVIDIA's driver makes the context (EfficientNetB0's 21 MB of float32 weights: 6-11 ms
    on an H100's host, off the 70-100 ms of upload after the context)."""

    sizes: dict[RegionKey, int]
    whole: bool
    contents: dict[RegionKey, np.ndarray] = field(default_factory=dict)
    offsets: dict[RegionKey, int] = field(default_factory=dict)
    nbytes: int = 0
    host: np.ndarray | None = None

    @classmethod
    def lay_out(
        cls,
        base_align_bits: int,
        consts: dict[str, np.ndarray],
        n_counters: int,
        buffer_bytes: list[int],
        scratch_bytes: int,
        whole: bool,
    ) -> ArenaImage:
        """The regions of `consts` (uploaded), `n_counters` counters (zeroed), the plan's
        buffers and the scratch, on a device whose sub-buffers align to `base_align_bits`."""
        contents: dict[RegionKey, np.ndarray] = {("const", k): v for k, v in consts.items()}
        contents[("counters",)] = np.zeros(n_counters, np.int32)
        sizes = {key: v.nbytes for key, v in contents.items()}
        sizes.update({("buffer", i): n for i, n in enumerate(buffer_bytes)})
        sizes[("scratch",)] = scratch_bytes
        sizes = {key: max(4, n) for key, n in sizes.items()}
        if not whole:
            return cls(sizes, whole, contents)
        step = max(ARENA_UNIT, base_align_bits // 8)  # sub-buffers need the device's alignment
        offsets: dict[RegionKey, int] = {}
        at = upload_end = 0
        for key, n in sizes.items():
            offsets[key] = at
            at = round_up(at + n, step)
            if key == ("counters",):
                upload_end = at
        host = np.zeros(upload_end, np.uint8)
        for key, v in contents.items():
            start = offsets[key]
            host[start : start + v.nbytes] = v.reshape(-1).view(np.uint8)
        return cls(sizes, whole, offsets=offsets, nbytes=at, host=host)


class Arena:
    """A partition's buffers as regions: of one allocation (`whole`), their offsets and a
    sub-buffer per region asked for; else each region a buffer of its own, as the shared
    program's kernels take them (no sub-buffers to slow the driver).

    Constants and the zeroed counters come first (one upload into a whole arena); the
    plan's buffers and the scratch follow, uninitialised."""

    def __init__(self, ctx: Any, queue: Any, image: ArenaImage):
        import pyopencl as cl

        self.sizes = image.sizes
        self.whole = image.whole
        self._regions: dict[RegionKey, Any] = {}
        if not image.whole:
            mf = cl.mem_flags
            for key, n in self.sizes.items():
                flags = mf.READ_ONLY if key[0] == "const" else mf.READ_WRITE
                v = image.contents.get(key)
                self._regions[key] = (
                    cl.Buffer(ctx, flags | mf.COPY_HOST_PTR, hostbuf=v)
                    if v is not None and v.nbytes
                    else cl.Buffer(ctx, flags, n)
                )
            self.nbytes = sum(b.size for b in self._regions.values())
            return
        self.offsets = image.offsets
        self.nbytes = image.nbytes
        self.buffer = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, self.nbytes)
        cl.enqueue_copy(queue, self.buffer, image.host, is_blocking=True)

    def region(self, key: RegionKey) -> Any:
        """Region `key` as a buffer: its own, or a sub-buffer made when first asked for."""
        if key not in self._regions:
            self._regions[key] = self.buffer.get_sub_region(self.offsets[key], self.sizes[key])
        return self._regions[key]

    def locate(self, key: RegionKey) -> tuple[Any, int]:
        """Region `key` as a buffer and a byte offset into it, for copies."""
        if self.whole:
            return self.buffer, self.offsets[key]
        return self._regions[key], 0

    @property
    def sub_buffers(self) -> int:
        """Sub-buffers of a whole arena made so far."""
        return len(self._regions) if self.whole else 0

    def units(self, key: RegionKey) -> int:
        """Region `key`'s offset in ARENA_UNITs (a whole arena's)."""
        return self.offsets[key] // ARENA_UNIT
