"""A model's lowering kept in the kernel cache: a warm start reads it instead of lowering.

A warm start of a large model spent most of its time on host work before its first
launch: NASNetMobile's lowering (its partition's launches, their constants in the kernels'
layouts, the specialized and persistent kernels' sources) took 153-238 ms of a 321-438 ms
warm start on an H100's host, with every program unit already cached (docs/benchmarks.md).
The lowering is a function of the model, the session's precision and switches, the
device's facts and plan, the partitions and this code, so a session keeps what it made
(the ModelProgram: units, partitions' launches and constants) in the kernel cache, keyed
by all of those and a digest of the delegate's own source files, and the next session with
the same key reads it back. The entry is a pickle in the cache's checked format
(cache.py: header, checksum, atomic write) in a folder of the user's private cache, the
same trust as the program binaries beside it; one that fails to read or load is removed
and the lowering made again. What it saves depends on the host: 153-238 ms of lowering on
one H100 host, where reading NASNetMobile's 37.7 MB entry takes 111-134 ms, but on a faster
one the lowering took 129-132 ms and the read 114-127; with its units loaded beside it
(early_program.py) that host's warm start went from 252-260 to 221-243 ms.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

from ...errors import UsageError
from .cache import CacheKey, KernelCache

#: The entries' token (their file names begin with it) and the kernel cache's folder they
#: lie in (beside the program units' entries, not among them).
TOKEN = "lowering"
SUBDIR = "lowering"
#: The delegate's own source: its package's files of these kinds.
SOURCE_SUFFIXES = (".py", ".cl", ".in", ".c")
#: The folder's bound in bytes ($DEVICEFARM_LOWERING_CACHE_BYTES): a lowering holds the
#: model's constants and its kernels' sources (NASNetMobile's 37.7 MB, DenseNet121 int8's
#: 47 MB), so a lab's hundreds of models would fill a disk; past it the least recently
#: used entries go.
ENV_BOUND = "DEVICEFARM_LOWERING_CACHE_BYTES"
DEFAULT_BOUND = 2 * 1024**3


def bound_bytes() -> int:
    """The folder's bound: $DEVICEFARM_LOWERING_CACHE_BYTES (0: keep nothing), else 2 GiB."""
    raw = os.environ.get(ENV_BOUND, "").strip()
    if not raw:
        return DEFAULT_BOUND
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"${ENV_BOUND} must be a whole number of bytes, not {raw[:40]!r}")
    return value


@functools.cache
def code_digest() -> str:
    """SHA-256 of the delegate's source files (delegate_runtime/, every file of
    SOURCE_SUFFIXES, by path): a lowering another version of the code made is never read."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def lowering_key(device: str, driver: str, facts: tuple[Any, ...], token: str = TOKEN) -> CacheKey:
    """The key of a lowering made on `device` (name) under `driver` from `facts` (every
    input of the lowering but the code: their reprs must say them whole); `token` names
    what is kept of it (early_program.py keeps its program's units under another)."""
    return CacheKey(
        token=token,
        device=device,
        driver=driver,
        options=code_digest(),
        source_sha256=hashlib.sha256(repr(facts).encode()).hexdigest(),
    )


def load(cache: KernelCache, key: CacheKey) -> Any | None:
    """The lowering stored under `key`, or None (none, or one that does not load: removed)."""
    blob = cache.load(key)
    if blob is None:
        return None
    try:
        kept = pickle.loads(blob)
    except Exception:  # noqa: BLE001 - a stale or damaged entry is made again
        cache._reject(cache.path(key))
        return None
    with contextlib.suppress(OSError):
        os.utime(cache.path(key))  # used now: the last to go (`store`'s bound)
    return kept


def store(cache: KernelCache, key: CacheKey, lowering: Any) -> None:
    """Keep `lowering` under `key` (written atomically; a failure to write loses nothing
    but the next start's time), then the folder within its bound (`bound_bytes`): the
    entries used least recently removed first."""
    bound = bound_bytes()
    if bound == 0:
        return
    blob = pickle.dumps(lowering, protocol=pickle.HIGHEST_PROTOCOL)
    if len(blob) > bound:
        return
    with contextlib.suppress(OSError):
        cache.store(key, blob)
        _within(cache.dir, bound)


def _within(folder: Path, bound: int) -> None:
    """Remove `folder`'s entries, least recently used first, until they fit in `bound`."""
    entries = []
    for path in folder.glob("*.bin"):
        with contextlib.suppress(OSError):
            st = path.stat()
            entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= bound:
            return
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
