"""A hostile phone beside honest ones (issue 16, point 11), through Debian's real adb server:
its facts are cleaned and bounded, its ABI list never names a host path, a phone that cannot
be trusted is skipped with a log line, and the others are discovered and registered."""

from __future__ import annotations

import copy
import importlib.util
import logging
import shutil

import pytest
from sqlalchemy import select

from farm_core.schema import Device
from tests.conftest import require
from worker_agent.agent import Agent
from worker_agent.android import adb, discovery
from worker_agent.android.simulator import SimulatedPhone, load_profile
from worker_agent.android.simulator.profile import BUILTIN
from worker_agent.android.simulator.testing import AdbServer

pytestmark = pytest.mark.integration

LONG_MODEL = "\x1b[31mPixel\x07" + "M" * 300


def hostile(abilist: str) -> dict:
    raw = copy.deepcopy(BUILTIN["pixel-7"])
    raw["props"] |= {
        "ro.product.cpu.abi": abilist.split(",")[0],
        "ro.product.cpu.abilist": abilist,
        "ro.product.model": LONG_MODEL,
    }
    return raw


@pytest.fixture(scope="module")
def phones():
    """An adb server with an honest phone, one with a traversal in its ABI list and a
    300-character model, and one listing only a traversal as its ABI."""
    require(shutil.which("adb") is not None, "adb (Debian package adb)")
    require(importlib.util.find_spec("adbutils") is not None, "adbutils")
    server = AdbServer().start()
    started = {}
    try:
        for name, profile in {
            "honest": "pixel-7",
            "traversal": hostile("../../../../tmp/x,arm64-v8a"),
            "no_abi": hostile("../../../../tmp/x"),
        }.items():
            started[name] = SimulatedPhone(load_profile(profile)).start()
            server.connect(started[name].serial)
        yield adb.Server("127.0.0.1", server.port), started
    finally:
        for ph in started.values():
            ph.stop()
        server.stop()


def test_the_untrusted_phone_is_skipped_and_the_others_served(phones, caplog) -> None:
    server, started = phones
    with caplog.at_level(logging.WARNING):
        found = {d.key: d for d in discovery.discover("lab1", server)}
    assert set(found) == {f"android:{started[n].serial}" for n in ("honest", "traversal")}
    bad = f"android:{started['no_abi'].serial}"
    assert f"{bad} lists no ABI Android defines ('../../../../tmp/x'" in caplog.text
    t = found[f"android:{started['traversal'].serial}"]
    assert t.facts["ro.product.cpu.abilist"] == "arm64-v8a"
    assert t.model.startswith("[31mPixelMMM") and len(t.model) == 255


def test_the_phones_register_in_postgresql(phones, pg_url: str) -> None:
    server, started = phones
    devices = discovery.discover("lab1", server)
    Agent(pg_url, "memory://", devices, name="hostile-test").register()
    agent = Agent(pg_url, "memory://", [], name="reader")
    with agent.engine.begin() as conn:
        rows = dict(conn.execute(select(Device.key, Device.model)).all())
    assert rows[f"android:{started['honest'].serial}"] == "Pixel 7"
    assert len(rows[f"android:{started['traversal'].serial}"]) == 255
