"""What every page shares: the database engine, the read-only switch, login, pickers.

The app reads the farm's database URL (`DEVICEFARM_DB`, else the embedded SQLite file),
`DEVICEFARM_DASHBOARD_READ_ONLY=1` for a read-only dashboard, and an optional password
(`DEVICEFARM_DASHBOARD_PASSWORD` or the secret `dashboard_password`); when Streamlit's OIDC
is configured (an `[auth]` section in secrets.toml), `st.login` guards the app instead.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

import streamlit as st
from sqlalchemy import Engine

ENV_READ_ONLY = "DEVICEFARM_DASHBOARD_READ_ONLY"
ENV_PASSWORD = "DEVICEFARM_DASHBOARD_PASSWORD"
STATUS_COLORS = {"supported": "#2e7d32", "unsupported": "#c62828", "unknown": "#9e9e9e"}


def db_url() -> str:
    from orchestrator.settings import default_db_url

    return default_db_url()


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    from orchestrator.database import open_database

    return open_database(url)


def engine() -> Engine:
    """The farm database's engine (migrated once per URL and process)."""
    return _engine(db_url())


def read_only() -> bool:
    return os.environ.get(ENV_READ_ONLY, "").lower() in ("1", "true", "yes")


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
        st.sidebar.caption(f"signed in as {st.user.get('email') or st.user.get('name')}")
        st.sidebar.button("Log out", on_click=st.logout)
        return True
    password = os.environ.get(ENV_PASSWORD) or _secret("dashboard_password")
    if not password or st.session_state.get("logged_in"):
        return True
    st.title("devicefarm")
    given = st.text_input("Password", type="password", key="password")
    if given:
        if hmac.compare_digest(given.encode(), str(password).encode()):
            st.session_state["logged_in"] = True
            st.rerun()
        st.error("Wrong password.")
    return False


def model_picker(label: str = "Model") -> dict[str, Any] | None:
    """A model chosen among those with results (None, with a note, when there is none)."""
    from dashboard import queries

    models = queries.models(engine())
    if not models:
        st.info("No results yet: submit a campaign first.")
        return None
    names = {f"{m['name']} ({m['sha256'][:10]})": m for m in models}
    return names[st.selectbox(label, list(names), key="model")]


def short_reason(text: str, width: int = 120) -> str:
    text = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return text if len(text) <= width else text[: width - 1] + "…"
