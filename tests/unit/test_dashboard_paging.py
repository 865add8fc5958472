"""What keeps a 1,000-device farm's pages fast (issue 44): long lists drawn a page at a time
(ui.page_of) and tables formatted by column_config rather than a pandas Styler (ui.table)."""

from __future__ import annotations

import pytest

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import ui  # noqa: E402


@pytest.mark.parametrize(
    ("python", "printf"),
    [("{:.2f}", "%.2f"), ("{:.2f}x", "%.2fx"), ("{:.0f}", "%.0f"), ("{:.2e}", "%.2e"),
     ("{:+.1%}", None), ("{:.1%}", None), ("{}", None)],
)  # fmt: skip
def test_number_formats_with_a_printf_form_become_column_formats(python: str, printf) -> None:
    assert ui._printf(python) == printf


def _paged(n: int) -> None:
    import streamlit as st

    from dashboard import ui

    for item in ui.page_of([f"device {i}" for i in range(n)], "page", "devices", per_page=10):
        st.text(item)


@pytest.mark.parametrize(("n", "pages"), [(10, 0), (11, 2), (25, 3)])
def test_a_long_list_is_drawn_a_page_at_a_time(n: int, pages: int) -> None:
    at = AppTest.from_function(_paged, args=(n,))
    at.run()
    assert [t.value for t in at.text] == [f"device {i}" for i in range(min(n, 10))]
    if not pages:
        assert not at.number_input
        return
    assert at.number_input(key="page").label == f"Page (of {pages})"
    at.number_input(key="page").set_value(pages).run()
    assert [t.value for t in at.text] == [f"device {i}" for i in range((pages - 1) * 10, n)]
    assert at.caption[0].value == f"devices {(pages - 1) * 10 + 1}-{n} of {n}"


def _table() -> None:
    import pandas as pd
    import streamlit as st

    from dashboard import ui

    df = pd.DataFrame({"device": ["a", "b"], "avg_ms": [1.5, 2.25], "peak_mb": [None, 3.0]})
    ui.table(df, {"avg_ms": "{:.2f}", "peak_mb": "{:.1f}"}, column_config={"avg_ms": "avg ms"})
    st.text("done")


def test_a_table_keeps_numbers_numeric_and_fills_gaps() -> None:
    at = AppTest.from_function(_table)
    at.run()
    assert not at.exception
    df = at.dataframe[0].value
    assert list(df["avg_ms"]) == [1.5, 2.25]  # numeric: sorts as numbers
    assert list(df["peak_mb"]) == [ui.MISSING, "3.0"]  # a gap: text
