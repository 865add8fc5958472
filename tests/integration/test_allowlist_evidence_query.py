"""The evidence query (hash-aggregated, facts compared to a reference result's byte for
byte, device-caused failures counted per job in two steps) against its definition, done
in Python over the raw result rows: group by model, device, configuration, the facts as
they ran and the configuration record, on SQLite and on PostgreSQL. The farm has the
cases the fast form treats apart: a driver update mid-way, empty facts, a device no longer
registered, a job failed by the device in two attempts, infrastructure failures, timeouts,
cancelled results, and results under two configuration records."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from farm_core.database import open_database
from farm_core.schema import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    TIMED_OUT,
    Campaign,
    Device,
    Job,
    Result,
    StoredModel,
)
from orchestrator.allowlist.causes import DEVICE_CAUSED_ERRORS
from orchestrator.allowlist.collect import build_allowlists, read_evidence
from orchestrator.allowlist.rules import Thresholds
from tests.integration.conftest import new_pg_database
from tests.support.farm import sqlite_engine

MODELS = ("a" * 64, "b" * 64)
PHONE = {"kind": "android", "vendor": "google", "model": "Pixel 7", "renderer": "Mali-G710",
         "api_version": "OpenGL ES 3.2", "android_sdk": 34, "host": "lab1",
         "facts": {"ro.product.device": "panther", "gles_vendor": "ARM"}}  # fmt: skip


def _facts(key: str, driver: str) -> dict[str, Any]:
    return {"key": key, **PHONE, "driver_version": driver, "tags": []}


def _results() -> list[dict[str, Any]]:
    """(job, attempt) rows: outcome, figures, facts as they ran, configuration record."""
    p1, p2, gone = "android:p1", "android:p2", "android:gone"
    old, new = _facts(p1, "v1.r36"), _facts(p1, "v1.r38")  # p1's driver updated
    ok = {"outcome": SUCCEEDED, "delegated_ops": 3, "total_ops": 4, "max_avg_error": 1e-5}
    crash = {"outcome": FAILED, "error": "ToolOutputError: no result"}
    rows = []
    for i, model in enumerate(MODELS):
        for run in range(4):
            us = 900.0 + 37.5 * run + i
            bench = {"std_us": 20.0 + run, "options": {"enable_quant": run % 2 == 0}}
            for facts in (old, new):
                rows.append({**ok, "device": p1, "config": "gpu-fp32", "avg_us": us,
                             "benchmark": bench, "facts": facts, "record": f"r{run // 2}"})  # fmt: skip
            rows.append({**ok, "device": p1, "config": "cpu", "avg_us": 3 * us, "facts": new,
                         "benchmark": bench, "record": "c"})  # fmt: skip
            rows.append({**ok, "device": p2, "config": "gpu-fp16", "avg_us": us / 2,
                         "max_avg_error": 0.5 if run else None, "facts": {}, "record": "x"})  # fmt: skip
        rows += [
            {**crash, "device": p2, "config": "gpu-fp32", "facts": {}, "attempts": 2},
            {**crash, "device": p2, "config": "gpu-fp32", "facts": {}},
            {
                "outcome": FAILED,
                "error": "ModelError: refused",
                "device": p1,
                "config": "gpu-fp16",
                "facts": old,
            },  # fmt: skip
            {
                "outcome": FAILED,
                "error": "DeviceError: offline",
                "device": p1,
                "config": "gpu-fp16",
                "facts": old,
            },  # fmt: skip
            {
                "outcome": TIMED_OUT,
                "error": "ToolTimeout: late",
                "device": p1,
                "config": "gpu-fp16",
                "facts": new,
            },  # fmt: skip
            {"outcome": CANCELLED, "device": p1, "config": "gpu-fp16", "facts": new},
            {
                **ok,
                "device": gone,
                "config": "gpu-fp32",
                "avg_us": 700.0,
                "facts": _facts(gone, "v9"),
                "record": "g",
            },  # fmt: skip
        ]
        for r in rows:
            r.setdefault("model", model)
    return rows


def _seed(engine: Engine) -> None:
    with engine.begin() as c:
        for sha in MODELS:
            c.execute(StoredModel.__table__.insert().values(
                sha256=sha, name=f"{sha[0]}.tflite", size_bytes=1, op_summary={}, data=b""))  # fmt: skip
        c.execute(Device.__table__.insert().values(key="android:p1", driver_version="v1.r38",
                                                   **PHONE))  # fmt: skip
        c.execute(Device.__table__.insert().values(  # its results' facts are empty
            key="android:p2", driver_version="v2", **{**PHONE, "model": "Pixel 8"}))  # fmt: skip
        # android:gone is registered no more
        cid = c.execute(
            Campaign.__table__.insert().values(selector="all", configs=[], models=[], settings={})
        ).inserted_primary_key[0]
        for r in _results():
            job = c.execute(
                Job.__table__.insert().values(
                    campaign_id=cid,
                    model_sha256=r["model"],
                    config=r["config"],
                    planned_device="android:p1",
                    device_key="android:p1",
                )  # fmt: skip
            ).inserted_primary_key[0]
            for attempt in range(1, r.get("attempts", 1) + 1):
                c.execute(
                    Result.__table__.insert().values(
                        job_id=job,
                        attempt=attempt,
                        campaign_id=cid,
                        model_sha256=r["model"],
                        device_key=r["device"],
                        config=r["config"],
                        outcome=r["outcome"],
                        error=r.get("error", ""),
                        avg_us=r.get("avg_us"),
                        max_avg_error=r.get("max_avg_error"),
                        delegated_ops=r.get("delegated_ops"),
                        total_ops=r.get("total_ops"),
                        benchmark=r.get("benchmark", {}),
                        device_facts=r["facts"],
                        config_fingerprint=r.get("record", ""),
                    )  # fmt: skip
                )


def _by_definition(engine: Engine) -> list[dict[str, Any]]:
    """The evidence rows as defined: every figure from the raw rows, in Python."""
    with engine.begin() as c:
        raw = [dict(r) for r in c.execute(select(Result.__table__)).mappings()]
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in raw:
        if r["outcome"] == CANCELLED:
            continue
        record = r["config_fingerprint"] if r["outcome"] == SUCCEEDED else None
        facts = json.dumps(r["device_facts"], sort_keys=True)
        groups[(r["model_sha256"], r["device_key"], r["config"], facts, record)].append(r)
    out = []
    for (model, device, config, facts, record), rs in groups.items():
        ok = [r for r in rs if r["outcome"] == SUCCEEDED]
        dev = [r for r in rs if r["outcome"] == FAILED and r["error"].startswith(
            tuple(f"{e}: " for e in DEVICE_CAUSED_ERRORS))]  # fmt: skip
        infra = [r for r in rs if r["outcome"] == FAILED and r not in dev]
        late = [r for r in rs if r["outcome"] == TIMED_OUT]
        us = [r["avg_us"] for r in ok if r["avg_us"] is not None]
        errs = [r["max_avg_error"] for r in ok if r["max_avg_error"] is not None]
        cvs = [r["benchmark"]["std_us"] / r["avg_us"] for r in ok if "std_us" in r["benchmark"]]
        quant = [int(r["benchmark"]["options"]["enable_quant"]) for r in ok
                 if "options" in r["benchmark"]]  # fmt: skip
        out.append({
            "model": model, "device_key": device, "config": config,
            "device_facts": json.loads(facts), "measured_under": record,
            "newest_ok": max((r["id"] for r in ok), default=None), "ok": len(ok),
            "failed": len({r["job_id"] for r in dev}), "timed_out": len(late),
            "infra": len(infra), "error": max((r["error"] for r in dev), default=None),
            "infra_error": max((r["error"] for r in infra + late), default=None),
            "mean_us": sum(us) / len(us) if us else None,
            "mean_sq": sum(u * u for u in us) / len(us) if us else None,
            "worst_run_cv": max(cvs, default=None), "max_error": max(errs, default=None),
            "min_error": min(errs, default=None), "diffs": len(errs),
            "fell_back": max((r["total_ops"] - r["delegated_ops"] for r in ok), default=None),
            "total_ops": max((r["total_ops"] for r in rs if r["total_ops"] is not None),
                             default=None),
            "quant": min(quant, default=None),
        })  # fmt: skip
    return out


def _key(row: dict[str, Any]) -> tuple:
    return (row["model"], row["device_key"], row["config"],
            json.dumps(row["device_facts"], sort_keys=True), str(row["measured_under"]))  # fmt: skip


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12)
    return a == b


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        yield sqlite_engine(tmp_path)
        return
    with new_pg_database("evidence") as url:
        engine = open_database(url)
        yield engine
        engine.dispose()


def test_the_evidence_rows_are_the_aggregates_as_defined(engine: Engine) -> None:
    _seed(engine)
    read = read_evidence(engine)
    got = {_key(r): r for r in read.rows}
    want = {_key(r): r for r in _by_definition(engine)}
    assert sorted(got) == sorted(want)
    assert len(got) == len(read.rows)
    for key, w in want.items():
        g = got[key]
        assert set(g) == set(w), key
        diff = {k: (g[k], w[k]) for k in w if not _same(g[k], w[k])}
        assert not diff, (key, diff)
    # the cases are there: p1's driver update, p2's job failed twice by the device counted
    # once, the unregistered device kept
    p1 = {_key(r)[3] for r in read.rows if r["device_key"] == "android:p1"}
    assert len(p1) == 2
    assert {r["failed"] for r in read.rows if r["device_key"] == "android:p2"} == {0, 2}
    assert any(r["device_key"] == "android:gone" for r in read.rows)


def test_allowlists_from_the_rows_as_defined_are_the_same(engine: Engine) -> None:
    _seed(engine)
    read = read_evidence(engine)
    th = Thresholds()
    fast = build_allowlists(read.rows, read.devices, read.models, th)
    defined = build_allowlists(_by_definition(engine), read.devices, read.models, th)
    for sha in MODELS:
        a, b = fast[sha], defined[sha]
        assert [e.variables for e in a.entries] == [e.variables for e in b.entries]
        assert [e.devices for e in a.entries] == [e.devices for e in b.entries]
        assert [e.decision for e in a.entries] == [e.decision for e in b.entries]
    statuses = {e.decision.status for a in fast.values() for e in a.entries}
    assert statuses == {"supported", "unsupported", "unknown"}
