"""A hostile phone (issue 16, point 11): what a phone says is validated, bounded, cleaned,
and never used as a path; a phone that cannot be trusted is refused on its own."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from delegate_runtime.errors import DeviceError
from farm_core.schema import Device
from worker_agent.android import adb
from worker_agent.android.facts import UntrustedFacts, device_info
from worker_agent.android.toolset import BENCHMARK_MODEL, toolset_for

GLES = {"vendor": "ARM", "renderer": "Mali-G710", "version": "OpenGL ES 3.2 v1.r36p0"}
PROPS = {
    "ro.product.manufacturer": "Google",
    "ro.product.model": "Pixel 7",
    "ro.build.version.sdk": "34",
    "ro.product.cpu.abi": "arm64-v8a",
    "ro.product.cpu.abilist": "arm64-v8a",
}


def phone(serial: str = "sim-1", gles: dict | None = None, **props: str):
    merged = PROPS | {k.replace("_", "."): v for k, v in props.items()}
    return device_info(serial, merged, gles or GLES, "lab1", "127.0.0.1:5037")


def column(name: str) -> int:
    return Device.__table__.c[name].type.length


def test_a_traversal_in_the_abilist_is_dropped(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        d = phone(ro_product_cpu_abilist="../../../../tmp/x,arm64-v8a")
    assert d.facts["ro.product.cpu.abilist"] == "arm64-v8a"
    assert "reduced to the known ['arm64-v8a']" in caplog.text


def test_a_bogus_primary_abi_becomes_the_first_known_one() -> None:
    d = phone(ro_product_cpu_abi="../x", ro_product_cpu_abilist="x86_64,x86")
    assert d.facts["ro.product.cpu.abi"] == "x86_64"


@pytest.mark.parametrize(
    "abilist", ["../../../../tmp/x", "mips", "arm64-v8a/../../x"], ids=["traversal", "mips", "dots"]
)
def test_a_phone_with_no_known_abi_is_untrusted(abilist: str) -> None:
    with pytest.raises(UntrustedFacts, match="lists no ABI Android defines"):
        phone(ro_product_cpu_abi=abilist, ro_product_cpu_abilist=abilist)


@pytest.mark.parametrize(
    ("field", "prop"),
    [
        ("model", "ro.product.model"),
        ("vendor", "ro.product.manufacturer"),
    ],
)
def test_long_facts_are_cut_to_their_column(field: str, prop: str) -> None:
    d = phone(**{prop.replace(".", "_"): "M" * 300})
    assert len(getattr(d, field)) == column(field)
    assert len(d.facts[prop]) <= 255


def test_long_gles_facts_are_cut_to_their_column() -> None:
    long = {"vendor": "V" * 300, "renderer": "R" * 300, "version": "OpenGL ES 3.2 " + "9" * 300}
    d = phone(gles=long)
    assert len(d.renderer) == column("renderer")
    assert len(d.driver_version) == column("driver_version")
    assert all(len(d.facts[k]) <= 255 for k in ("gles_vendor", "gles_renderer", "gles_version"))


def test_control_characters_are_removed() -> None:
    d = phone(ro_product_model="Pixel\x1b[2J 7\x07\u202e", gles=GLES | {"renderer": "Mali\r\nX"})
    assert d.model == "Pixel[2J 7" and d.renderer == "MaliX"


def test_a_huge_sdk_number_is_no_sdk() -> None:
    assert phone(ro_build_version_sdk="9" * 5000).android_sdk is None


@pytest.mark.parametrize(
    "serial", ["../../x", "a/b", "s" * 200, "x\n", ""], ids=["dots", "slash", "long", "nl", "empty"]
)
def test_a_serial_adb_never_gives_is_untrusted(serial: str) -> None:
    with pytest.raises(UntrustedFacts, match="has a serial adb never gives"):
        phone(serial)


@pytest.mark.parametrize("serial", ["R5CT1234ABC", "127.0.0.1:5555", "emulator-5554"])
def test_real_serials_pass(serial: str) -> None:
    assert phone(serial).key == f"android:{serial}"


def test_the_toolset_never_takes_a_phone_string_as_a_path(tmp_path: Path) -> None:
    evil = tmp_path / "tmp" / "x"
    evil.mkdir(parents=True)
    (evil / BENCHMARK_MODEL).write_bytes(b"#!/bin/sh\n")
    root = tmp_path / "tools"
    root.mkdir()
    with pytest.raises(DeviceError, match="no ABI Android defines"):
        toolset_for(["../tmp/x"], root)
    (root / "arm64-v8a").mkdir()
    (root / "arm64-v8a" / BENCHMARK_MODEL).write_bytes(b"bench")
    assert toolset_for(["../tmp/x", "arm64-v8a"], root).abi == "arm64-v8a"


class _EndlessShell:
    """An adbutils-like device whose shell prints forever."""

    def __init__(self) -> None:
        self.conn = self
        self.received = 0

    def device(self, serial: str) -> _EndlessShell:
        return self

    def open_shell(self, line: str) -> _EndlessShell:
        return self

    def settimeout(self, timeout: float) -> None:
        pass

    def recv(self, n: int) -> bytes:
        self.received += n
        return b"[ro.x]: [" + b"y" * (n - 10) + b"]\n"

    def close(self) -> None:
        pass


def test_a_phone_printing_forever_is_stopped_at_the_cap() -> None:
    fake = _EndlessShell()
    with pytest.raises(DeviceError, match="printed more than 1048576 bytes"):
        adb.shell(fake, "sim-1", "getprop", timeout_s=30, max_bytes=1 << 20)
    assert fake.received < 2 << 20
