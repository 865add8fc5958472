"""adbd's side of one TCP transport: the CNXN handshake (or AUTH, for an unauthorized
phone), streams opened by the host (OPEN/OKAY/WRTE/CLSE) with adb's flow control (one
WRTE in flight per stream until the peer's OKAY), each service on a thread of its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Protocol

from .protocol import (
    A_AUTH,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_VERSION,
    A_VERSION_SKIP_CHECKSUM,
    A_WRTE,
    AUTH_SIGNATURE,
    AUTH_TOKEN,
    AUTH_TOKEN_BYTES,
    HEADER,
    MAX_PAYLOAD_BYTES,
    Message,
    ProtocolError,
    checksum,
    pack,
    unpack_header,
)

log = logging.getLogger(__name__)

#: How long a service waits for the host's OKAY to a WRTE before giving up on the stream.
WRITE_ACK_TIMEOUT_S = 60.0


class StreamClosed(Exception):
    """The stream (or its whole connection) was closed while a service used it."""


class Host(Protocol):
    """What a connection needs from its phone."""

    def banner(self) -> bytes: ...
    def authorized(self) -> bool: ...
    def responds(self) -> bool: ...
    def service(self, name: str) -> Callable[[Stream], None] | None: ...


class Stream:
    """One service stream: bytes in from the host's WRTEs, bytes out as our WRTEs."""

    def __init__(self, conn: Connection, local_id: int, remote_id: int):
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self._inbox = bytearray()
        self._cond = threading.Condition()
        self._acked = threading.Event()
        self._acked.set()
        self.closed = threading.Event()  #: set when either side closed it

    # -- from the host --------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        with self._cond:
            self._inbox += data
            self._cond.notify_all()

    def acked(self) -> None:
        self._acked.set()

    def peer_closed(self) -> None:
        self.closed.set()
        self._acked.set()
        with self._cond:
            self._cond.notify_all()

    # -- for services ---------------------------------------------------------------

    def read_exact(self, n: int) -> bytes:
        """Exactly `n` bytes from the host; StreamClosed when the stream ends first."""
        with self._cond:
            while len(self._inbox) < n:
                if self.closed.is_set():
                    raise StreamClosed("stream closed by the host")
                self._cond.wait(0.5)
            out = bytes(self._inbox[:n])
            del self._inbox[:n]
            return out

    def write(self, data: bytes) -> None:
        """Send `data` as WRTEs of at most the negotiated payload, each acknowledged."""
        view = memoryview(data)
        while view:
            chunk, view = view[: self.conn.max_payload], view[self.conn.max_payload :]
            if not self._acked.wait(WRITE_ACK_TIMEOUT_S) or self.closed.is_set():
                raise StreamClosed("stream closed while writing")
            self._acked.clear()
            self.conn.send(Message(A_WRTE, self.local_id, self.remote_id, bytes(chunk)))

    def close(self) -> None:
        """Close from our side (the service ended): CLSE, once."""
        if not self.closed.is_set():
            self.closed.set()
            with contextlib.suppress(OSError, StreamClosed):
                self.conn.send(Message(A_CLSE, self.local_id, self.remote_id))
        self.conn.forget(self)


class Connection:
    """One TCP connection from the adb server: reads messages until it ends."""

    def __init__(self, sock: socket.socket, host: Host):
        self.sock = sock
        self.host = host
        # NOTE: adbd starts at its own version, so a CNXN with data_check 0 is accepted;
        # checksums matter only once an old host (A_VERSION_MIN) has been negotiated.
        self.version = A_VERSION
        self.max_payload = 4096  #: until CNXN (MAX_PAYLOAD_V1)
        self.streams: dict[int, Stream] = {}
        self._next_id = 1
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self.dead = threading.Event()

    # -- sending --------------------------------------------------------------------

    def send(self, msg: Message) -> None:
        with self._send_lock:
            if self.dead.is_set():
                raise StreamClosed("connection dropped")
            self.sock.sendall(pack(msg, with_checksum=self.version < A_VERSION_SKIP_CHECKSUM))

    def forget(self, stream: Stream) -> None:
        with self._lock:
            self.streams.pop(stream.local_id, None)

    def drop(self) -> None:
        """Cut the cable: close the socket at once; every stream ends."""
        self.dead.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
        with self._lock:
            streams = list(self.streams.values())
        for s in streams:
            s.peer_closed()

    # -- receiving ------------------------------------------------------------------

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def read_message(self) -> Message:
        msg, length, check = unpack_header(self._recv_exact(HEADER.size), MAX_PAYLOAD_BYTES)
        data = self._recv_exact(length) if length else b""
        if self.version < A_VERSION_SKIP_CHECKSUM and checksum(data) != check:
            raise ProtocolError(f"bad data_check on {msg.name}")
        return Message(msg.command, msg.arg0, msg.arg1, data)

    def serve(self) -> None:
        """Handle messages until the host hangs up or the phone drops the connection."""
        try:
            while not self.dead.is_set():
                self.handle(self.read_message())
        except (EOFError, OSError, StreamClosed):
            pass
        except ProtocolError as exc:
            log.warning("closing the connection: %s", exc)
        finally:
            self.drop()

    def handle(self, msg: Message) -> None:
        if msg.command == A_CNXN:
            self._connect(msg)
        elif msg.command == A_AUTH:
            # NOTE: an unauthorized phone refuses every signature and waits for the user to
            # accept the host's public key, which never happens here.
            if msg.arg0 == AUTH_SIGNATURE:
                self._send_token()
        elif msg.command == A_OPEN:
            self._open(msg)
        elif msg.command == A_OKAY:
            stream = self.streams.get(msg.arg1)
            if stream is not None:
                stream.remote_id = msg.arg0
                stream.acked()
        elif msg.command == A_WRTE:
            stream = self.streams.get(msg.arg1)
            if stream is None:
                self.send(Message(A_CLSE, 0, msg.arg0))
                return
            stream.feed(msg.data)
            self.send(Message(A_OKAY, stream.local_id, stream.remote_id))
        elif msg.command == A_CLSE:
            with self._lock:
                stream = self.streams.pop(msg.arg1, None)
            if stream is not None:
                stream.peer_closed()

    def _connect(self, msg: Message) -> None:
        self.version = min(msg.arg0, A_VERSION)
        self.max_payload = min(msg.arg1, MAX_PAYLOAD_BYTES)
        if not self.host.responds():
            return  # an offline phone: the host waits for a CNXN that never comes
        if not self.host.authorized():
            self._send_token()
            return
        self.send(Message(A_CNXN, A_VERSION, MAX_PAYLOAD_BYTES, self.host.banner()))

    def _send_token(self) -> None:
        self.send(Message(A_AUTH, AUTH_TOKEN, 0, os.urandom(AUTH_TOKEN_BYTES)))

    def _open(self, msg: Message) -> None:
        name = msg.data.rstrip(b"\0").decode("utf-8", "replace")
        service = self.host.service(name) if self.host.authorized() else None
        if service is None:
            self.send(Message(A_CLSE, 0, msg.arg0))  # the service does not exist
            return
        with self._lock:
            local_id = self._next_id
            self._next_id += 1
            stream = self.streams[local_id] = Stream(self, local_id, msg.arg0)
        self.send(Message(A_OKAY, local_id, msg.arg0))
        threading.Thread(
            target=_run_service, args=(service, stream), name=f"adb-sim:{name[:30]}", daemon=True
        ).start()


def _run_service(service: Callable[[Stream], None], stream: Stream) -> None:
    try:
        service(stream)
    except StreamClosed:
        pass
    except Exception:  # noqa: BLE001 - a simulator bug must not take the phone down
        log.exception("simulated service failed")
    finally:
        stream.close()
