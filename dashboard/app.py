"""devicefarm dashboard: `devicefarm dashboard` serves this file (through serve.py).

Every page has its own URL, `/<page>` (`/fleet`, `/compare`, ...): a link or a reload lands
on the page, after the login when one is needed."""

from __future__ import annotations

import streamlit as st

from dashboard import ui

#: (file, title, icon); the URL path is the file's name
PAGES = (
    ("views/fleet.py", "Fleet", ":material/devices:"),
    ("views/campaigns.py", "Campaigns", ":material/playlist_play:"),
    ("views/compare.py", "Compare devices", ":material/speed:"),
    ("views/delegates.py", "Which delegate", ":material/alt_route:"),
    ("views/accuracy.py", "Accuracy", ":material/target:"),
    ("views/op_coverage.py", "Op coverage", ":material/account_tree:"),
    ("views/compatibility.py", "Compatibility", ":material/verified:"),
    ("views/history.py", "History", ":material/timeline:"),
)

st.set_page_config(page_title="devicefarm", page_icon=":material/memory:", layout="wide")
if ui.require_login():
    pages = [
        st.Page(path, title=title, icon=icon, url_path=path.removeprefix("views/")[:-3])
        for path, title, icon in PAGES
    ]
    nav = st.navigation(pages)
    st.sidebar.text(f"database: {ui.db_url().split('@')[-1]}")
    if ui.read_only():
        st.sidebar.caption("read-only")
    nav.run()
