"""Hostile submissions (issue 16, point 10): each is refused early and clearly, nothing is
written, and no file is read before it is known to be a regular file under the model cap."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from farm_core.schema import Campaign, Job, StoredModel
from farm_core.selectors import MAX_VERSION_DIGITS, parse_selector
from orchestrator.submit import (
    DEFAULT_MAX_MODEL_MB,
    ENV_MAX_MODEL_MB,
    RunSettings,
    SubmissionError,
    submit,
)
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

MIB = 1024**2


@pytest.fixture
def farm(tmp_path: Path):
    engine = sqlite_engine(tmp_path)
    add_device(engine, "cpu:reference:h1", "cpu", vendor="reference", driver_version="1.2")
    return engine


def stored(engine) -> tuple[int, int, int]:
    with engine.begin() as conn:
        return tuple(
            conn.execute(select(func.count()).select_from(t)).scalar()
            for t in (StoredModel, Campaign, Job)
        )


def refused(engine, paths, needle: str, selector: str = "all", **kwargs) -> SubmissionError:
    """Submit; assert it is refused with `needle` in one error, and nothing was written."""
    d = RecordingDispatcher()
    with pytest.raises(SubmissionError) as err:
        submit(engine, d, paths, selector, "cpu", **kwargs)
    assert any(needle in e for e in err.value.errors), err.value.errors
    assert stored(engine) == (0, 0, 0) and d.sent == []
    return err.value


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_dev_zero_is_not_a_regular_file(farm) -> None:
    refused(farm, ["/dev/zero"], "not a regular file (a character device)")


@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_blocking(farm, tmp_path: Path) -> None:
    fifo = tmp_path / "model.tflite"
    os.mkfifo(fifo)
    refused(farm, [fifo], "not a regular file (a FIFO)")


def test_a_directory_is_refused(farm, tmp_path: Path) -> None:
    (tmp_path / "dir.tflite").mkdir()
    refused(farm, [tmp_path / "dir.tflite"], "not a regular file (a directory)")


def test_a_2gib_sparse_file_is_refused_before_reading(farm, tmp_path: Path) -> None:
    big = tmp_path / "big.tflite"
    with open(big, "wb") as f:
        f.truncate(2 * 1024**3)
    before = peak_rss_mib()
    refused(farm, [big], f"2048.0 MiB is over the {DEFAULT_MAX_MODEL_MB}.0 MiB model cap")
    assert peak_rss_mib() - before < 64, "the file was read before its size was checked"


def test_a_valid_model_padded_to_300mib_is_refused(farm, tmp_path: Path) -> None:
    padded = write_model(tmp_path / "padded.tflite")
    with open(padded, "r+b") as f:  # sparse padding: cheap on disk, 300 MiB to a reader
        f.truncate(300 * MIB)
    refused(farm, [padded], "300.0 MiB is over the")


def test_the_cap_is_configurable(farm, tmp_path: Path, monkeypatch) -> None:
    model = write_model(tmp_path / "m.tflite")
    size = model.stat().st_size
    refused(farm, [model], "model cap", max_model_bytes=size - 1)
    monkeypatch.setenv(ENV_MAX_MODEL_MB, str((size - 1) / MIB))
    refused(farm, [model], "model cap")
    monkeypatch.setenv(ENV_MAX_MODEL_MB, "lots")
    refused(farm, [model], f"{ENV_MAX_MODEL_MB}='lots' is not a number")
    monkeypatch.setenv(ENV_MAX_MODEL_MB, str(size / MIB))
    assert submit(farm, RecordingDispatcher(), [model], "all", "cpu").jobs == 1


def test_the_cap_cannot_exceed_what_the_database_stores(farm, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(ENV_MAX_MODEL_MB, "1024")
    refused(farm, [write_model(tmp_path / "m.tflite")], f"must be in (0, {DEFAULT_MAX_MODEL_MB}]")


def test_a_300_character_name_is_refused(farm, tmp_path: Path) -> None:
    refused(farm, [write_model(tmp_path / "m.tflite")], "--name is 300 characters", name="n" * 300)


def test_a_255_character_name_fits(farm, tmp_path: Path) -> None:
    sub = submit(
        farm, RecordingDispatcher(), [write_model(tmp_path / "m.tflite")], "all", "cpu",
        name="n" * 255,
    )  # fmt: skip
    assert sub.jobs == 1


def test_a_name_with_control_characters_is_refused(farm, tmp_path: Path) -> None:
    refused(
        farm, [write_model(tmp_path / "m.tflite")], "holds control characters", name="a\x1b[2Jb"
    )


@pytest.mark.parametrize(
    ("selector", "needle"),
    [
        ("driver>=" + "9" * 5000, "device selector is 5008 characters long; at most 2000"),
        ("driver>=" + "9" * 100, f"a version part has more than {MAX_VERSION_DIGITS} digits"),
        ("api<=1." + "9" * 100, f"a version part has more than {MAX_VERSION_DIGITS} digits"),
    ],
    ids=["driver-5000-digits", "driver-100-digits", "api-100-digits"],
)
def test_a_huge_selector_number_is_refused(farm, tmp_path: Path, selector, needle) -> None:
    refused(farm, [write_model(tmp_path / "m.tflite")], needle, selector=selector)


def test_a_device_value_with_a_huge_number_is_no_version() -> None:
    selector, errors = parse_selector("api>=3")
    assert errors == []
    assert not selector.matches({"api_version": "OpenCL " + "9" * 5000})


def test_a_selector_too_long_is_refused() -> None:
    selector, errors = parse_selector("kind=cpu," * 500)
    assert selector is None and "characters long" in errors[0]


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"num_runs": 10**100}, "--runs must be at least 1 and at most 100000"),
        ({"diff_runs": 10**9}, "diff runs must be 0 or more and at most 100000"),
        ({"warmup_runs": -1}, "warm-up runs must be 0 or more and at most 100000"),
    ],
)
def test_run_counts_are_bounded(farm, tmp_path: Path, settings, needle) -> None:
    refused(farm, [write_model(tmp_path / "m.tflite")], needle, settings=RunSettings(**settings))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "needle", "code"),
    [
        (["/dev/zero"], "not a regular file (a character device)", 1),
        # a malformed selector is a usage error, found as the arguments are parsed
        (["MODEL", "--devices", "driver>=" + "9" * 5000], "5008 characters long", 2),
        (["MODEL", "--devices", "driver>=" + "9" * 100], "more than 18 digits", 2),
        (["MODEL", "--name", "x" * 300], "--name is 300 characters long", 1),
        (["MODEL", "--max-model-mb", "0.0001"], "model cap", 1),
        (["MODEL", "--max-model-mb", "4096"], "--max-model-mb must be in (0, 128]", 1),
    ],
    ids=["dev-zero", "selector-5000", "selector-100-digits", "name-300", "cap", "cap-too-big"],
)
def test_the_cli_says_why_in_one_error(tmp_path: Path, args, needle, code) -> None:
    model = str(write_model(tmp_path / "m.tflite"))
    sqlite_engine(tmp_path).dispose()  # a farm to submit to
    db = tmp_path / "farm.db"
    cmd = [sys.executable, "-m", "devicefarm.cli", "submit"]
    cmd += [model if a == "MODEL" else a for a in args]
    cmd += ["--db", f"sqlite:///{db}", "--broker", f"filesystem://{tmp_path / 'broker'}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=50, check=False)
    assert out.returncode == code, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr, out.stderr
