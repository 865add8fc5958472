"""Submission: everything validated first, every error reported, nothing half-submitted."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from farm_core.schema import DISPATCHED, QUARANTINED, QUEUED, Campaign, Device, Job, utcnow
from orchestrator.submit import RunSettings, SubmissionError, submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "opencl:pocl:cpu", "opencl", vendor="pocl", tags=["lab"])
    add_device(engine, "cpu:reference:h1", "cpu", vendor="reference")
    return engine


def counts(engine) -> tuple[int, int]:
    with engine.begin() as conn:
        return (
            conn.execute(select(func.count()).select_from(Campaign)).scalar(),
            conn.execute(select(func.count()).select_from(Job)).scalar(),
        )


def test_submit_stores_and_dispatches(farm, tmp_path: Path) -> None:
    model = write_model(tmp_path / "m.tflite")
    d = RecordingDispatcher()
    sub = submit(farm, d, [model], "all", "cpu,gpu-fp32,gpu-fp16")
    # cpu runs on the cpu device, the gpu configs on the OpenCL device
    assert sub.jobs == 3 and sub.sent == 3
    assert sorted((o.device_key, o.attempt) for o in d.sent) == [
        ("cpu:reference:h1", 1),
        ("opencl:pocl:cpu", 1),
        ("opencl:pocl:cpu", 1),
    ]
    with farm.begin() as conn:
        states = conn.execute(select(Job.state, Job.attempt)).all()
    assert states == [(DISPATCHED, 1)] * 3


def test_broker_down_leaves_jobs_queued_for_the_reconciler(farm, tmp_path: Path) -> None:
    model = write_model(tmp_path / "m.tflite")
    sub = submit(
        farm, RecordingDispatcher(broken="ConnectionError: refused"), [model], "all", "cpu"
    )
    assert sub.sent == 0 and "broker unreachable" in sub.warnings[0]
    with farm.begin() as conn:
        assert conn.execute(select(Job.state)).scalars().all() == [QUEUED]


@pytest.mark.parametrize(
    ("models", "selector", "configs", "settings", "priority", "needle"),
    [
        (["missing.tflite"], "all", "cpu", {}, 0, "cannot read it"),
        (["garbage"], "all", "cpu", {}, 0, "model "),
        ([], "all", "cpu", {}, 0, "no model given"),
        (["ok"], "vendor=nvidia", "cpu", {}, 0, "matches no device"),
        (["ok"], "colour=red", "cpu", {}, 0, "unknown selector field"),
        (["ok"], "all", "gpu-fp64", {}, 0, "unknown configuration"),
        (["ok"], "kind=cpu", "gpu-fp16", {}, 0, "no selected device runs it"),
        (["ok"], "all", "cpu", {"num_runs": 0}, 0, "--runs must be at least 1"),
        (["ok"], "all", "cpu", {"timeout_s": 1e9}, 0, "--timeout must be"),
        (["ok"], "all", "cpu", {}, 12, "--priority must be"),
    ],
)
def test_bad_input_is_rejected_and_nothing_is_stored(
    farm, tmp_path: Path, models, selector, configs, settings, priority, needle
) -> None:
    paths = []
    for m in models:
        if m == "ok":
            paths.append(write_model(tmp_path / "ok.tflite"))
        elif m == "garbage":
            (tmp_path / "g.tflite").write_bytes(b"TFL3 not a flatbuffer")
            paths.append(tmp_path / "g.tflite")
        else:
            paths.append(tmp_path / m)
    d = RecordingDispatcher()
    with pytest.raises(SubmissionError) as err:
        submit(farm, d, paths, selector, configs, RunSettings(**settings), priority)
    assert any(needle in e for e in err.value.errors), err.value.errors
    assert "nothing was submitted" in str(err.value)
    assert counts(farm) == (0, 0) and d.sent == []


def test_every_error_is_collected_at_once(farm, tmp_path: Path) -> None:
    with pytest.raises(SubmissionError) as err:
        submit(
            farm,
            RecordingDispatcher(),
            [tmp_path / "nope.tflite"],
            "colour=red",
            "gpu-fp64",
            RunSettings(num_runs=0),
            priority=-1,
        )
    assert len(err.value.errors) == 5, err.value.errors


def test_offline_and_quarantined_devices_are_skipped_with_a_warning(farm, tmp_path) -> None:
    with farm.begin() as conn:
        conn.execute(
            update(Device)
            .where(Device.kind == "cpu")
            .values(last_seen=utcnow() - timedelta(hours=1))
        )
    sub = submit(
        farm, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "all", "gpu-fp32"
    )
    assert sub.devices == ["opencl:pocl:cpu"]
    assert any("offline" in w for w in sub.warnings)
    with farm.begin() as conn:
        conn.execute(update(Device).values(health=QUARANTINED, health_reason="canary drift"))
    with pytest.raises(SubmissionError, match="only offline or quarantined"):
        submit(farm, RecordingDispatcher(), [tmp_path / "m.tflite"], "all", "gpu-fp32")


def test_models_are_content_addressed(farm, tmp_path: Path) -> None:
    a = write_model(tmp_path / "a.tflite")
    b = tmp_path / "copy.tflite"
    b.write_bytes(a.read_bytes())
    sub = submit(farm, RecordingDispatcher(), [a, b], "kind=cpu", "cpu")
    assert sub.jobs == 1  # the same bytes are one model
    sub2 = submit(
        farm, RecordingDispatcher(), [a, write_model(tmp_path / "c", 2.0)], "kind=cpu", "cpu"
    )
    assert sub2.jobs == 2
