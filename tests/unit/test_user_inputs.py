"""The submitter's own input values (issue 15): `--input LAYER:SHAPE:FILE` or an .npz,
checked at submission against the model, stored by content hash with the campaign, and
used by the CPU and OpenCL runners (benchmark and diff)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from delegate_runtime import read_model
from farm_core import user_inputs
from farm_core.schema import Campaign, InputFile, Result
from orchestrator.submit import SubmissionError, submit
from tests.conftest import require
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

#: The example model's one input: `x`, float32 [1, 4] (delegate_runtime.examples).
X = np.array([[1.0, -2.0, 3.5, 0.25]], np.float32)


@pytest.fixture
def model(tmp_path: Path):
    path = write_model(tmp_path / "m.tflite")
    return path, read_model(path.read_bytes())


def _raw(tmp_path: Path, data: bytes, name: str = "x.bin") -> str:
    (tmp_path / name).write_bytes(data)
    return str(tmp_path / name)


def test_a_raw_value_file_as_benchmark_model_takes_it(tmp_path: Path, model) -> None:
    errors: list[str] = []
    got = user_inputs.read_inputs([f"x:1,4:{_raw(tmp_path, X.tobytes())}"], [model[1]], errors)
    assert errors == []
    (value,) = got
    assert value.setting() == {
        "layer": "x",
        "shape": [1, 4],
        "dtype": "float32",
        "sha256": value.sha256,
    }
    assert value.data == X.tobytes()


def test_an_npz_names_its_layers(tmp_path: Path, model) -> None:
    np.savez(tmp_path / "v.npz", x=X)
    errors: list[str] = []
    (value,) = user_inputs.read_inputs([str(tmp_path / "v.npz")], [model[1]], errors)
    assert errors == [] and value.shape == (1, 4) and value.data == X.tobytes()


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda d: "x:1,4:" + str(d / "missing.bin"), "No such file"),
        (lambda d: "x:1,four:" + _raw(d, X.tobytes()), "not positive integers"),
        (lambda d: "x:1,0:" + _raw(d, X.tobytes()), "not positive integers"),
        (lambda d: "justafile.bin", "give LAYER:SHAPE:FILE"),
        (lambda d: "y:1,4:" + _raw(d, X.tobytes()), "'y' is not an input of the model"),
        (lambda d: "x:1,5:" + _raw(d, X.tobytes()), "shape [1, 5], the model's is [1, 4]"),
        (lambda d: "x:1,4:" + _raw(d, X.tobytes()[:12]), "12 bytes, [1, 4] float32 needs 16"),
        (lambda d: "x:1,4:" + str(d), "not a regular file"),
        (lambda d: _raw(d, b"not a zip", "v.npz"), "not a numpy .npz archive"),
    ],
)
def test_bad_input_values_are_refused_with_the_reason(
    tmp_path: Path, model, make, needle: str
) -> None:
    errors: list[str] = []
    assert user_inputs.read_inputs([make(tmp_path)], [model[1]], errors) == []
    assert any(needle in e for e in errors), errors


def test_npz_of_the_wrong_type(tmp_path: Path, model) -> None:
    np.savez(tmp_path / "v.npz", x=X.astype(np.float64))
    errors: list[str] = []
    user_inputs.read_inputs([str(tmp_path / "v.npz")], [model[1]], errors)
    assert any("float64 values, the model takes float32" in e for e in errors), errors


def test_a_value_given_twice(tmp_path: Path, model) -> None:
    raw = f"x:1,4:{_raw(tmp_path, X.tobytes())}"
    errors: list[str] = []
    user_inputs.read_inputs([raw, raw], [model[1]], errors)
    assert any("'x' is given twice" in e for e in errors), errors


def test_files_above_the_cap_are_not_read(
    tmp_path: Path, model, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(user_inputs, "MAX_INPUT_BYTES", 8)
    errors: list[str] = []
    user_inputs.read_inputs([f"x:1,4:{_raw(tmp_path, X.tobytes())}"], [model[1]], errors)
    assert any("16 bytes, at most 8" in e for e in errors), errors


def test_submit_stores_the_values_by_hash_and_refuses_bad_ones(tmp_path: Path, model) -> None:
    engine = sqlite_engine(tmp_path)
    add_device(engine, "noop:a", "noop")
    raw = f"x:1,4:{_raw(tmp_path, X.tobytes())}"
    with pytest.raises(SubmissionError, match="shape"):
        submit(engine, RecordingDispatcher(), [model[0]], "all", "cpu", inputs=["x:2,4:" + raw[6:]])
    sub = submit(engine, RecordingDispatcher(), [model[0]], "all", "cpu", inputs=[raw])
    again = submit(engine, RecordingDispatcher(), [model[0]], "all", "cpu", inputs=[raw])
    with engine.begin() as conn:
        settings = conn.execute(
            select(Campaign.settings).where(Campaign.id == sub.campaign_id)
        ).scalar_one()
        stored = conn.execute(select(InputFile.sha256, InputFile.data)).all()
    (item,) = settings["inputs"]
    assert item["layer"] == "x" and item["shape"] == [1, 4] and item["dtype"] == "float32"
    assert stored == [(item["sha256"], X.tobytes())]  # once, for both campaigns
    assert again.campaign_id != sub.campaign_id


@pytest.mark.parametrize("devices", ["cpu", "opencl"])
def test_run_benchmarks_and_diffs_on_the_given_values(tmp_path: Path, devices: str) -> None:
    from devicefarm.embedded import run_local
    from orchestrator.submit import RunSettings
    from worker_agent.discovery import discover_opencl

    if devices == "opencl":  # every OpenCL device here (two PoCL builds on some machines)
        require(len(discover_opencl("test")) > 0, "an OpenCL device (PoCL)")
    path = write_model(tmp_path / "m.tflite")
    raw = f"x:1,4:{_raw(tmp_path, X.tobytes())}"
    db = f"sqlite:///{tmp_path / 'farm.db'}"
    broker = f"filesystem://{tmp_path / 'broker'}"
    configs = ["cpu"] if devices == "cpu" else ["gpu-fp32"]
    settings = RunSettings(num_runs=2, min_secs=0.0, diff_runs=2)
    said: list[str] = []
    run = run_local([path], [devices], configs, settings, db, broker, say=said.append,
                    inputs=[raw])  # fmt: skip
    assert run.ok
    # one job per device its canary passed; a PoCL that cannot compile for this CPU (the
    # wheel's LLVM 14 on a newer one) is quarantined and named, not run
    canaries = [m for m in said if m.startswith("canary ") and ": running" not in m]
    assert canaries and all(": ok" in m or ": QUARANTINED - " in m for m in canaries)
    found = sum(": ok" in m for m in canaries)
    engine = sqlite_engine(tmp_path)
    with engine.begin() as conn:
        rows = conn.execute(select(Result.benchmark, Result.diff)).all()
    assert len(rows) == found  # one job per device
    bench, diff = rows[0]
    assert bench["user_inputs"] == ["x"]
    if devices == "opencl":  # the diff ran on the same values: identical outputs, no error
        assert diff["num_runs"] == 2 and diff["outputs"][0]["avg_error"] < 1e-6
    json.dumps(bench)  # stored as plain JSON
