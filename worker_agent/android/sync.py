"""The host side of adb's sync protocol on one `sync:` stream: STAT, LIST, RECV and SEND,
with the phone's FAIL messages ("write failed: No space left on device") kept.

One stream serves many requests (QUIT ends it); after a FAIL adbd closes the stream, so
the session reopens on the next request.
"""

from __future__ import annotations

import contextlib
import io
import stat
import struct
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from delegate_runtime.errors import DeviceError

from .adb import adb_errors

#: Largest DATA chunk (adbd's SYNC_DATA_MAX).
SYNC_DATA_MAX = 64 * 1024
_REQ = struct.Struct("<4sI")
_STAT = struct.Struct("<III")
_DENT = struct.Struct("<IIII")


class SyncFailed(Exception):
    """The phone answered FAIL; `str()` is its message."""


@dataclass(frozen=True)
class Entry:
    name: str
    mode: int
    size: int
    mtime: int

    @property
    def exists(self) -> bool:
        return self.mode != 0

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


class SyncSession:
    """Sync requests to one phone through the adb server; use as a context manager."""

    def __init__(self, adb: Any, serial: str, timeout_s: float = 60.0):
        self.adb = adb
        self.serial = serial
        self.timeout_s = timeout_s
        self._conn: Any = None

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the stream ---------------------------------------------------------------------

    def _open(self) -> Any:
        if self._conn is None:
            try:
                conn = self.adb.device(self.serial).open_transport(timeout=self.timeout_s)
                conn.send_command("sync:")
                conn.check_okay()
            except adb_errors() as exc:
                raise DeviceError(f"android:{self.serial}: sync unavailable: {exc}") from exc
            self._conn = conn
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(*adb_errors()):
                self._conn.conn.sendall(_REQ.pack(b"QUIT", 0))
            with contextlib.suppress(*adb_errors()):
                self._conn.close()
            self._conn = None

    def _drop(self) -> None:
        with contextlib.suppress(*adb_errors()):
            self._conn.close()
        self._conn = None

    def _read(self, n: int) -> bytes:
        return self._conn.read_exact(n) if n else b""

    def _request(self, kind: bytes, path: str, body) -> Any:
        """Send one request and run `body()` to read its answer; IO errors are DeviceError."""
        conn = self._open()
        raw = path.encode()
        try:
            conn.conn.sendall(_REQ.pack(kind, len(raw)) + raw)
            return body()
        except SyncFailed:
            self._drop()  # adbd ends the service after a FAIL
            raise
        except adb_errors() as exc:
            self._drop()
            raise DeviceError(f"android:{self.serial}: sync {kind.decode()} failed: {exc}") from exc

    def _fail_message(self, length: int) -> SyncFailed:
        return SyncFailed(self._read(length).decode("utf-8", "replace"))

    # -- requests -----------------------------------------------------------------------

    def stat(self, path: str) -> Entry:
        """lstat (v1): a zero mode when the path does not exist."""

        def body() -> Entry:
            kind = self._read(4)
            if kind != b"STAT":
                raise EOFError(f"unexpected STAT answer {kind!r}")
            mode, size, mtime = _STAT.unpack(self._read(_STAT.size))
            return Entry(path, mode, size, mtime)

        return self._request(b"STAT", path, body)

    def list(self, path: str) -> list[Entry]:
        """The entries of a directory (without `.` and `..`); empty when it is missing."""

        def body() -> list[Entry]:
            out = []
            while True:
                kind = self._read(4)
                mode, size, mtime, namelen = _DENT.unpack(self._read(_DENT.size))
                if kind == b"DONE":
                    return out
                if kind != b"DENT":
                    raise EOFError(f"unexpected LIST answer {kind!r}")
                name = self._read(namelen).decode("utf-8", "replace")
                if name not in (".", ".."):
                    out.append(Entry(name, mode, size, mtime))

        return self._request(b"LIST", path, body)

    def recv(self, path: str) -> bytes:
        """A file's bytes; SyncFailed with the phone's message when it cannot be read."""

        def body() -> bytes:
            buf = bytearray()
            while True:
                kind, length = _REQ.unpack(self._read(_REQ.size))
                if kind == b"DONE":
                    return bytes(buf)
                if kind == b"FAIL":
                    raise self._fail_message(length)
                if kind != b"DATA" or length > SYNC_DATA_MAX:
                    raise EOFError(f"unexpected RECV answer {kind!r} ({length} bytes)")
                buf += self._read(length)

        return self._request(b"RECV", path, body)

    def send(self, path: str, data: bytes | BinaryIO, mode: int = 0o644) -> int:
        """Write a file (parents are created by adbd); SyncFailed with the phone's message."""
        src = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
        total = 0

        def body() -> int:
            nonlocal total
            sock = self._conn.conn
            while chunk := src.read(SYNC_DATA_MAX):
                sock.sendall(_REQ.pack(b"DATA", len(chunk)) + chunk)
                total += len(chunk)
            sock.sendall(_REQ.pack(b"DONE", int(time.time())))
            kind, length = _REQ.unpack(self._read(_REQ.size))
            if kind == b"FAIL":
                raise self._fail_message(length)
            if kind != b"OKAY":
                raise EOFError(f"unexpected SEND answer {kind!r}")
            return total

        return self._request(b"SEND", f"{path},{stat.S_IFREG | mode}", body)
