"""The "Which delegate" page (streamlit.testing AppTest, as test_dashboard_pages): per
device and model the comparison, the recommended configuration and what submission
refused with the reasons; a viewer sees their projects' campaigns only."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from sqlalchemy import update  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import queries  # noqa: E402
from farm_core.accounts import Accounts, save_accounts  # noqa: E402
from farm_core.device_support import HEXAGON_MISSING  # noqa: E402
from farm_core.schema import Campaign  # noqa: E402
from orchestrator.refusals import NOT_RECORDED  # noqa: E402
from orchestrator.submit import submit  # noqa: E402
from tests.support.farm import (  # noqa: E402
    RecordingDispatcher,
    add_device,
    finish_jobs,
    sqlite_engine,
    write_model,
)

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
TIMEOUT_S = 60
ENV = ("DEVICEFARM_DB", "DEVICEFARM_TOKENS", "DEVICEFARM_DASHBOARD_READ_ONLY")
HEXAGON = {"interface": "/vendor/lib64/libhexagon_interface.so",
           "skel_dir": "/vendor/lib/rfsa/adsp", "skel": ["libhexagon_nn_skel.so"]}  # fmt: skip


def _facts(hexagon: dict) -> dict:
    return {"accelerators": {"gpu_backends": ["gl"], "nnapi_devices": [], "hexagon": hexagon}}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Campaign `mine` (project default: cpu and hexagon on two phones, one without the
    Hexagon libraries), `theirs` (project vision) and
    `old` (default, submitted before refusals were kept); dora reads default."""
    folder = Path(tmp_path_factory.mktemp("dash-delegates"))
    engine = sqlite_engine(folder)
    add_device(engine, "android:p4", "android", facts=_facts(HEXAGON))
    add_device(engine, "android:a14", "android", facts=_facts({}))
    model = write_model(folder / "m.tflite")
    ids = {}
    for name, project in (("mine", "default"), ("theirs", "vision"), ("old", "default")):
        ids[name] = submit(engine, RecordingDispatcher(), [model], "all", "cpu,hexagon,xnnpack",
                           name=name, project=project).campaign_id  # fmt: skip
    finish_jobs(engine)
    with engine.begin() as conn:
        conn.execute(update(Campaign).where(Campaign.id == ids["old"]).values(refusals=None))
    accounts = Accounts().set_user("dora", projects={"default": "read"})
    accounts, _, token = accounts.add_token("dora")
    save_accounts(accounts, folder / "tokens.json")
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ["DEVICEFARM_DB"] = f"sqlite:///{folder / 'farm.db'}"
    os.environ["DEVICEFARM_TOKENS"] = str(folder / "tokens.json")
    os.environ.pop("DEVICEFARM_DASHBOARD_READ_ONLY", None)
    yield {"engine": engine, "token": token, "ids": ids}
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def page(lab: dict, campaign: str) -> AppTest:
    """The page as dora, on `campaign`."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.text_input(key="password").input(lab["token"]).run()
    at.switch_page("views/delegates.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    box = at.selectbox(key="campaign")
    box.select_index(next(i for i, o in enumerate(box.options) if o.endswith(f" {campaign}")))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_comparison_recommendation_and_refusals(lab: dict) -> None:
    at = page(lab, "mine")
    assert at.title[0].value == "Which delegate"
    heads = [s.value for s in at.subheader]
    assert heads[:2] == ["android:a14 · m.tflite", "android:p4 · m.tflite"]
    assert heads[-1] == "Refused at submission"
    # finish_jobs: every configuration at the same latency; the first (by name) of the
    # fastest is recommended
    assert [s.value for s in at.success] == ["Recommended: cpu", "Recommended: cpu"]
    p4 = at.dataframe[1].value
    assert list(p4["config"]) == ["cpu", "hexagon", "xnnpack"]
    assert {"avg_ms", "init_ms", "error_vs_cpu", "nodes", "fallback_nodes"} <= set(p4.columns)
    assert list(p4["recommended"]) == [True, False, False]
    refused = at.dataframe[2].value
    assert list(refused["device"]) == ["android:a14"] and list(refused["config"]) == ["hexagon"]
    assert HEXAGON_MISSING in refused["reason"][0]


def test_another_projects_campaign_is_not_listed(lab: dict) -> None:
    at = page(lab, "mine")
    options = at.selectbox(key="campaign").options
    assert any(o.endswith(" mine") for o in options)
    assert not any(o.endswith(" theirs") for o in options)
    assert queries.delegate_choice(lab["engine"], lab["ids"]["theirs"], ("default",)) is None


def test_campaign_without_a_record_says_so(lab: dict) -> None:
    at = page(lab, "old")
    assert NOT_RECORDED in [i.value for i in at.info]
