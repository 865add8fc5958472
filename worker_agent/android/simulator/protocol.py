"""adb's transport messages (system/core/adb/protocol.txt): a 24-byte little-endian header
(command, arg0, arg1, data_length, data_check, magic = command ^ 0xffffffff) and a payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


def _cmd(name: bytes) -> int:
    return struct.unpack("<I", name)[0]


A_SYNC = _cmd(b"SYNC")
A_CNXN = _cmd(b"CNXN")
A_AUTH = _cmd(b"AUTH")
A_OPEN = _cmd(b"OPEN")
A_OKAY = _cmd(b"OKAY")
A_CLSE = _cmd(b"CLSE")
A_WRTE = _cmd(b"WRTE")
NAMES = {A_SYNC: "SYNC", A_CNXN: "CNXN", A_AUTH: "AUTH", A_OPEN: "OPEN", A_OKAY: "OKAY",
         A_CLSE: "CLSE", A_WRTE: "WRTE"}  # fmt: skip

#: Protocol versions: the first, and the first that lets data_check be 0.
A_VERSION_MIN = 0x01000000
A_VERSION_SKIP_CHECKSUM = 0x01000001
A_VERSION = A_VERSION_SKIP_CHECKSUM
#: Largest payload this device accepts (adbd's MAX_PAYLOAD since Android P is 1 MiB; 256 KiB
#: before). The peers use the smaller of the two announced in CNXN.
MAX_PAYLOAD_BYTES = 256 * 1024
#: AUTH message types (arg0).
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
#: Bytes of the random token an AUTH TOKEN carries.
AUTH_TOKEN_BYTES = 20

HEADER = struct.Struct("<6I")


class ProtocolError(Exception):
    """A malformed message: the connection must be closed (protocol.txt)."""


@dataclass(frozen=True)
class Message:
    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        return NAMES.get(self.command, f"0x{self.command:08x}")


def checksum(data: bytes) -> int:
    """adb's "crc32": the sum of the payload's bytes (checked below A_VERSION_SKIP_CHECKSUM)."""
    return sum(data) & 0xFFFFFFFF


def pack(msg: Message, with_checksum: bool = True) -> bytes:
    check = checksum(msg.data) if with_checksum else 0
    header = HEADER.pack(
        msg.command, msg.arg0, msg.arg1, len(msg.data), check, msg.command ^ 0xFFFFFFFF
    )
    return header + msg.data


def unpack_header(raw: bytes, max_payload: int) -> tuple[Message, int, int]:
    """The message (without data), its data length and data_check; validates magic and size."""
    command, arg0, arg1, length, check, magic = HEADER.unpack(raw)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic 0x{magic:08x} for command 0x{command:08x}")
    if command not in NAMES:
        raise ProtocolError(f"unknown command 0x{command:08x}")
    if length > max_payload:
        raise ProtocolError(f"payload of {length} bytes exceeds the maximum {max_payload}")
    return Message(command, arg0, arg1), length, check


def banner(props: dict[str, str], features: list[str]) -> bytes:
    """The device's CNXN banner: `device::ro.product.name=...;...;features=a,b`."""
    parts = [f"{k}={props.get(k, '')}" for k in
             ("ro.product.name", "ro.product.model", "ro.product.device")]  # fmt: skip
    parts.append("features=" + ",".join(features))
    return ("device::" + ";".join(parts)).encode()
