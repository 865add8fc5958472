"""What every page shares: the database engine, the viewer and their role, pickers.

The app reads the farm's database URL (`DEVICEFARM_DB`, else the embedded SQLite file) and
`DEVICEFARM_DASHBOARD_READ_ONLY=1` for a read-only dashboard. Logins (dashboard/auth.py:
the tokens file's users with their API roles, or a shared password) are made by serve.py's
login form, whose signed cookie each page reads; the `read` role sees every page and submits
nothing. Run without serve.py (app.py alone, AppTest), a password field in the app logs in
for the session only. When Streamlit's OIDC is configured (an `[auth]` section in
secrets.toml), `st.login` guards the app instead.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import Any

import streamlit as st
from sqlalchemy import Engine

from dashboard import auth, login_throttle

ENV_READ_ONLY = "DEVICEFARM_DASHBOARD_READ_ONLY"
ENV_PASSWORD = auth.ENV_PASSWORD
STATUS_COLORS = {"supported": "#2e7d32", "unsupported": "#c62828", "unknown": "#9e9e9e"}


def db_url() -> str:
    from farm_core.settings import default_db_url

    return default_db_url()


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    from farm_core.database import open_current

    return open_current(url)


def engine() -> Engine:
    """The farm database's engine; the page stops with the reason when its schema is not
    the current one (`devicefarm db upgrade` migrates, the dashboard never does)."""
    from delegate_runtime.errors import DevicefarmError

    try:
        return _engine(db_url())
    except DevicefarmError as exc:
        notice("error", "The database cannot be used:", [exc])
        st.stop()
        raise  # not reached: st.stop ends the run


def viewer() -> auth.Viewer | None:
    """Who is looking: from serve.py's login cookie, else this session's in-app login;
    `auth.ANYONE` when no login is configured; None when not logged in."""
    gate = auth.gate()
    if not gate.enabled:
        return auth.ANYONE
    try:
        cookie = st.context.cookies.get(auth.COOKIE)
    except Exception:  # noqa: BLE001 - no request context (AppTest)
        cookie = None
    return gate.verify(cookie) or gate.verify(st.session_state.get("session"))


def read_only() -> bool:
    """Whether this page may not change the farm: a read-only dashboard or a `read` user."""
    if os.environ.get(ENV_READ_ONLY, "").lower() in ("1", "true", "yes"):
        return True
    who = viewer()
    return who is None or not who.can_write


def _secret(name: str) -> Any:
    try:
        return st.secrets.get(name)
    except Exception:  # noqa: BLE001 - no secrets file is the normal case
        return None


def require_login() -> bool:
    """True when the visitor may see the app (no login configured, or logged in)."""
    if _secret("auth"):
        if not st.user.is_logged_in:
            st.title("devicefarm")
            st.button("Log in", on_click=st.login, type="primary")
            return False
        st.sidebar.text(f"signed in as {st.user.get('email') or st.user.get('name')}")
        st.sidebar.button("Log out", on_click=st.logout)
        return True
    who = viewer()
    if who is not None:
        if who is not auth.ANYONE:
            st.sidebar.text(f"signed in as {who.name} ({who.role})")
            st.sidebar.link_button("Log out", "/_df/logout")
        return True
    st.title("devicefarm")
    st.text_input("Password", type="password", key="password", on_change=_try_password)
    message = st.session_state.pop("login_message", "")
    if message:
        st.error(message)
    return False


def _client() -> str:
    try:
        return st.context.ip_address or "unknown"
    except Exception:  # noqa: BLE001 - no request context (e.g. AppTest): one shared client
        return "unknown"


def _try_password(*_: Any) -> None:
    """One in-app login attempt (on each change of the field, which is then emptied):
    throttled before the password or token is even compared."""
    given = st.session_state.get("password") or ""
    st.session_state["password"] = ""
    if not given:
        return
    throttle, client, gate = login_throttle.shared(), _client(), auth.gate()
    wait = throttle.wait_s(client)
    if wait > 0:
        st.session_state["login_message"] = (
            f"Too many wrong passwords: try again in {math.ceil(wait)} s."
        )
        return
    who = gate.check(given)
    if who is not None:
        throttle.succeeded(client)
        st.session_state["session"] = gate.issue(who)
    else:
        throttle.failed(client)
        wait = throttle.wait_s(client)
        st.session_state["login_message"] = "Wrong password or token." + (
            f" Next attempt in {math.ceil(wait)} s." if wait > 0 else ""
        )


def model_picker(label: str = "Model") -> dict[str, Any] | None:
    """A model chosen among those with results (None, with a note, when there is none)."""
    from dashboard import queries

    models = queries.models(engine())
    if not models:
        st.info("No results yet: submit a campaign first.")
        return None
    names = {model_label(m): m for m in models}
    return names[st.selectbox(label, sorted(names), key="model")]


def model_label(model: dict[str, Any]) -> str:
    """A model as the pickers list it: its lineage name(s), the version (sha256 prefix) and,
    when it differs, the file it was uploaded as: `mobilenet @ 87af608513 (v1_224.tflite)`."""
    lineages = ", ".join(model["lineages"])
    file = f" ({model['name']})" if model["name"] not in model["lineages"] else ""
    return f"{lineages} @ {model['sha256'][:10]}{file}"


def notice(kind: str, heading: str, details: Sequence[Any] = ()) -> None:
    """An alert (`st.error`, `st.warning`, ...) whose heading is our own words and whose
    user-supplied details (campaign and model names, selectors, device facts, errors that
    quote them) are shown as plain text in a code block below it.

    Streamlit renders every alert, caption and label as Markdown: a campaign named
    `![x](http://host/x.png)` made each viewer's browser fetch that image, and even escaped
    text has its URLs turned into links. A code block shows text as it is."""
    getattr(st, kind)(heading)
    if details:
        text = "\n".join(_CONTROL.sub(" ", str(d)) for d in details)
        st.code(text, language=None, wrap_lines=True)


_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]+")


def full_labels(title: str | None = "device") -> Any:
    """A chart axis that writes every label whole: Vega-Lite cuts labels at 180 px, and
    `opencl:nvidia:nvidia_geforce_rtx_4090:lab1` and `...:lab2` became the same label."""
    import altair as alt

    return alt.Axis(labelLimit=0, title=title)


def short_reason(text: str, width: int = 120) -> str:
    text = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return text if len(text) <= width else text[: width - 1] + "…"


#: What a table shows where a value is missing (Streamlit would write "None").
MISSING = "—"


def without_gaps(df: Any, formats: dict[str, str] | None = None) -> Any:
    """`df` ready for st.dataframe, which writes a missing value as "None": missing values
    read MISSING, number columns use `formats` (`{"avg_ms": "{:.2f}"}`). A number column
    with no gap stays numeric (it sorts as numbers); one with gaps becomes text."""
    out, left = _fill_gaps(df, formats)
    return out.style.format(left) if left else out


def table(
    df: Any,
    formats: dict[str, str] | None = None,
    column_config: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """st.dataframe of `df` as without_gaps writes it, its numeric columns formatted by
    column_config where the format has a printf form (a pandas Styler, which Streamlit
    writes cell by cell, took seconds on a 1,000-device farm's tables)."""
    out, left = _fill_gaps(df, formats)
    config = dict(column_config or {})
    styled = {}
    for column, pattern in left.items():
        printf = _printf(pattern)
        if printf is None:
            styled[column] = pattern
            continue
        given = config.get(column)
        base = {"label": given} if isinstance(given, str) else dict(given or {})
        number = st.column_config.NumberColumn(format=printf)
        config[column] = {**number, **{k: v for k, v in base.items() if v is not None}}
    data = out.style.format(styled) if styled else out
    return st.dataframe(data, column_config=config, **kwargs)


_PYTHON_FORMAT = re.compile(r"\{:(\+?)\.(\d+)([fe])\}([^{}%]*)")


def _printf(pattern: str) -> str | None:
    """A Python number format as printf (`{:.2f}x` -> `%.2fx`); None when it has none."""
    m = _PYTHON_FORMAT.fullmatch(pattern)
    return None if m is None else f"%{m[1]}.{m[2]}{m[3]}{m[4]}"


def _fill_gaps(df: Any, formats: dict[str, str] | None) -> tuple[Any, dict[str, str]]:
    """`df` with its gaps filled (as without_gaps), and the formats of the columns that
    stayed numeric."""
    import pandas as pd

    formats = {k: v for k, v in (formats or {}).items() if k in df}
    out = df.copy()
    for column in out.columns:
        values = out[column]
        if not values.isna().any():
            continue
        if column in formats or pd.api.types.is_numeric_dtype(values):
            pattern = formats.pop(column, "{}")
            out[column] = [MISSING if pd.isna(v) else pattern.format(v) for v in values]
        else:
            out[column] = values.astype(object).where(values.notna(), MISSING)
    return out, formats


def node_label(node: str, op: str, position: int) -> str:
    """A profile node's short label: its index (TFLite's `[tensor]:index`, else its place in
    run order) and op, `12 CONV_2D`."""
    index = str(node).rpartition(":")[2]
    return f"{index if index.isdigit() else position} {op}"


def utc_time(label: str) -> Any:
    """A table column of times the farm stores in UTC (without a zone), said so."""
    return st.column_config.DatetimeColumn(f"{label} (UTC)", format="YYYY-MM-DD HH:mm:ss")


#: Items a long page draws at once (a device each: a 1,000-device farm's pages stay fast).
PAGE_ITEMS = 25


def page_of(items: Sequence[Any], key: str, what: str, per_page: int = PAGE_ITEMS) -> list[Any]:
    """The items of the page the viewer picked: all of them when they fit one page, else a
    page picker (and which items it shows) above them."""
    if len(items) <= per_page:
        return list(items)
    pages = math.ceil(len(items) / per_page)
    n = st.number_input(f"Page (of {pages})", 1, pages, 1, key=key)
    start = (int(n) - 1) * per_page
    st.caption(f"{what} {start + 1}-{min(start + per_page, len(items))} of {len(items)}")
    return list(items[start : start + per_page])
