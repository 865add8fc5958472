"""The proof: for every device of a seeded farm, the devicedb reader walking the built tree
with the device's facts gives the rules' decision (flatbuffer and JSON, with SDK ranges)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from devicefarm.demo_lab import DEVICES, MODELS, NEW_PHONE, seed
from orchestrator.allowlist import devicedb, export, reader
from orchestrator.allowlist.collect import Allowlist, decide_models, load_devices
from orchestrator.allowlist.facts import list_variables
from orchestrator.allowlist.rules import SUPPORTED, Thresholds
from orchestrator.allowlist.tree import ENABLE_QUANT, PRECISION
from tests.support.farm import sqlite_engine

DEVICE_KEYS = [d.key for d in (*DEVICES, NEW_PHONE)]
THRESHOLDS = {
    "default": Thresholds(),
    "strict": Thresholds(min_speedup=2.0, max_error=1e-3, require_full_delegation=True),
}


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    engine = sqlite_engine(Path(tmp_path_factory.mktemp("proof")))
    seed(engine)
    return engine


@pytest.fixture(scope="module")
def lists(farm: Engine) -> dict[str, dict[str, Allowlist]]:
    return {name: decide_models(farm, th) for name, th in THRESHOLDS.items()}


@pytest.fixture(scope="module")
def devices(farm: Engine) -> dict[str, dict]:
    with farm.begin() as conn:
        return load_devices(conn)


@pytest.mark.parametrize("thresholds", list(THRESHOLDS))
@pytest.mark.parametrize("model", [m.name for m in MODELS])
@pytest.mark.parametrize("device", DEVICE_KEYS)
def test_reader_gives_the_rules_decision(
    lists: dict, devices: dict, thresholds: str, model: str, device: str
) -> None:
    allowlist = next(a for a in lists[thresholds].values() if a.model_name == model)
    entry = allowlist.entry_for(device)
    assert entry is not None, f"{device} has no entry"
    data = export.render(allowlist, "devicedb-bin")
    text = export.render(allowlist, "devicedb-json").decode()
    facts = list_variables(devices[device])
    for roots in (devicedb.decode(data), devicedb.from_json(text)):
        got = reader.evaluate(roots, facts)
        assert reader.status(roots, facts) == entry.decision.status, entry.decision.reason
        if entry.decision.status == SUPPORTED:
            assert got[PRECISION] == entry.decision.precision
            assert got[ENABLE_QUANT] == str(entry.decision.enable_quant).lower()


def test_the_seeded_farm_has_every_kind_of_decision(lists: dict) -> None:
    codes = {
        (e.decision.status, e.decision.code)
        for a in [*lists["default"].values(), *lists["strict"].values()]
        for e in a.entries
    }
    for want in [
        ("supported", ""),
        ("unknown", "not_measured"),
        ("unsupported", "crashed"),
        ("unsupported", "ops_fell_back"),
        ("unsupported", "error_too_large"),
        ("unsupported", "slower_than_cpu"),
        ("unsupported", "unstable"),
    ]:
        assert want in codes


def test_the_driver_update_is_its_own_entry(lists: dict) -> None:
    mobilenet = next(a for a in lists["default"].values() if a.model_name == MODELS[0].name)
    redmi = [e for e in mobilenet.entries if "android:redmi8" in e.devices]
    assert len(redmi) == 2  # the old driver's results and the new driver's
    assert {tuple(e.current) for e in redmi} == {(), ("android:redmi8",)}
    twins = mobilenet.entry_for("android:a52_1")
    assert twins is not None and twins.current == ["android:a52_1", "android:a52_2"]
