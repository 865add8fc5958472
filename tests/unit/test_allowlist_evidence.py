"""What counts as evidence against a phone: only repeated, device-caused failures change
LiteRT's shipped answer in a merged list. A host's timeout, a lost phone, adb's errors or
our own bugs are the farm's trouble, never UNSUPPORTED; one crash or one wrong output is
not enough, and a passing result on the same facts outweighs failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from farm_core import jobs
from farm_core.schema import FAILED, SUCCEEDED, TIMED_OUT, Job
from orchestrator.allowlist import devicedb, merge, reader
from orchestrator.allowlist.collect import build_allowlist
from orchestrator.allowlist.export import render
from orchestrator.allowlist.facts import list_variables
from orchestrator.allowlist.rules import (
    CRASHED,
    ERROR_TOO_LARGE,
    MIN_DEVICE_EVIDENCE,
    NOT_MEASURED,
    SLOWER_THAN_CPU,
    SUPPORTED,
    UNKNOWN,
    UNSUPPORTED,
    Thresholds,
)
from orchestrator.submit import submit
from tests.conftest import require
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

SHIPPED = Path(__file__).resolve().parents[3] / "shared" / "reference" / "gpu_compatibility.bin"
KEY = "android:p7"
#: A Pixel 7 as the agent registers it: LiteRT's shipped list says SUPPORTED for it.
PHONE = {
    "host": "lab1",
    "vendor": "Google",
    "model": "Pixel 7",
    "renderer": "Mali-G710",
    "driver_version": "OpenGL ES 3.2 v1.r36p0-01eac0",
    "api_version": "OpenGL ES 3.2",
    "android_sdk": 34,
    "facts": {"ro.product.device": "panther", "ro.board.platform": "gs201",
              "gles_vendor": "ARM"},
}  # fmt: skip
CPU_US = 5000.0
TIMEOUT = (TIMED_OUT, "ToolTimeout: benchmark_model ran past its 300 s deadline on android:p7")
LOST = (FAILED, "DeviceError: android:p7 went offline while benchmark_model ran")
SOFT_LIMIT = (TIMED_OUT, "the job ran past its soft time limit")
BUG = (FAILED, "bug: KeyError: 'avg_us'\nTraceback ...")
CRASH = (FAILED, "ToolOutputError: benchmark_model on android:p7 gave no result: Segfault")
DELEGATE = (FAILED, "ModelError: GPU delegate failed to prepare: Unsupported tensor shape")
PASS = (SUCCEEDED, 1000.0, 1e-6)
WRONG = (SUCCEEDED, 1000.0, 0.5)  # fp32's limit is 1e-3
SLOW = (SUCCEEDED, 6000.0, 1e-6)  # slower than the phone's CPU


def _farm(tmp_path: Path, gpu_results: list[tuple]) -> tuple:
    """A phone with a CPU run and these gpu-fp32 results, one campaign (one job) each."""
    engine = sqlite_engine(tmp_path)
    add_device(engine, KEY, "android", **PHONE)
    model = write_model(tmp_path / "m.tflite")
    for _ in gpu_results:
        submit(engine, RecordingDispatcher(), [model], "all", "cpu,gpu-fp32")
    with engine.begin() as c:
        ids = c.execute(select(Job.id, Job.config).order_by(Job.id)).all()
    gpu = iter(gpu_results)
    for job_id, config in ids:
        outcome = (SUCCEEDED, CPU_US, None) if config == "cpu" else next(gpu)
        values = {"delegated_ops": 1, "total_ops": 1}
        if outcome[0] == SUCCEEDED:
            values |= {"avg_us": outcome[1], "max_avg_error": outcome[2]}
        else:
            values["error"] = outcome[1]
        with engine.begin() as c:
            jobs.claim(c, job_id, 1, "w", 60)
            jobs.finish(c, job_id, 1, "w", outcome[0], values)
    return engine, model


CASES = {
    "one-host-timeout": ([TIMEOUT], UNKNOWN, NOT_MEASURED),
    "infrastructure-only": ([TIMEOUT, LOST, SOFT_LIMIT, BUG, TIMEOUT], UNKNOWN, NOT_MEASURED),
    "one-crash": ([CRASH], UNKNOWN, NOT_MEASURED),
    "one-crash-and-timeouts": ([CRASH, TIMEOUT, LOST], UNKNOWN, NOT_MEASURED),
    "two-crashes": ([CRASH, CRASH], UNSUPPORTED, CRASHED),
    "crash-and-delegate-error": ([CRASH, DELEGATE], UNSUPPORTED, CRASHED),
    "crashes-and-a-pass": ([CRASH, CRASH, PASS], UNKNOWN, NOT_MEASURED),
    "one-wrong-output": ([WRONG], UNKNOWN, NOT_MEASURED),
    "two-wrong-outputs": ([WRONG, WRONG], UNSUPPORTED, ERROR_TOO_LARGE),
    "wrong-and-right": ([WRONG, WRONG, PASS], UNKNOWN, NOT_MEASURED),
    "a-crash-and-a-wrong-output": ([CRASH, WRONG], UNSUPPORTED, CRASHED),
    "slower-once": ([SLOW], UNKNOWN, NOT_MEASURED),
    "slower-twice": ([SLOW, SLOW], UNSUPPORTED, SLOWER_THAN_CPU),
    "passes-despite-timeouts": ([TIMEOUT, PASS, LOST], SUPPORTED, ""),
}


@pytest.mark.parametrize("case", list(CASES))
def test_only_repeated_device_caused_evidence_is_unsupported(tmp_path: Path, case: str) -> None:
    results, status, code = CASES[case]
    engine, model = _farm(tmp_path, results)
    decision = build_allowlist(engine, model.name, Thresholds()).entry_for(KEY).decision
    assert (decision.status, decision.code) == (status, code), decision.reason


def test_min_device_evidence_is_two() -> None:
    assert MIN_DEVICE_EVIDENCE == 2


@pytest.mark.parametrize(
    ("results", "words"),
    [
        ([TIMEOUT], ["1 infrastructure failure", "not evidence"]),
        ([CRASH], ["1 device-caused failure", "ToolOutputError", f"{MIN_DEVICE_EVIDENCE} needed"]),
        ([CRASH, CRASH], ["crashed in 2 of 2 results", "ToolOutputError"]),
        ([CRASH, CRASH, PASS], ["crashed in 2 of 3 results", "passed in 1"]),
        ([WRONG, WRONG], ["error 0.5 above 0.001 in 2 of 2 results"]),
    ],
)
def test_the_reason_records_the_evidence(tmp_path: Path, results: list, words: list) -> None:
    engine, model = _farm(tmp_path, results)
    reason = build_allowlist(engine, model.name, Thresholds()).entry_for(KEY).decision.reason
    for word in words:
        assert word in reason


@pytest.mark.parametrize(
    ("results", "merged_status"),
    [
        ([TIMEOUT], SUPPORTED),  # the Mali-G710 case: one host timeout changes nothing
        ([CRASH], SUPPORTED),
        ([CRASH, CRASH, PASS], SUPPORTED),
        ([CRASH, CRASH], UNSUPPORTED),
        ([PASS], SUPPORTED),
    ],
)
def test_merged_list_overrides_the_shipped_answer_only_on_repeated_evidence(
    tmp_path: Path, results: list, merged_status: str
) -> None:
    require(SHIPPED.exists(), f"LiteRT's gpu_compatibility.bin at {SHIPPED}")
    shipped = devicedb.decode(SHIPPED.read_bytes())
    facts = list_variables({"kind": "android", **PHONE})
    assert reader.status(shipped, facts) == SUPPORTED  # what LiteRT ships for this phone
    engine, model = _farm(tmp_path, results)
    ours = devicedb.decode(
        render(build_allowlist(engine, model.name, Thresholds()), "devicedb-bin")
    )
    assert reader.status(merge.merged(shipped, ours), facts) == merged_status
