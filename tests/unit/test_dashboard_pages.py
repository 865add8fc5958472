"""Every dashboard page runs on a seeded SQLite farm (streamlit.testing AppTest): no
exception, and the page's key elements are there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from streamlit.testing.v1 import AppTest  # noqa: E402

from devicefarm.demo_lab import seed  # noqa: E402
from tests.support.farm import sqlite_engine  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = Path(tmp_path_factory.mktemp("dash"))
    seed(sqlite_engine(folder))
    url = f"sqlite:///{folder / 'farm.db'}"
    saved = {k: os.environ.get(k) for k in ("DEVICEFARM_DB", "DEVICEFARM_DASHBOARD_READ_ONLY")}
    os.environ["DEVICEFARM_DB"] = url
    os.environ.pop("DEVICEFARM_DASHBOARD_READ_ONLY", None)
    yield url
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def page(name: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.switch_page(f"views/{name}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for e in at.error] + [s.value for s in at.success]
    return "\n".join(str(p) for p in parts)


def test_fleet(farm: str) -> None:
    at = page("fleet")
    assert at.title[0].value == "Fleet"
    assert [m.label for m in at.metric] == ["devices", "online", "quarantined", "running jobs"]
    df = at.dataframe[0].value
    assert {"host", "kind", "state", "health", "last_seen", "current_job"} <= set(df.columns)
    assert "offline" in set(df["state"]) and (df["current_job"] != "").any()


def test_campaigns(farm: str) -> None:
    at = page("campaigns")
    assert at.title[0].value == "Campaigns"
    assert len(at.dataframe[0].value) == 7
    at.selectbox(key="campaign").select(1).run()
    failures = at.dataframe[1].value
    assert "CL_OUT_OF_RESOURCES" in " ".join(failures["reason"])
    assert at.button  # the submit form is there (not read-only)


def test_campaigns_read_only(farm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVICEFARM_DASHBOARD_READ_ONLY", "1")
    at = page("campaigns")
    assert "read-only" in texts(at)
    assert not at.get("file_uploader")


def test_compare(farm: str) -> None:
    at = page("compare")
    df = at.dataframe[0].value
    assert {"avg_ms", "speedup", "init_cold_ms", "init_cached_ms", "peak_mb"} <= set(df.columns)
    assert set(df["config"]) == {"cpu", "gpu-fp32", "gpu-fp16"}
    # latency, speed-up, init, peak memory (measured: not an empty chart), the op profile
    assert len(at.get("vega_lite_chart")) == 5 and not at.info
    profile = at.dataframe[1].value
    assert {"node", "op", "backend", "avg_ms"} <= set(profile.columns) and len(profile)


def test_compare_reads_right(farm: str) -> None:
    """No cell the browser would write as "None"; the fastest result's median never above
    the mean median; `results` counts the stored results pooled (a row of six jobs: 6)."""
    at = page("compare")
    df = at.dataframe[0].value
    assert not df.isna().any().any(), df[df.isna().any(axis=1)]
    numeric = df[df["best_ms"].map(lambda v: isinstance(v, float))]
    assert (numeric["best_ms"] <= numeric["median_ms"]).all()
    assert "runs" not in df.columns and df["results"].max() > 1
    # models by lineage name and version, the file only where it differs
    assert all(" @ " in o for o in at.selectbox(key="model").options)
    # per-op labels: index and op, short and unique
    labels = at.dataframe[1].value["label"]
    assert labels.is_unique and all(len(x) < 40 for x in labels)


def pick_model(at: AppTest, needle: str) -> None:
    box = at.selectbox(key="model")
    box.select_index(next(i for i, o in enumerate(box.options) if needle in o)).run()
    assert not at.exception


def test_accuracy(farm: str) -> None:
    at = page("accuracy")
    pick_model(at, "mobilenet")
    df = at.dataframe[0].value
    assert {"device", "config", "output", "avg_error", "max_error"} <= set(df.columns)
    assert at.subheader[0].value == "Task accuracy"


def test_op_coverage_shows_fallbacks(farm: str) -> None:
    at = page("op_coverage")
    pick_model(at, "ssd")
    assert "TFLite_Detection_PostProcess" in " ".join(at.dataframe[-1].value["reason"])


def test_compatibility_matrix_and_builder(farm: str) -> None:
    at = page("compatibility")
    assert at.get("vega_lite_chart")
    preview = at.dataframe[0].value
    assert {"status", "reason_code", "precision", "devices"} <= set(preview.columns)
    assert len(at.get("download_button")) == 4
    at.number_input(key="min_speedup").set_value(50.0).run()
    assert not at.exception
    assert "supported" not in set(at.dataframe[0].value["status"])
    assert '"tflite.gpu.status"' in at.code[0].value
    # SDK ranges are always written: no MINIMUM checkbox (issue 15)
    assert "sdk_minimum" not in [c.key for c in at.checkbox]


def test_history_flags_the_regression(farm: str) -> None:
    at = page("history")
    pick_model(at, "mobilenet")
    at.selectbox(key="device").select("android:pixel4a").run()
    assert not at.exception
    assert "regression" in at.error[0].value
    table = at.dataframe[0].value
    assert table["regression"].any()
    assert table["measured"].str.endswith(" UTC").all()  # stored in UTC: said so
    assert at.number_input(key="threshold").value == 5  # the CI gate's default, 5 %


def test_login_with_a_password(farm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVICEFARM_DASHBOARD_PASSWORD", "s3cret")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    assert not at.title or at.title[0].value == "devicefarm"
    at.text_input(key="password").input("wrong").run()
    assert at.error and not at.dataframe
    at.text_input(key="password").input("s3cret").run()
    assert not at.exception and at.title[0].value == "Fleet"
