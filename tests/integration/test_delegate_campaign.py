"""Issue 45's done-when: one campaign over two simulated phone models (pixel-4: Hexagon
and the qti-* NNAPI accelerators; galaxy-a14: neither) and this machine's CPU reference
and OpenCL device (PoCL), through the embedded farm (`devicefarm run`: SQLite, a
filesystem broker, an agent with a Celery consumer per device) and the real adb server.

Every applicable configuration runs and stores a result; the inapplicable ones are refused
at submission with the official tools' words (farm_core.device_support: Hexagon's from
tflite/tools/delegates/hexagon_delegate_provider.cc, NNAPI's from
tflite/delegates/nnapi/nnapi_delegate.cc) and never become jobs; `devicefarm results
CAMPAIGN --delegates` shows the comparison per device with a recommendation."""

from __future__ import annotations

import sqlite3

import pytest

from farm_core.device_support import HEXAGON_MISSING, accelerator_not_found
from tests.integration.test_android_campaign import _lab, devicefarm
from tests.support.farm import write_model

pytestmark = pytest.mark.integration

NNAPI_DSP = "nnapi:accelerator=qti-dsp"
CONFIGS = ["cpu", "gpu-fp32", "gpu-fp16", NNAPI_DSP, "hexagon", "xnnpack"]
#: Phones: profile -> the configurations it runs (the rest of CONFIGS it refuses).
PHONE_RUNS = {
    "pixel-4": set(CONFIGS),
    "galaxy-a14": {"cpu", "gpu-fp32", "gpu-fp16", "xnnpack"},
}
#: The desktop devices (key prefix) -> the configurations they run; their kinds never
#: run the phone-only delegates, which are therefore not refusals.
DESKTOP_RUNS = {"cpu:": {"cpu"}, "opencl:": {"gpu-fp32", "gpu-fp16"}}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """The campaign, run once: (phone serials by profile, jobs' rows, run's and
    results --delegates' output)."""
    tmp = tmp_path_factory.mktemp("delegates")
    lab = _lab(tmp, list(PHONE_RUNS))
    server, phones, tools = next(lab)
    try:
        model = write_model(tmp / "tiny.tflite")
        home = tmp / "home"
        args = ["--devices", "android,cpu,opencl", "--configs", ",".join(CONFIGS)]
        ran = devicefarm(["run", str(model), *args, "--runs", "3", "--diff-runs", "2"],
                         home, server, tools)  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        with sqlite3.connect(home / "farm.db") as db:
            [campaign_id] = db.execute("select id from campaigns").fetchone()
            rows = db.execute(
                "select j.device_key, j.config, j.state, r.benchmark is not null from jobs j "
                "left join results r on r.job_id = j.id and r.attempt = j.attempt"
            ).fetchall()
        shown = devicefarm(["results", str(campaign_id), "--delegates"], home, server, tools)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        serials = {name: ph.serial for name, ph in zip(PHONE_RUNS, phones, strict=True)}
        yield serials, rows, ran.stdout, shown.stdout
    finally:
        lab.close()


def _jobs(rows, device: str) -> dict[str, tuple[str, bool]]:
    return {config: (state, stored) for key, config, state, stored in rows if key == device}


@pytest.mark.parametrize("profile", list(PHONE_RUNS))
def test_each_phone_runs_what_applies_and_stores_a_result(campaign, profile) -> None:
    serials, rows, _, _ = campaign
    jobs = _jobs(rows, f"android:{serials[profile]}")
    assert set(jobs) == PHONE_RUNS[profile]  # a refused configuration never became a job
    assert all(j == ("succeeded", True) for j in jobs.values()), jobs


@pytest.mark.parametrize("prefix", list(DESKTOP_RUNS))
def test_each_desktop_device_runs_its_configurations(campaign, prefix) -> None:
    _, rows, _, _ = campaign
    keys = {key for key, *_ in rows if key.startswith(prefix)}
    assert keys, f"no {prefix} device ran"
    for key in keys:
        jobs = _jobs(rows, key)
        assert set(jobs) == DESKTOP_RUNS[prefix]
        assert all(j == ("succeeded", True) for j in jobs.values()), jobs


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ("hexagon", f"hexagon: {HEXAGON_MISSING}"),
        (NNAPI_DSP, f"{NNAPI_DSP}: {accelerator_not_found('qti-dsp', ['nnapi-reference'])}"),
    ],
)
def test_phone_without_refuses_at_submission_and_in_the_comparison(
    campaign, config, reason
) -> None:
    serials, _, ran, shown = campaign
    key = f"android:{serials['galaxy-a14']}"
    assert f"refused {config} on {key}: {reason}" in ran
    assert f"refused: {config} on {key}: {reason}" in shown
    assert shown.count("refused: ") == 2  # nothing else is refused, the desktop's kinds least


@pytest.mark.parametrize("profile", list(PHONE_RUNS))
def test_comparison_shows_every_configuration_and_a_recommendation(campaign, profile) -> None:
    serials, _, _, shown = campaign
    key = f"android:{serials[profile]}"
    lines = shown.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith(f"{key}  "))
    recommended = lines[head].rpartition("recommended: ")[2]
    assert recommended in PHONE_RUNS[profile]
    block = lines[head + 2 : head + 2 + len(PHONE_RUNS[profile])]
    assert {ln[2:].split()[0] for ln in block} == PHONE_RUNS[profile]
    marked = [ln for ln in block if ln.startswith("* ")]
    assert [ln.split()[1] for ln in marked] == [recommended]
    assert all(" succeeded " in ln for ln in block)


def test_comparison_covers_the_desktop_devices(campaign) -> None:
    _, rows, _, shown = campaign
    for key in {key for key, *_ in rows if not key.startswith("android:")}:
        assert any(ln.startswith(f"{key}  ") and "recommended: " in ln
                   for ln in shown.splitlines()), shown  # fmt: skip
