"""The compatibility page shows five models at a time (the viewer may pick more) (a 1,000-device farm's 100 models took
6-17 s on one page): a page picker and a name filter choose them, and only the shown models'
evidence is read, decided and stored; the allowlist builder still offers every model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import cache  # noqa: E402
from devicefarm.demo_lab import seed  # noqa: E402
from farm_core.schema import KeptEvidence  # noqa: E402
from tests.support.farm import sqlite_engine  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@pytest.fixture
def farm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    engine = sqlite_engine(tmp_path)
    seed(engine, campaigns=2, more_models=8)  # the demo's 4 and 8 more: two pages
    monkeypatch.setenv("DEVICEFARM_DB", f"sqlite:///{tmp_path / 'farm.db'}")
    monkeypatch.delenv("DEVICEFARM_DASHBOARD_READ_ONLY", raising=False)
    cache.forget()
    yield engine
    cache.forget()
    engine.dispose()


def compatibility() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compatibility.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def stored_models(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count(KeptEvidence.model.distinct()))).scalar_one()


def test_the_matrix_shows_a_page_of_models_and_reads_only_theirs(farm) -> None:
    at = compatibility()
    assert "models 1-5 of 12" in captions(at) and "on these 5 models" in captions(at)
    assert stored_models(farm) == 5  # the seven on the next pages not read
    at.number_input(key="models_page").set_value(3).run()
    assert not at.exception
    assert "models 11-12 of 12" in captions(at) and "on these 2 models" in captions(at)
    assert stored_models(farm) == 7
    at.selectbox(key="models_per_page").select(20).run()
    assert not at.exception and "on these 12 models" in captions(at)
    assert "models_page" not in [n.key for n in at.number_input]  # one page: no picker
    assert stored_models(farm) == 12


def test_a_name_filter_chooses_the_models(farm) -> None:
    at = compatibility()
    at.text_input(key="model_filter").input("CATALOGUE_00").run()  # any case
    assert not at.exception and "models 1-5 of 8" in captions(at)
    at.text_input(key="model_filter").input("no such model").run()
    assert not at.exception and "No model matches" in at.info[0].value


def test_the_builder_offers_a_model_off_the_page(farm) -> None:
    at = compatibility()
    builder = at.selectbox(key="allowlist_model")
    assert len(builder.options) == 12
    last = builder.options[-1]
    builder.select(last).run()
    assert not at.exception
    assert '"tflite.gpu.status"' in at.code[0].value
    assert len(at.get("download_button")) == 4 and stored_models(farm) == 6
