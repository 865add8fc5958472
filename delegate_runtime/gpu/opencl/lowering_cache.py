"""A model's lowering kept in the kernel cache: a warm start reads it instead of lowering.

A warm start of a large model spent most of its time on host work before its first
launch: NASNetMobile's lowering (its partition's launches, their constants in the kernels'
layouts, the specialized and persistent kernels' sources) took 153-238 ms of a 321-438 ms
warm start on an H100's host, with every program unit already cached (docs/benchmarks.md).
The lowering is a function of the model, the session's precision and switches, the
device's facts and plan, the partitions and this code, so a session keeps what it made
(the ModelProgram: units, partitions' launches and constants) in the kernel cache, keyed
by all of those and a digest of the delegate's own source files, and the next session with
the same key reads it back. The entry lies in a folder of the user's private cache, the
same trust as the program binaries beside it; one that fails its check or does not load is
removed and the lowering made again. What it saves depends on the host: 153-238 ms of lowering on
one H100 host, where reading NASNetMobile's 37.7 MB entry takes 111-134 ms, but on a faster
one the lowering took 129-132 ms and the read 114-127; with its units loaded beside it
(early_program.py) that host's warm start went from 252-260 to 221-243 ms.

An entry is written in a layout of its own (`_Layout`): a header, the pickle without its
arrays, then each array's bytes at an aligned offset (pickle protocol 5's out-of-band
buffers), the whole checked by a CRC-32. It is read through a memory map (or whole, where
the file system cannot map files): the arrays are views of the file, not copies. Reading
ResNet50V2's 110 MB entry as one checksummed pickle took 279 ms of a 418 ms warm start on
an H100's host (read, slice, SHA-256 and unpickle each copied or walked it once; 225 ms on
the 2-core machine), and the constants only travel on to the GPU. A CRC-32 suits a private folder (cache.py's trust): it catches a
damaged or torn file, so the write is not synced either (a crash leaves a file that fails
its check and is made again).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import mmap
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

from ...env_numbers import whole_number
from .cache import MAX_ENTRY_BYTES, CacheKey, KernelCache, prune, write_atomically

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
    return whole_number(ENV_BOUND, DEFAULT_BOUND, 0)


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


#: The entries' layout: its mark and version (bump when it changes), and the alignment of
#: each array's bytes in the file.
MAGIC = b"DFLW"
FORMAT_VERSION = 1
ALIGN = 64


def load(cache: KernelCache, key: CacheKey) -> Any | None:
    """The lowering stored under `key`, its arrays mapped from the file (read-only), or
    None (none, or one that fails its check or does not load: removed)."""
    path = cache.path(key)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if not 8 <= size <= MAX_ENTRY_BYTES:
                raise ValueError("entry size")
            try:
                mapped: mmap.mmap | bytes = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except OSError:  # a file system that cannot map files: read it whole
                mapped = fh.read()
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        cache._reject(path)
        return None
    try:
        kept = _Layout.read(memoryview(mapped), key)
    except Exception:  # noqa: BLE001 - a stale, damaged or foreign entry is made again
        cache._reject(path)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used now: the last to go (`store`'s bound)
    return kept


def store(cache: KernelCache, key: CacheKey, lowering: Any) -> None:
    """Keep `lowering` under `key` (a temporary file, then a rename; a failure to write
    loses nothing but the next start's time), then the folder within its bound
    (`bound_bytes`): the entries used least recently removed first."""
    bound = bound_bytes()
    if bound == 0:
        return
    pieces = _Layout.pieces(lowering, key)
    if sum(len(p) for p in pieces) > min(bound, MAX_ENTRY_BYTES):
        return
    with contextlib.suppress(OSError):
        write_atomically(cache.path(key), pieces, sync=False)  # its check finds a torn one
        prune(cache.dir, bound)


class _Layout:
    """MAGIC, the header's length (4 bytes, little-endian), the header (JSON: version, the
    key's fingerprint, the body's size and CRC-32, the pickle's length, each array's offset
    and length in the body; padded so that the body begins at an ALIGN offset), then the
    body: the pickle, each array at an ALIGN offset."""

    @staticmethod
    def pieces(lowering: Any, key: CacheKey) -> list[Any]:
        """The entry's bytes in order (written one after another: never joined)."""
        arrays: list[pickle.PickleBuffer] = []
        meta = pickle.dumps(lowering, protocol=5, buffer_callback=arrays.append)
        body: list[Any] = [meta]
        spans, end = [], len(meta)
        for buffer in arrays:
            raw = buffer.raw()  # contiguous: numpy hands only those out of band
            pad = -end % ALIGN
            body += [bytes(pad), raw]
            spans.append((end + pad, raw.nbytes))
            end += pad + raw.nbytes
        crc = 0
        for piece in body:
            crc = zlib.crc32(piece, crc)
        header = json.dumps(
            {
                "v": FORMAT_VERSION,
                "fp": key.fingerprint(),
                "size": end,
                "crc32": crc,
                "meta": len(meta),
                "buffers": spans,
            }
        ).encode()
        header += b" " * (-(8 + len(header)) % ALIGN)  # the body, so each array, aligned
        return [MAGIC, len(header).to_bytes(4, "little"), header, *body]

    @staticmethod
    def read(entry: memoryview, key: CacheKey) -> Any:
        """The lowering in `entry`; ValueError where it is not one of `key`'s, whole."""
        if entry[:4] != MAGIC:
            raise ValueError("not a lowering entry")
        n = int.from_bytes(entry[4:8], "little")
        header = json.loads(bytes(entry[8 : 8 + n]))
        body = entry[8 + n :]
        if (
            header.get("v") != FORMAT_VERSION
            or header.get("fp") != key.fingerprint()
            or header.get("size") != len(body)
            or header.get("crc32") != zlib.crc32(body)
        ):
            raise ValueError("a foreign, torn or damaged entry")
        buffers = [body[offset : offset + length] for offset, length in header["buffers"]]
        return pickle.loads(body[: header["meta"]], buffers=buffers)
