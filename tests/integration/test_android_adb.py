"""Phones through Debian's real adb server: simulated phones are `adb connect`ed to a
private server; discovery, facts, states and file transfer go through that server only."""

from __future__ import annotations

import os
import stat
import time

import pytest

from worker_agent.android import adb, discovery
from worker_agent.android.simulator import SimulatedPhone, load_profile
from worker_agent.android.sync import SyncFailed, SyncSession

pytestmark = pytest.mark.integration


@pytest.fixture
def phone(adb_server):
    """Factory: a simulated phone from a profile (with faults), connected to the server."""
    phones: list[SimulatedPhone] = []

    def make(profile: str | dict = "pixel-7", **faults) -> SimulatedPhone:
        p = load_profile(profile)
        for k, v in faults.items():
            setattr(p.faults, k, v)
        ph = SimulatedPhone(p).start()
        phones.append(ph)
        adb_server.connect(ph.serial)
        return ph

    yield make
    for ph in phones:
        ph.stop()
        adb_server.run("disconnect", ph.serial)


@pytest.fixture
def server(adb_server) -> adb.Server:
    return adb.Server("127.0.0.1", adb_server.port)


def _status(statuses, serial):
    return next(s for s in statuses if s.serial == serial)


def test_discovery_reads_the_facts_of_each_phone(phone, server) -> None:
    pixel, galaxy = phone("pixel-7"), phone("galaxy-s23")
    statuses = discovery.scan("lab1", server)
    p = _status(statuses, pixel.serial).device
    g = _status(statuses, galaxy.serial).device
    assert p.key == f"android:{pixel.serial}" and p.kind == "android" and p.host == "lab1"
    assert (p.vendor, p.model, p.android_sdk) == ("Google", "Pixel 7", 34)
    assert (p.renderer, p.api_version) == ("Mali-G710", "OpenGL ES 3.2")
    assert p.driver_version == "OpenGL ES 3.2 v1.r36p0-01eac0"
    assert p.facts["ro.soc.model"] == "GS201" and p.facts["ro.board.platform"] == "gs201"
    assert p.facts["ro.hardware.egl"] == "mali" and p.facts["ro.product.cpu.abi"] == "arm64-v8a"
    assert p.facts["gles_vendor"] == "ARM" and p.facts["adb_server"] == str(server)
    # the GLES version holds commas of its own
    assert g.renderer == "Adreno (TM) 740" and g.facts["gles_vendor"] == "Qualcomm"
    assert g.driver_version.startswith("OpenGL ES 3.2 V@0676.32 (GIT@1b5a8bd4b8, ")
    assert (g.vendor, g.android_sdk, g.facts["ro.soc.manufacturer"]) == ("samsung", 33, "QTI")
    assert pixel.commands == [
        "getprop",
        "dumpsys SurfaceFlinger",
        # what the phone offers each delegate (worker_agent.android.offers)
        "ls /vendor/lib64",
        "ls /data/local/tmp",
        "ls /vendor/lib/rfsa/adsp",
        "ls /vendor/dsp/cdsp",
        "cat /sys/devices/system/cpu/online",
        "cat /vendor/etc/vintf/manifest.xml",
        " ".join(
            ["cat"] + [f"/sys/devices/system/cpu/cpu{i}/cpufreq/cpuinfo_max_freq" for i in range(8)]
        ),  # fmt: skip
    ]
    assert {d.key for d in discovery.discover("lab1", server)} >= {p.key, g.key}


def test_unauthorized_phone_is_reported_with_the_fix(phone, server, caplog) -> None:
    locked = phone("pixel-7", unauthorized=True)
    status = _status(discovery.scan("lab1", server), locked.serial)
    assert status.state == "unauthorized" and status.device is None
    assert "accept the USB debugging prompt" in status.fix
    found = discovery.discover("lab1", server)
    assert f"android:{locked.serial}" not in {d.key for d in found}
    assert "accept the USB debugging prompt" in caplog.text
    assert locked.commands == []  # nothing ran on a phone that never let us in


def test_unplugged_phone_goes_offline(phone, server) -> None:
    ph = phone("pixel-7")
    dev = _status(discovery.scan("lab1", server), ph.serial).device
    assert discovery.present([dev]) == {dev.key}
    ph.stop()  # the cable is pulled: adb's server sees the transport close on its own time
    deadline = time.monotonic() + 10
    status = _status(discovery.scan("lab1", server), ph.serial)
    while status.state == "device" and time.monotonic() < deadline:  # a busy machine: later
        time.sleep(0.05)
        status = _status(discovery.scan("lab1", server), ph.serial)
    assert status.state == "offline" and "reconnect" in status.fix
    assert discovery.present([dev]) == set()


def test_push_pull_stat_list_through_the_real_adb(phone, server, adb_server, tmp_path) -> None:
    ph = phone("pixel-7")
    client = adb.client(server)
    payload = os.urandom(300_000)  # several DATA chunks and several WRTEs
    # adbutils' own sync
    sync = client.sync(ph.serial)
    sync.push(payload, "/data/local/tmp/x/a.bin", mode=0o640)
    assert sync.read_bytes("/data/local/tmp/x/a.bin") == payload
    info = sync.stat("/data/local/tmp/x/a.bin")
    assert info.size == len(payload) and stat.S_IMODE(info.mode) == 0o640
    assert [f.path for f in sync.list("/data/local/tmp/x")] == [".", "..", "a.bin"]
    # the runner's sync session: several requests on one stream
    with SyncSession(client, ph.serial) as s:
        s.send("/data/local/tmp/x/b.bin", payload[:70_000], 0o755)
        assert s.recv("/data/local/tmp/x/b.bin") == payload[:70_000]
        assert s.stat("/data/local/tmp/x/b.bin").mode == stat.S_IFREG | 0o755
        assert not s.stat("/data/local/tmp/nope").exists
        with pytest.raises(SyncFailed, match="open failed: No such file or directory"):
            s.recv("/data/local/tmp/nope")
        assert [e.name for e in s.list("/data/local/tmp/x")] == ["a.bin", "b.bin"]  # reopened
    # and adb's own command line
    local = tmp_path / "c.bin"
    local.write_bytes(payload[:1000])
    assert (
        adb_server.run("-s", ph.serial, "push", str(local), "/data/local/tmp/c.bin").returncode == 0
    )
    pulled = tmp_path / "pulled.bin"
    assert (
        adb_server.run("-s", ph.serial, "pull", "/data/local/tmp/c.bin", str(pulled)).returncode
        == 0
    )
    assert pulled.read_bytes() == payload[:1000]
    assert ph.fs.read("/data/local/tmp/x/a.bin") == payload


def test_full_disk_fails_the_push_with_the_phones_message(phone, server) -> None:
    ph = phone("pixel-7", disk_free_bytes=10_000)
    client = adb.client(server)
    with SyncSession(client, ph.serial) as s:
        with pytest.raises(SyncFailed, match="write failed: No space left on device"):
            s.send("/data/local/tmp/big.bin", b"x" * 100_000)
        assert not s.stat("/data/local/tmp/big.bin").exists  # nothing half-written
        s.send("/data/local/tmp/small.bin", b"y" * 1000)
    assert ph.fs.read("/data/local/tmp/small.bin") == b"y" * 1000


def test_shell_runs_only_simulated_commands(phone, server) -> None:
    ph = phone("pixel-7")
    d = adb.client(server).device(ph.serial)
    assert d.shell("getprop ro.product.model") == "Pixel 7"
    assert "shell syntax is not simulated" in d.shell("getprop; reboot")
    assert "inaccessible or not found" in d.shell("reboot")
    assert ph.commands == ["getprop ro.product.model", "getprop; reboot", "reboot"]
    assert ph.violations == ["getprop; reboot"]
