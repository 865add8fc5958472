"""The adb server on this host, through adbutils: clients, device states, shell with a
deadline, and adb's errors turned into ours (a lost phone is a DeviceError).

adbutils would start a server of its own when none answers; we check first, so a lab
host never gets a stray server (or a second one on another port).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from delegate_runtime.errors import DeviceError, JobError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5037
#: Seconds to wait for the adb server to accept a connection.
CONNECT_TIMEOUT_S = 3.0
#: Bytes read from a shell stream at a time.
READ_BYTES = 65536


@dataclass(frozen=True)
class Server:
    """Where the adb server listens (ANDROID_ADB_SERVER_HOST/PORT, as adb itself reads)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT

    @classmethod
    def from_env(cls) -> Server:
        host = os.environ.get("ANDROID_ADB_SERVER_HOST") or DEFAULT_HOST
        port = int(os.environ.get("ANDROID_ADB_SERVER_PORT") or DEFAULT_PORT)
        return cls(host, port)

    @classmethod
    def parse(cls, text: str | None) -> Server:
        """`host:port` as stored in a phone's facts (the environment's when empty)."""
        if not text:
            return cls.from_env()
        host, _, port = text.rpartition(":")
        return cls(host or DEFAULT_HOST, int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    def up(self) -> bool:
        """Whether something accepts connections there."""
        try:
            with socket.create_connection((self.host, self.port), CONNECT_TIMEOUT_S):
                return True
        except OSError:
            return False


def client(server: Server) -> Any:
    """An adbutils client of `server`; DeviceError when no server answers there."""
    try:
        import adbutils
    except ImportError as exc:
        raise JobError("Android phones need adbutils: pip install devicefarm[android]") from exc
    if not server.up():
        raise DeviceError(
            f"no adb server at {server} (start it: adb -P {server.port} start-server)"
        )
    return adbutils.AdbClient(host=server.host, port=server.port)


def adb_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean the phone or the adb server went away."""
    import adbutils

    return (adbutils.AdbError, adbutils.AdbTimeout, OSError, EOFError)


def state(adb: Any, serial: str) -> str:
    """`device`, `offline`, `unauthorized`, ... or `absent` when the server lost it."""
    try:
        return adb.device(serial).get_state().strip() or "absent"
    except adb_errors() as exc:
        text = str(exc).lower()
        if "unauthorized" in text:
            return "unauthorized"
        if "offline" in text:
            return "offline"
        return "absent"


def ensure_online(adb: Any, serial: str, what: str) -> None:
    """DeviceError unless the phone is still in the `device` state."""
    now = state(adb, serial)
    if now != "device":
        raise DeviceError(f"android:{serial} went {now} {what}")


def shell(
    adb: Any, serial: str, line: str, timeout_s: float, max_bytes: int | None = None
) -> tuple[bytes, bool]:
    """Run one command line (v1 shell: stdout and stderr merged); returns the output and
    whether the deadline passed first (the stream is then closed). More than `max_bytes`
    of output is a DeviceError (a phone cannot fill the host's memory)."""
    deadline = time.monotonic() + timeout_s
    try:
        conn = adb.device(serial).open_shell(line)
    except adb_errors() as exc:
        raise DeviceError(f"android:{serial}: cannot open a shell: {exc}") from exc
    out = bytearray()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), True
            conn.conn.settimeout(min(left, 1.0))
            try:
                chunk = conn.conn.recv(READ_BYTES)
            except TimeoutError:
                continue
            except OSError:
                break  # the server dropped the stream: the caller checks the phone's state
            if not chunk:
                break
            out += chunk
            if max_bytes is not None and len(out) > max_bytes:
                raise DeviceError(
                    f"android:{serial}: `{line[:40]}` printed more than {max_bytes} bytes"
                )
    finally:
        with contextlib.suppress(OSError):
            conn.close()
    return bytes(out), False
