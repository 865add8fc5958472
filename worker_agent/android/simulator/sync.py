"""The simulated `sync:` service (file_sync_protocol v1): STAT, LIST, RECV, SEND, QUIT.

Requests are an id, a little-endian length and a path; SEND's path ends in `,MODE` and is
followed by DATA chunks (at most SYNC_DATA_MAX bytes each) and DONE with the mtime.
Failures answer FAIL with adbd's message ("write failed: No space left on device").
"""

from __future__ import annotations

import stat
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from .fs import FsError
from .transport import Stream

if TYPE_CHECKING:
    from .device import SimulatedPhone

#: Largest DATA chunk either side may send (adbd's SYNC_DATA_MAX).
SYNC_DATA_MAX = 64 * 1024
#: Longest path a request may name (adbd refuses longer ones).
PATH_MAX = 1024
_REQ = struct.Struct("<4sI")
_STAT = struct.Struct("<4sIII")
_DENT = struct.Struct("<4sIIII")


class _Abort(Exception):
    """The request failed; FAIL was sent and the service ends (as adbd's does)."""


def _fail(stream: Stream, message: str) -> None:
    data = message.encode()
    stream.write(_REQ.pack(b"FAIL", len(data)) + data)
    raise _Abort(message)


def _stat(phone: SimulatedPhone, stream: Stream, path: str) -> None:
    try:
        node = phone.fs.get(path)
        stream.write(_STAT.pack(b"STAT", node.mode, len(node.data), node.mtime))
    except FsError:
        stream.write(_STAT.pack(b"STAT", 0, 0, 0))


def _list(phone: SimulatedPhone, stream: Stream, path: str) -> None:
    fs = phone.fs
    out = bytearray()
    try:
        names = fs.listdir(path)
        here = fs.get(path)
        entries = [(".", here), ("..", fs.get(fs.norm(path + "/..")))]
        entries += [(n, fs.get(fs.norm(f"{path}/{n}"))) for n in names]
    except FsError:
        entries = []  # adbd lists nothing for a missing directory
    for name, node in entries:
        raw = name.encode()
        out += _DENT.pack(b"DENT", node.mode, len(node.data), node.mtime, len(raw)) + raw
    out += _DENT.pack(b"DONE", 0, 0, 0, 0)
    stream.write(bytes(out))


def _recv(phone: SimulatedPhone, stream: Stream, path: str) -> None:
    try:
        data = phone.fs.read(path)
    except FsError as exc:
        _fail(stream, f"open failed: {exc}")
        return
    for i in range(0, len(data), SYNC_DATA_MAX):
        chunk = data[i : i + SYNC_DATA_MAX]
        stream.write(_REQ.pack(b"DATA", len(chunk)) + chunk)
    stream.write(_REQ.pack(b"DONE", 0))


def _send(phone: SimulatedPhone, stream: Stream, spec: str) -> None:
    path, _, mode_text = spec.rpartition(",")
    if not path or not mode_text.isdigit():
        path, mode_text = spec, str(stat.S_IFREG | 0o644)
    mode = int(mode_text)
    data = bytearray()
    error = ""
    while True:
        kind, length = _REQ.unpack(stream.read_exact(_REQ.size))
        if kind == b"DONE":
            break
        if kind != b"DATA" or length > SYNC_DATA_MAX:
            _fail(stream, f"invalid data message: {kind!r} of {length} bytes")
        chunk = stream.read_exact(length)
        if error:
            continue  # NOTE: adbd keeps reading (and dropping) DATA until DONE after a failure
        try:
            phone.fs.check_space(len(data) + len(chunk))
            data += chunk
        except FsError as exc:
            error = f"write failed: {exc}"
    if error:
        _fail(stream, error)
    try:
        phone.fs.write(path, bytes(data), mode=mode & 0o7777, mkdirs=True)
    except FsError as exc:
        _fail(stream, f"write failed: {exc}")
    stream.write(_REQ.pack(b"OKAY", 0))


def sync_service(phone: SimulatedPhone) -> Callable[[Stream], None]:
    """Serve sync requests on one stream until QUIT, a failure, or the host hangs up."""

    def serve(stream: Stream) -> None:
        handlers = {b"STAT": _stat, b"LIST": _list, b"RECV": _recv, b"SEND": _send}
        try:
            while True:
                kind, length = _REQ.unpack(stream.read_exact(_REQ.size))
                if kind == b"QUIT":
                    return
                handler = handlers.get(kind)
                if handler is None:
                    _fail(stream, f"unknown command {kind!r}")
                if length > PATH_MAX:
                    _fail(stream, "path too long")
                path = stream.read_exact(length).decode("utf-8", "replace")
                phone.record_sync(kind.decode(), path)
                handler(phone, stream, path)
        except _Abort:
            return

    return serve
