"""The simulator's adbd transport, spoken to directly over a socket (no adb server)."""

from __future__ import annotations

import socket
import struct

import pytest

from worker_agent.android.simulator import SimulatedPhone
from worker_agent.android.simulator.protocol import (
    A_AUTH,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_VERSION,
    A_VERSION_MIN,
    A_WRTE,
    AUTH_SIGNATURE,
    AUTH_TOKEN,
    HEADER,
    MAX_PAYLOAD_BYTES,
    Message,
    ProtocolError,
    checksum,
    pack,
    unpack_header,
)

HOST_BANNER = b"host::features=shell_v2,cmd,stat_v2"


class Host:
    """The adb server's side of a transport, by hand."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, msg: Message, with_checksum: bool = False) -> None:
        self.sock.sendall(pack(msg, with_checksum))

    def recv(self) -> tuple[Message, int]:
        raw = self._exact(HEADER.size)
        msg, length, check = unpack_header(raw, MAX_PAYLOAD_BYTES)
        return Message(msg.command, msg.arg0, msg.arg1, self._exact(length)), check

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    def connect(self, version: int = A_VERSION, max_payload: int = 1 << 20) -> Message:
        self.send(Message(A_CNXN, version, max_payload, HOST_BANNER), with_checksum=True)
        return self.recv()[0]


@pytest.fixture
def phone():
    with SimulatedPhone("pixel-7") as ph:
        yield ph


def test_header_is_24_little_endian_bytes_with_magic() -> None:
    raw = pack(Message(A_OKAY, 1, 2, b"ab"))
    assert len(raw) == 24 + 2 and raw[:4] == b"OKAY"
    assert struct.unpack("<6I", raw[:24]) == (
        A_OKAY,
        1,
        2,
        2,
        ord("a") + ord("b"),
        A_OKAY ^ 0xFFFFFFFF,
    )
    assert pack(Message(A_OKAY, 1, 2, b"ab"), with_checksum=False)[16:20] == b"\0\0\0\0"
    bad = bytearray(raw[:24])
    bad[20] ^= 1
    with pytest.raises(ProtocolError, match="bad magic"):
        unpack_header(bytes(bad), MAX_PAYLOAD_BYTES)
    with pytest.raises(ProtocolError, match="exceeds"):
        unpack_header(pack(Message(A_WRTE, 1, 2, b"x" * 10))[:24], 4)
    assert checksum(b"\xff\x01") == 256


def test_cnxn_is_answered_with_the_banner_of_implemented_features(phone) -> None:
    host = Host(phone.port)
    reply = host.connect()
    assert reply.command == A_CNXN and reply.arg0 == A_VERSION and reply.arg1 == MAX_PAYLOAD_BYTES
    banner = reply.data.decode()
    assert banner.startswith("device::ro.product.name=panther;ro.product.model=Pixel 7;")
    assert banner.endswith("features=fixed_push_mkdir")  # no shell_v2: not implemented


def test_old_host_gets_checksums(phone) -> None:
    host = Host(phone.port)
    host.send(Message(A_CNXN, A_VERSION_MIN, 4096, HOST_BANNER), with_checksum=True)
    reply, check = host.recv()
    assert reply.command == A_CNXN and check == checksum(reply.data)


def test_shell_stream_open_write_okay_close(phone) -> None:
    host = Host(phone.port)
    host.connect(max_payload=4)  # tiny payloads: the output comes in acknowledged pieces
    host.send(Message(A_OPEN, 7, 0, b"shell:getprop ro.product.model\0"))
    okay = host.recv()[0]
    assert (okay.command, okay.arg1) == (A_OKAY, 7)
    local = okay.arg0
    out = b""
    while True:
        msg = host.recv()[0]
        if msg.command == A_CLSE:
            assert (msg.arg0, msg.arg1) == (local, 7)
            break
        assert msg.command == A_WRTE and len(msg.data) <= 4
        out += msg.data
        host.send(Message(A_OKAY, 7, local))  # flow control: one WRTE at a time
    assert out == b"Pixel 7\n" and phone.commands == ["getprop ro.product.model"]


def test_unknown_service_is_refused_with_clse(phone) -> None:
    host = Host(phone.port)
    host.connect()
    host.send(Message(A_OPEN, 9, 0, b"reboot:\0"))
    msg = host.recv()[0]
    assert (msg.command, msg.arg0, msg.arg1) == (A_CLSE, 0, 9)


def test_unauthorized_phone_answers_auth_tokens_and_opens_nothing(phone) -> None:
    phone.profile.faults.unauthorized = True
    host = Host(phone.port)
    token = host.connect()
    assert token.command == A_AUTH and token.arg0 == AUTH_TOKEN and len(token.data) == 20
    host.send(Message(A_AUTH, AUTH_SIGNATURE, 0, b"s" * 256))
    again = host.recv()[0]
    assert again.command == A_AUTH and again.arg0 == AUTH_TOKEN and again.data != token.data
    host.send(Message(A_OPEN, 3, 0, b"shell:getprop\0"))
    assert host.recv()[0].command == A_CLSE and phone.commands == []
