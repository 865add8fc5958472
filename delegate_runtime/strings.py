"""TFLite STRING tensors: their buffer encoding and the arrays the interpreter holds.

A STRING tensor's buffer is: int32 count N, N + 1 int32 byte offsets from the start of
the buffer (the last one is the buffer's length), then the strings' bytes, back to back.
The interpreter holds STRING values as object arrays of `bytes`; the reader keeps a STRING
constant's raw buffer (uint8), which `as_strings` decodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .errors import ModelError

STRING_DTYPE = np.dtype(object)
#: Bytes of the count and of each offset.
_INT32 = 4


def encode(values: Iterable[Any]) -> bytes:
    """The TFLite buffer of `values` (bytes or str, str as UTF-8), in row-major order."""
    items = [_as_bytes(v) for v in np.asarray(values, dtype=object).reshape(-1)]
    header = _INT32 * (len(items) + 2)
    offsets = np.cumsum([header] + [len(s) for s in items], dtype=np.int64)
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ModelError(f"strings of {offsets[-1]} bytes overflow TFLite's int32 offsets")
    head = np.concatenate([[len(items)], offsets]).astype("<i4").tobytes()
    return head + b"".join(items)


def decode(raw: bytes | memoryview | np.ndarray, where: str = "string tensor") -> np.ndarray:
    """The strings of a TFLite buffer, as a 1-D object array of bytes (malformed: ModelError)."""
    buf = np.asarray(raw, np.uint8).tobytes() if isinstance(raw, np.ndarray) else bytes(raw)
    if len(buf) < _INT32:
        raise ModelError(f"{where}: a string buffer of {len(buf)} bytes has no count")
    n = int(np.frombuffer(buf, "<i4", 1)[0])
    header = _INT32 * (n + 2)
    if n < 0 or header > len(buf):
        raise ModelError(f"{where}: string count {n} does not fit a {len(buf)}-byte buffer")
    offsets = np.frombuffer(buf, "<i4", n + 1, _INT32).astype(np.int64)
    if offsets[0] < header or offsets[-1] > len(buf) or np.any(np.diff(offsets) < 0):
        raise ModelError(f"{where}: string offsets {offsets.tolist()} are out of order or range")
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = buf[offsets[i] : offsets[i + 1]]
    return out


def as_strings(value: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    """A STRING tensor's value as an object array of bytes of `shape`: a constant's raw
    buffer (uint8) is decoded; a runtime array's str elements become UTF-8 bytes."""
    if value.dtype == np.uint8:
        strings = decode(value, where)
        size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if strings.size != size:
            raise ModelError(f"{where}: {strings.size} strings for shape {list(shape)}")
        return strings.reshape(shape)
    out = np.empty(value.shape, dtype=object)
    for idx, v in np.ndenumerate(value):
        out[idx] = _as_bytes(v)
    return out


def strings_array(values: Iterable[Any], shape: tuple[int, ...] | None = None) -> np.ndarray:
    """An object array of bytes (the interpreter's STRING value) from bytes or str."""
    items = [_as_bytes(v) for v in values]
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out if shape is None else out.reshape(shape)


def _as_bytes(v: Any) -> bytes:
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v)
    if isinstance(v, (str, np.str_)):
        return str(v).encode("utf-8")
    raise ModelError(f"a string tensor holds {type(v).__name__} {v!r}, not bytes or str")
