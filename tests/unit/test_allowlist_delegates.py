"""`devicefarm allowlist --delegate D`: another delegate's list, judged on every canonical
configuration of D measured for the model (e.g. each NNAPI accelerator) by the GPU
list's rules, written as `devicefarm.D.status`/`.config` in a file of its own. The GPU
list (the default) stays LiteRT's (its own tests: test_allowlist_*.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import NamedTuple

import pytest
from sqlalchemy import Engine, select

from devicefarm.cli import main
from devicefarm.commands.allowlist import DELEGATES
from farm_core import jobs
from farm_core.schema import SUCCEEDED, Job
from orchestrator.allowlist import devicedb, reader
from orchestrator.allowlist.collect import build_allowlist
from orchestrator.allowlist.export import render
from orchestrator.allowlist.listfile import load_list
from orchestrator.allowlist.rules import (
    ERROR_TOO_LARGE,
    LIST_DELEGATES,
    SLOWER_THAN_CPU,
    SUPPORTED,
    UNSUPPORTED,
    Thresholds,
    judge,
)
from orchestrator.submit import submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

FAST, SLOW, WRONG = "android:fast", "android:slow", "android:wrong"
DSP, NPU = "nnapi:accelerator=qti-dsp", "nnapi:accelerator=google-edgetpu"
HALF = "nnapi:fp16=true"  #: fp16 precision: the 1e-2 error limit, not fp32's 1e-3
CONFIGS = ("cpu", "gpu-fp32", DSP, NPU, "nnapi", HALF)
#: Per phone, per configuration: (avg µs, inference-diff error) of every run.
RUNS = {
    FAST: {
        "cpu": (8000, None),
        "gpu-fp32": (9000, 1e-6),  # slower than the CPU: the GPU list says no
        DSP: (2000, 1e-4),  # the best NNAPI configuration
        NPU: (3000, 1e-4),
        "nnapi": (6000, 1e-4),
        HALF: (5000, 5e-3),  # fine for fp16
    },
    SLOW: {
        "cpu": (8000, None),
        "gpu-fp32": (2000, 1e-6),
        DSP: (9000, 1e-4),
        NPU: (8000, 1e-4),
        "nnapi": (12000, 1e-4),
        HALF: (7000, 1e-4),
    },
    WRONG: {  # fast, but with an fp32 configuration's error above 1e-3
        "cpu": (8000, None),
        "gpu-fp32": (2000, 1e-6),
        DSP: (2000, 5e-3),
        NPU: (2000, 5e-3),
        "nnapi": (2000, 5e-3),
        HALF: (2000, 5e-2),
    },
}
FACTS = {
    FAST: ("Pixel 8", "husky", "Mali-G715"),
    SLOW: ("SM-A515F", "a51", "Mali-G72"),
    WRONG: ("Moto G", "rhode", "Adreno (TM) 610"),
}


def _device(key: str) -> dict:
    model, name, gpu = FACTS[key]
    return {
        "kind": "android",
        "host": "lab1",
        "vendor": "acme",
        "model": model,
        "renderer": gpu,
        "api_version": "OpenGL ES 3.2",
        "android_sdk": 34,
        "driver_version": "1",
        "facts": {
            "ro.product.manufacturer": "acme",
            "ro.product.model": model,
            "ro.product.device": name,
            "ro.build.version.sdk": "34",
            "accelerators": {"nnapi_devices": ["qti-dsp", "google-edgetpu"]},
        },
    }


class Farm(NamedTuple):
    db: str  #: its URL
    model: str  #: the model's name
    engine: Engine


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Farm:
    """Two campaigns over the phones, every run as in RUNS."""
    folder = Path(tmp_path_factory.mktemp("delegates"))
    engine = sqlite_engine(folder)
    for key in RUNS:
        add_device(engine, key, **_device(key))
    model = write_model(folder / "m.tflite")
    for _ in range(2):  # an unsupported verdict needs two results
        sub = submit(engine, RecordingDispatcher(), [model], "key=" + "|".join(RUNS), CONFIGS)
        with engine.begin() as c:
            rows = c.execute(
                select(Job.id, Job.device_key, Job.config).where(Job.campaign_id == sub.campaign_id)
            ).all()
        assert {(k, cfg) for _, k, cfg in rows} == {(k, c) for k in RUNS for c in CONFIGS}
        for job_id, key, config in rows:
            avg_us, error = RUNS[key][config]
            values = {"avg_us": float(avg_us), "max_avg_error": error}
            values |= {"delegated_ops": 1, "total_ops": 1}
            with engine.begin() as c:
                jobs.claim(c, job_id, 1, "w", 60)
                jobs.finish(c, job_id, 1, "w", SUCCEEDED, values)
    return Farm(f"sqlite:///{folder / 'farm.db'}", model.name, engine)


def _facts(key: str) -> dict[str, str]:
    model, name, gpu = FACTS[key]
    return {
        "tflite.gpu_model": gpu,
        "tflite.opengl_es_version": "3.2",
        "tflite.manufacturer": "acme",
        "tflite.device_model": model,
        "tflite.device_name": name,
        "tflite.android_sdk_version": "34",
    }


def _export(db: str, model: str, out: Path, *extra: str) -> int:
    return main(["allowlist", "--db", db, "--model", model, "--out", str(out), *extra])


def test_nnapi_list_judges_every_nnapi_configuration(farm: Farm) -> None:
    db, model, engine = farm
    allowlist = build_allowlist(engine, model, Thresholds(), delegate="nnapi")
    fast = allowlist.entry_for(FAST).decision
    assert (fast.status, fast.config, fast.precision) == (SUPPORTED, DSP, "fp32"), fast.reason
    assert fast.speedup == pytest.approx(4.0)
    slow = allowlist.entry_for(SLOW).decision
    assert (slow.status, slow.code) == (UNSUPPORTED, SLOWER_THAN_CPU)
    assert f"{DSP}: 0.89x over CPU, needs 1.20x" in slow.reason
    wrong = allowlist.entry_for(WRONG).decision
    # the fp32 configurations' 5e-3 is above 1e-3; fp16's 5e-2 above 1e-2
    assert (wrong.status, wrong.code) == (UNSUPPORTED, ERROR_TOO_LARGE), wrong.reason
    assert f"{DSP}: error 0.005 above 0.001" in wrong.reason
    assert f"{HALF}: error 0.05 above 0.01" in wrong.reason
    # the GPU list of the same results judges the GPU only, as before
    gpu = build_allowlist(engine, model, Thresholds())
    assert gpu.entry_for(FAST).decision.code == SLOWER_THAN_CPU
    assert gpu.entry_for(SLOW).decision.config == "gpu-fp32"


def test_fp16_configuration_gets_the_fp16_error_limit(farm: Farm) -> None:
    _, model, engine = farm
    evidence = build_allowlist(engine, model, Thresholds(), delegate="nnapi").entry_for(FAST)
    stats = evidence.evidence.configs
    assert set(stats) == set(CONFIGS)  # every result read, only nnapi's judged
    cpu_us = evidence.evidence.cpu_us
    # 5e-3 passes under fp16's 1e-2 (RunConfig.precision), not under a 1e-3 given
    assert judge(stats[HALF], cpu_us, Thresholds()).ok is True
    strict = judge(stats[HALF], cpu_us, Thresholds(max_error=1e-3))
    assert (strict.ok, strict.code) == (False, ERROR_TOO_LARGE)


def test_cli_writes_a_devicedb_json_an_app_asks_per_delegate(
    farm: Farm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, model, _ = farm
    out = tmp_path / "allowlist-nnapi.json"
    assert _export(db, model, out, "--delegate", "nnapi") == 0
    assert "nnapi list: 1 supported, 2 unsupported" in capsys.readouterr().err
    roots = load_list(out)
    assert reader.delegates(roots) == {"nnapi"}
    fast = reader.evaluate(roots, _facts(FAST))
    assert fast["devicefarm.nnapi.status"] == "SUPPORTED"
    assert fast["devicefarm.nnapi.config"] == DSP
    assert "tflite.gpu.status" not in fast  # GPUCompatibilityList finds nothing here
    slow = reader.evaluate(roots, _facts(SLOW))
    assert (slow["devicefarm.nnapi.status"], slow["devicefarm.nnapi.reason"]) == (
        "UNSUPPORTED",
        SLOWER_THAN_CPU,
    )
    assert slow["devicefarm.nnapi.config"] == "none"
    # the same layout: printed from the flatbuffer, as the GPU list's JSON is
    assert devicedb.to_json(roots) == out.read_text()
    facts = ",".join(f"{k}={v}" for k, v in _facts(FAST).items())
    assert main(["allowlist", "evaluate", str(out), "--facts", facts]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == "SUPPORTED" and f"devicefarm.nnapi.config={DSP}" in printed
    facts = ",".join(f"{k}={v}" for k, v in _facts(SLOW).items())
    assert main(["allowlist", "evaluate", str(out), "--facts", facts]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "UNSUPPORTED"
    # the GPU's status is not in it: asked for, the list says whose it is
    assert main(["allowlist", "evaluate", str(out), "--facts", facts, "--delegate", "gpu"]) == 1
    assert "is a nnapi list, not a gpu one" in capsys.readouterr().err


def test_csv_and_json_name_the_configuration(farm: Farm, tmp_path: Path) -> None:
    db, model, _ = farm
    assert _export(db, model, tmp_path / "l.csv", "--delegate", "nnapi", "--format", "csv") == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "l.csv").read_text())))
    by_status = {r["status"]: r for r in rows}
    assert by_status[SUPPORTED]["config"] == DSP and "enable_quant" not in by_status[SUPPORTED]
    assert {r["reason_code"] for r in rows} == {"", SLOWER_THAN_CPU, ERROR_TOO_LARGE}
    assert _export(db, model, tmp_path / "l.json", "--delegate", "nnapi", "--format", "json") == 0
    data = json.loads((tmp_path / "l.json").read_text())
    assert data["delegate"] == "nnapi"
    assert {e["decision"]["status"] for e in data["entries"]} == {SUPPORTED, UNSUPPORTED}


def test_a_delegate_never_measured_is_unknown_everywhere(farm: Farm, tmp_path: Path) -> None:
    db, model, _ = farm
    out = tmp_path / "allowlist-hexagon.json"
    assert _export(db, model, out, "--delegate", "hexagon", "--format", "json") == 0
    entries = json.loads(out.read_text())["entries"]
    assert {e["decision"]["reason"] for e in entries} == {"no hexagon configuration measured"}


def test_binary_and_merge_stay_gpu_only(
    farm: Farm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, model, engine = farm
    out = tmp_path / "l.bin"
    assert _export(db, model, out, "--delegate", "nnapi", "--format", "devicedb-bin") == 2
    assert "devicedb-bin is LiteRT's GPU compatibility list" in capsys.readouterr().err
    assert not out.exists()
    allowlist = build_allowlist(engine, model, Thresholds(), delegate="xnnpack")
    with pytest.raises(ValueError, match="a xnnpack list: devicedb-bin"):
        render(allowlist, "devicedb-bin")
    ours, base = tmp_path / "allowlist-nnapi.json", tmp_path / "gpu.json"
    assert _export(db, model, ours, "--delegate", "nnapi") == 0
    assert _export(db, model, base) == 0
    merged = tmp_path / "m.bin"
    assert main(["allowlist", "merge", str(ours), "--base", str(base), "--out", str(merged)]) == 1
    assert "only a GPU list merges onto LiteRT's" in capsys.readouterr().err


def test_bad_delegate_is_refused_with_the_choices(
    farm: Farm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, model, _ = farm
    for bad in ("cpu", "npu", "GPU"):
        with pytest.raises(SystemExit) as stop:
            _export(db, model, tmp_path / "x.json", "--delegate", bad)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "invalid choice" in err
        choices = err.split("choose from")[1]
        assert all(d in choices for d in ("gpu", "xnnpack", "nnapi", "hexagon"))


def test_cli_choices_are_the_rules_delegates() -> None:
    assert DELEGATES == LIST_DELEGATES == ("gpu", "xnnpack", "nnapi", "hexagon")


def test_help_says_where_another_delegates_list_goes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["allowlist", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--delegate {gpu,xnnpack,nnapi,hexagon}" in text
    assert "devicefarm.<delegate>.status" in text and "GPUCompatibilityList never" in text
