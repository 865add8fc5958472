"""devicefarm dashboard: `devicefarm dashboard` runs `streamlit run` on this file."""

from __future__ import annotations

import streamlit as st

from dashboard import ui

PAGES = (
    ("views/fleet.py", "Fleet", ":material/devices:"),
    ("views/campaigns.py", "Campaigns", ":material/playlist_play:"),
    ("views/compare.py", "Compare devices", ":material/speed:"),
    ("views/accuracy.py", "Accuracy", ":material/target:"),
    ("views/op_coverage.py", "Op coverage", ":material/account_tree:"),
    ("views/compatibility.py", "Compatibility", ":material/verified:"),
    ("views/history.py", "History", ":material/timeline:"),
)

st.set_page_config(page_title="devicefarm", page_icon=":material/memory:", layout="wide")
if ui.require_login():
    nav = st.navigation([st.Page(path, title=title, icon=icon) for path, title, icon in PAGES])
    st.sidebar.caption(f"database: `{ui.db_url().split('@')[-1]}`")
    if ui.read_only():
        st.sidebar.caption("read-only")
    nav.run()
