"""`devicefarm allowlist`: every format, thresholds, errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from devicefarm.cli import main
from devicefarm.demo_lab import MODELS, seed
from orchestrator.allowlist import devicedb, reader
from orchestrator.allowlist.listfile import load_list
from tests.support.farm import sqlite_engine


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = Path(tmp_path_factory.mktemp("cli"))
    seed(sqlite_engine(folder), campaigns=3, running_campaign=False)
    return f"sqlite:///{folder / 'farm.db'}"


def allowlist(db: str, out: Path, *extra: str) -> int:
    return main(["allowlist", "--db", db, "--model", MODELS[0].name, "--out", str(out), *extra])


def test_devicedb_bin_and_json_are_the_same_tree(db: str, tmp_path: Path) -> None:
    assert allowlist(db, tmp_path / "l.bin", "--format", "devicedb-bin") == 0
    assert allowlist(db, tmp_path / "l.json", "--format", "devicedb-json") == 0
    roots = devicedb.decode((tmp_path / "l.bin").read_bytes())
    assert devicedb.to_json(roots) == (tmp_path / "l.json").read_text()
    facts = {
        "tflite.gpu_model": "Adreno (TM) 660",
        "tflite.opengl_es_version": "3.2",
        "tflite.manufacturer": "samsung",
        "tflite.device_model": "SM-G991B",
        "tflite.device_name": "o1s",
        "tflite.android_sdk_version": "33",
    }
    assert reader.status(roots, facts) == "supported"  # a stock app: no driver given


def test_csv_and_json(db: str, tmp_path: Path) -> None:
    assert allowlist(db, tmp_path / "l.csv", "--format", "csv") == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "l.csv").read_text())))
    assert {r["status"] for r in rows} >= {"supported", "unsupported", "unknown"}
    assert allowlist(db, tmp_path / "l.json", "--format", "json", "--min-speedup", "50") == 0
    data = json.loads((tmp_path / "l.json").read_text())
    assert data["thresholds"]["min_speedup"] == 50
    assert {e["decision"]["status"] for e in data["entries"]} <= {"unsupported", "unknown"}


def test_bad_input(db: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["allowlist", "--db", db, "--model", "nope", "--out", str(tmp_path / "x")]) == 1
    assert "no model 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # a usage error, before the database
        allowlist(db, tmp_path / "x", "--min-runs", "0")
    assert stop.value.code == 2
    assert allowlist(db, Path("-"), "--format", "devicedb-bin") == 2  # before the work


def test_help_lists_evaluate_and_merge(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["allowlist", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "evaluate" in text and "merge" in text and "--sdk-minimum" not in text


def test_sdk_minimum_is_gone(db: str, tmp_path: Path) -> None:
    # SDK ranges are always written; the no-op flag is refused as any unknown flag
    with pytest.raises(SystemExit) as stop:
        allowlist(db, tmp_path / "x.json", "--sdk-minimum")
    assert stop.value.code == 2


def test_export_needs_model_and_out(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["allowlist", "--db", db]) == 2  # a usage error
    assert "needs --model and --out" in capsys.readouterr().err


def test_merge_is_a_subcommand(db: str, tmp_path: Path) -> None:
    ours = tmp_path / "ours.json"
    assert allowlist(db, ours, "--format", "devicedb-json") == 0
    merged = tmp_path / "merged.json"
    argv = ["allowlist", "merge", str(ours), "--base", str(ours), "--out", str(merged)]
    assert main([*argv, "--format", "devicedb-json"]) == 0
    assert reader.status(load_list(merged), {}) == reader.status(load_list(ours), {})
