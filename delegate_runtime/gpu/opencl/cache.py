"""Compiled-program cache on disk (TFLite's delegate serialization).

Entries are `<dir>/<token>_<fingerprint>.bin`, the fingerprint mixing the token, device,
driver, build options, program source and the cache format. Written through a temporary
file and a rename; each entry carries a header and a checksum, so a corrupt, truncated or
foreign file is detected, removed and rebuilt, never trusted. The directory is created
private (0700). On NVIDIA the "binary" is PTX that the driver still compiles, so the
driver's own compute cache is pointed inside ours too (see `point_driver_cache`). On PoCL
an entry is empty: PoCL keeps each kernel's machine code in its own cache, also pointed
inside ours (program.DRIVER_CACHED says why).

A lab host meets new models, drivers and versions of the delegate for months, so the
entries are bounded ($DEVICEFARM_KERNEL_CACHE_BYTES, 4 GiB): a session that built any
prunes the folder (`prune`, in a thread), the entries used least recently going first (a
load marks its entry used).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...env_numbers import whole_number

#: Bump when the entry layout or the kernels' ABI changes.
CACHE_FORMAT_VERSION = 1
MAGIC = b"DFKC"
#: Entries larger than this are refused when reading (bytes).
MAX_ENTRY_BYTES = 256 * 1024 * 1024
#: The entries' bound in bytes ($DEVICEFARM_KERNEL_CACHE_BYTES): a model's units are 1-5 MB
#: (EfficientNetB0's 33: 3.2 MB), so 4 GiB holds about a thousand models' programs.
ENV_BOUND = "DEVICEFARM_KERNEL_CACHE_BYTES"
DEFAULT_BOUND = 4 * 1024**3
#: What other modules keep beside an entry, `<entry><suffix>` (grid_record.py's grids):
#: removed with it.
SIDECARS = (".grids",)


def bound_bytes() -> int:
    """The entries' bound: $DEVICEFARM_KERNEL_CACHE_BYTES (at least 1 MiB), else 4 GiB."""
    return whole_number(ENV_BOUND, DEFAULT_BOUND, 1 << 20)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "devicefarm" / "kernels"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` with mode 0700 (and tighten it when it exists with wider rights)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o700)
    return path


#: Drivers' own caches kept inside ours: environment variable -> subdirectory. NVIDIA's
#: compute cache (PTX -> machine code) and PoCL's kernel cache (its compiled kernels).
DRIVER_CACHES = {"CUDA_CACHE_PATH": "driver", "POCL_CACHE_DIR": "pocl"}


def point_driver_cache(cache_dir: Path) -> None:
    """Keep the drivers' own caches (DRIVER_CACHES) inside our private directory, so that
    emptying ours empties theirs.

    Must run before the first OpenCL call of the process; a user's own setting is respected.
    """
    for variable, subdir in DRIVER_CACHES.items():
        if variable not in os.environ:
            os.environ[variable] = str(ensure_private_dir(cache_dir / subdir))


def prune(folder: Path, bound: int) -> int:
    """Remove `folder`'s entries (`*.bin`), least recently used first, until they fit in
    `bound` bytes, each with its sidecars, and sidecars whose entry is gone; the number of
    entries removed. Entries another process removes meanwhile are skipped: a session
    whose entry went builds it again."""
    entries, removed = [], 0
    for path in folder.glob("*.bin"):
        with contextlib.suppress(OSError):
            st = path.stat()
            entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= bound:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            removed += 1
            total -= size
    for suffix in SIDECARS:
        for side in folder.glob(f"*.bin{suffix}"):
            if not Path(str(side)[: -len(suffix)]).exists():
                side.unlink(missing_ok=True)
    return removed


def write_atomically(path: Path, pieces: Iterable[Any], sync: bool) -> None:
    """`pieces` (bytes-like) written one after another to a temporary file beside `path`,
    synced to disk where `sync`, then renamed to `path`: a reader sees the old file or the
    new one whole, never a part (the temporary file removed where writing fails)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in pieces:
                fh.write(piece)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class CacheKey:
    token: str
    device: str
    driver: str
    options: str
    source_sha256: str

    def fingerprint(self) -> str:
        blob = json.dumps(
            [
                CACHE_FORMAT_VERSION,
                self.token,
                self.device,
                self.driver,
                self.options,
                self.source_sha256,
            ]
        ).encode()
        return hashlib.sha256(blob).hexdigest()[:32]

    def file_name(self) -> str:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.token)[:64]
        return f"{safe}_{self.fingerprint()}.bin"


class KernelCache:
    """Program binaries on disk, keyed by `CacheKey`."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = ensure_private_dir(Path(directory) if directory else default_cache_dir())
        self.rejected = 0  #: entries found corrupt or foreign and removed

    def path(self, key: CacheKey) -> Path:
        return self.dir / key.file_name()

    def holds(self, key: CacheKey) -> bool:
        """Whether an entry for `key` is on disk (`load` still checks it whole)."""
        return self.path(key).is_file()

    def holds_all(self, keys: Iterable[CacheKey]) -> bool:
        """Whether an entry for every one of `keys` is on disk."""
        return all(self.holds(k) for k in keys)

    def load(self, key: CacheKey) -> bytes | None:
        """The stored binary for `key`, or None (missing, corrupt, truncated or foreign)."""
        path = self.path(key)
        try:
            if path.stat().st_size > MAX_ENTRY_BYTES:
                raise ValueError("entry too large")
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            self._reject(path)
            return None
        payload = self._unpack(raw, key)
        if payload is None:
            self._reject(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: the last to go (`prune`)
        return payload

    def store(self, key: CacheKey, binary: bytes) -> Path:
        """Write atomically: a temporary file in the same directory, then a rename."""
        header = json.dumps(
            {
                "v": CACHE_FORMAT_VERSION,
                "fp": key.fingerprint(),
                "sha256": hashlib.sha256(binary).hexdigest(),
                "size": len(binary),
            }
        ).encode()
        blob = MAGIC + len(header).to_bytes(4, "little") + header + binary
        path = self.path(key)
        write_atomically(path, [blob], sync=True)
        return path

    def _unpack(self, raw: bytes, key: CacheKey) -> bytes | None:
        if len(raw) < 8 or raw[:4] != MAGIC:
            return None
        n = int.from_bytes(raw[4:8], "little")
        if n > len(raw) - 8:
            return None
        try:
            header = json.loads(raw[8 : 8 + n])
        except ValueError:
            return None
        payload = raw[8 + n :]
        ok = (
            isinstance(header, dict)
            and header.get("v") == CACHE_FORMAT_VERSION
            and header.get("fp") == key.fingerprint()
            and header.get("size") == len(payload)
            and header.get("sha256") == hashlib.sha256(payload).hexdigest()
        )
        return payload if ok else None

    def _reject(self, path: Path) -> None:
        self.rejected += 1
        path.unlink(missing_ok=True)
        for suffix in SIDECARS:
            Path(str(path) + suffix).unlink(missing_ok=True)
