"""The grid each persistent kernel held at, kept beside its unit's kernel-cache entry.

A session tries each persistent kernel once before it keeps it (executor.py's `_persist`),
from the most groups persistent.grid_sizes offers down: a grid the device cannot hold at
once spins to its limit before it fails, 52 ms of EfficientNetB0's 220 ms warm start on an
H100 (one 264-group trial failing, then 132 holding in 0.04 ms: `python
bench/diag_warm_start.py --trials`). The entry's fingerprint names the device, the driver, the
build options and the kernel's source, so the grid that held there is tried first the
next time, and the larger ones that failed are not tried again. It is still tried: where
it fails now, the smaller grids follow.

A record is `<entry>.grids`, JSON of kernel name -> groups, written atomically and removed
with its entry (cache.py's SIDECARS); one that cannot be read is ignored (and written anew
once a grid holds).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from .cache import SIDECARS, write_atomically


def _record(entry: str) -> Path:
    return Path(entry + SIDECARS[0])


def _read(entry: str) -> dict[str, int]:
    try:
        got = json.loads(_record(entry).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(got, dict):
        return {}
    return {k: v for k, v in got.items() if isinstance(v, int) and not isinstance(v, bool)}


def held(entry: str | None, kernel: str) -> int | None:
    """The groups `kernel` of the cache entry `entry` last held at, or None (no entry, no
    record)."""
    return _read(entry).get(kernel) if entry else None


def remember(entry: str | None, kernel: str, groups: int) -> None:
    """Keep that `kernel` of `entry` held at `groups` (nothing without an entry; a
    cache that cannot be written loses only the record)."""
    if not entry:
        return
    grids = {**_read(entry), kernel: groups}
    with contextlib.suppress(OSError):
        write_atomically(_record(entry), [json.dumps(grids).encode()], sync=False)


def to_try(sizes: list[int], known: int | None) -> list[int]:
    """`sizes` (most groups first) from `known` on, where it is one of them: the grids
    above it failed before; else all of them."""
    return sizes[sizes.index(known) :] if known in sizes else sizes
