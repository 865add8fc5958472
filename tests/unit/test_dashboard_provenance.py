"""The dashboard never compares results measured under different configuration records as
equals: compare() keeps each fingerprint apart and marks the older ones, history judges a
run only against runs of its own fingerprint, and a result's detail shows its record."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from dashboard import queries
from farm_core.schema import Result
from tests.conftest import require_module
from tests.support.measured_farm import (
    CPU_KEY,
    CPU_NEW,
    CPU_OLD,
    GPU_KEY,
    GPU_NEW,
    GPU_OLD,
    measured_farm,
)


@pytest.fixture
def farm(tmp_path: Path) -> tuple[Engine, str]:
    return measured_farm(tmp_path)


def test_compare_keeps_each_fingerprint_apart(farm) -> None:
    engine, sha = farm
    rows = {(r["device"], r["config_fingerprint"]): r for r in queries.compare(engine, sha)}
    assert set(rows) == {
        (CPU_KEY, CPU_OLD),
        (CPU_KEY, CPU_NEW),
        (GPU_KEY, GPU_OLD),
        (GPU_KEY, GPU_NEW),
    }
    # one run each, never averaged with the other record's (500 and 1000 would be 750)
    assert rows[(GPU_KEY, GPU_NEW)]["avg_ms"] == 0.5 and rows[(GPU_KEY, GPU_OLD)]["avg_ms"] == 1.0
    assert all(r["results"] == 1 for r in rows.values())


def test_compare_marks_older_configurations_and_their_timing(farm) -> None:
    engine, sha = farm
    got = [(r["device"], r["configuration"], r["timing"]) for r in queries.compare(engine, sha)]
    assert got == [
        (CPU_KEY, queries.CURRENT, "shipped"),
        (CPU_KEY, queries.OTHER, "shipped"),
        (GPU_KEY, queries.CURRENT, "profiled"),
        (GPU_KEY, queries.OTHER, "shipped"),
    ]


def test_compare_speedups_use_the_current_cpu_baseline(farm) -> None:
    engine, sha = farm
    rows = {(r["device"], r["config_fingerprint"]): r for r in queries.compare(engine, sha)}
    # the CPU now: 4000 us (not the mean with the old record's 6000)
    assert rows[(GPU_KEY, GPU_NEW)]["speedup"] == pytest.approx(8.0)
    assert rows[(GPU_KEY, GPU_OLD)]["speedup"] == pytest.approx(4.0)
    assert rows[(CPU_KEY, CPU_NEW)]["speedup"] == pytest.approx(1.0)


def test_measurement_detail_of_a_result(farm) -> None:
    engine, sha = farm
    newest_gpu = next(r for r in queries.compare(engine, sha) if r["config_fingerprint"] == GPU_NEW)
    got = queries.measurement(engine, newest_gpu["result"])
    assert (got["device"], got["config"], got["config_fingerprint"]) == (
        GPU_KEY,
        "gpu-fp32",
        GPU_NEW,
    )
    assert (got["timing"], got["median_ci_ms"]) == ("profiled", "0.500 ± 0.0025")
    assert got["switches"] == [
        {"switch": "benchmark.enable_op_profiling", "value": True, "source": "option"},
        {"switch": "gpu.persistent", "value": False, "source": "env"},
    ]
    assert got["conditions"] == {
        "driver": "580.159.04",
        "clocks_mhz.sm": 1980,
        "host_load": [1.2, 0.9, 0.5],
    }
    assert got["uncertainty"]["trials"] == 5 and got["uncertainty"]["stable"] is True


def test_measurement_of_an_old_or_missing_result(farm) -> None:
    from sqlalchemy import update

    engine, _ = farm
    with engine.begin() as conn:
        first = conn.execute(select(func.min(Result.id))).scalar_one()
        conn.execute(  # as stored before the record existed
            update(Result).where(Result.id == first).values(measurement={}, config_fingerprint="")
        )
    old = queries.measurement(engine, first)
    assert (old["config_fingerprint"], old["timing"], old["median_ci_ms"]) == ("", None, None)
    assert (old["switches"], old["conditions"], old["uncertainty"]) == ([], {}, {})
    assert queries.measurement(engine, 10_000) is None


def test_op_profile_of_the_picked_result_not_only_the_newest(farm) -> None:
    from sqlalchemy import update

    engine, sha = farm
    older = next(r for r in queries.compare(engine, sha) if r["config_fingerprint"] == GPU_OLD)
    nodes = [{"node": 0, "op": "CONV_2D", "backend": "gpu", "avg_ms": 0.1}]
    with engine.begin() as conn:
        conn.execute(
            update(Result)
            .where(Result.id == older["result"])
            .values(benchmark={"op_profile_nodes": nodes})
        )
    assert queries.op_profile(engine, sha, GPU_KEY, "gpu-fp32") == []  # the newest has none
    assert queries.op_profile(engine, sha, GPU_KEY, "gpu-fp32", older["result"]) == nodes


def test_history_rows_carry_fingerprint_and_timing(farm) -> None:
    engine, sha = farm
    rows = queries.history(engine, sha, GPU_KEY)
    assert [(r["config_fingerprint"], r["timing"]) for r in rows] == [
        (GPU_OLD, "shipped"),
        (GPU_NEW, "profiled"),
    ]


def _runs(*pairs: tuple[float, str]) -> list[dict]:
    return [
        {"config": "c", "outcome": "succeeded", "avg_ms": ms, "config_fingerprint": fp}
        for ms, fp in pairs
    ]


STEADY = ((10.0, "a"), (10.1, "a"), (9.9, "a"), (10.0, "a"), (10.05, "a"))


def test_a_slower_run_of_the_same_fingerprint_regresses() -> None:
    rows = _runs(*STEADY, (12.0, "a"))
    assert [r["regression"] for r in queries.flag_regressions(rows, 0.1)] == [0] * 5 + [1]


def test_a_slower_run_under_another_fingerprint_is_not_judged_against_the_others() -> None:
    rows = _runs(*STEADY, (12.0, "b"))
    flagged = queries.flag_regressions(rows, 0.1)
    assert [r["regression"] for r in flagged] == [0] * 6
    assert flagged[5]["change"] is None  # the first run of its configuration: no baseline


# -- the page -----------------------------------------------------------------------------


@pytest.fixture
def compare_page(farm, tmp_path: Path) -> Iterator:
    require_module("streamlit", "streamlit (the dashboard extra)")
    from streamlit.testing.v1 import AppTest

    saved = os.environ.get("DEVICEFARM_DB")
    os.environ["DEVICEFARM_DB"] = f"sqlite:///{tmp_path / 'farm.db'}"
    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=60
    )
    at.run()
    at.switch_page("views/compare.py")
    at.run()
    yield at
    if saved is None:
        os.environ.pop("DEVICEFARM_DB", None)
    else:
        os.environ["DEVICEFARM_DB"] = saved


def test_compare_page_shows_current_rows_and_the_record(compare_page) -> None:
    at = compare_page
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert {"config_fingerprint", "timing", "configuration"} <= set(table.columns)
    assert set(table["config_fingerprint"]) == {CPU_NEW, GPU_NEW}  # older ones hidden
    assert "How it was measured" in [s.value for s in at.subheader]
    switches = at.dataframe[-2].value  # the first result picked: the CPU's, now
    assert list(switches.columns) == ["switch", "value", "source"]
    assert dict(zip(switches["switch"], switches["source"], strict=True)) == {
        "benchmark.enable_op_profiling": "option",
        "gpu.persistent": "env",
    }
    readings = at.dataframe[-1].value
    conditions = dict(zip(readings["condition"], readings["value"], strict=True))
    assert conditions["driver"] == "580.159.04" and conditions["uncertainty.trials"] == "5"


def test_compare_page_can_include_older_configurations(compare_page) -> None:
    at = compare_page
    at.checkbox(key="other_configs").check().run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert set(table["config_fingerprint"]) == {CPU_NEW, CPU_OLD, GPU_NEW, GPU_OLD}
    assert set(table["configuration"]) == {queries.CURRENT, queries.OTHER}
