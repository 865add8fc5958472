"""Compatibility matrix (models × devices) and the allowlist builder."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import auth, cache, queries, ui
from orchestrator.allowlist import export
from orchestrator.allowlist.rules import Thresholds

#: Entries up to which the devicedb JSON is shown at once.
CODE_VIEW_ENTRIES = 100

st.title("Compatibility")
with st.expander("Thresholds", expanded=True):
    c1, c2, c3, c4 = st.columns(4)
    min_speedup = c1.number_input("min speed-up", 0.0, 100.0, 1.2, 0.1, key="min_speedup")
    use_error = c2.checkbox("custom max error", key="use_error")
    max_error = c2.number_input(
        "max error", 0.0, 10.0, 1e-2, format="%.1e", key="max_error", disabled=not use_error
    )
    full = c3.checkbox("require full delegation", key="full")
    min_runs = c4.number_input("min runs", 1, 1000, 1, key="min_runs")
thresholds = Thresholds(
    min_speedup=float(min_speedup),
    max_error=float(max_error) if use_error else None,
    require_full_delegation=full,
    min_runs=int(min_runs),
)
decided = cache.allowlists(ui.engine(), thresholds, auth.projects_of(ui.viewer()))
lists = decided.lists
rows = queries.matrix(lists)
if not rows:
    st.info("No models or devices yet.")
    st.stop()
df = pd.DataFrame(rows)
df["reason"] = df["reason"].map(ui.short_reason)
colors = alt.Scale(domain=list(ui.STATUS_COLORS), range=list(ui.STATUS_COLORS.values()))
st.altair_chart(
    alt.Chart(df)
    .mark_rect(stroke="white")
    .encode(
        x=alt.X("device:N", axis=ui.full_labels(None)),
        y=alt.Y("model:N", axis=ui.full_labels(None)),
        color=alt.Color("status:N", scale=colors),
        tooltip=["model", "device", "status", "code", "reason", "precision", "set_aside"],
    ),
    width="stretch",
)
counts = df.groupby("status").size().to_dict()
st.caption(
    " · ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    + f" · results read at {decided.at:%H:%M:%S} UTC (again at most every"
    f" {cache.MAX_AGE_S:.0f} s as they come in)"
)

st.subheader("Allowlist")
by_name = {f"{a.model_name} ({sha[:10]})": a for sha, a in lists.items()}
allowlist = by_name[st.selectbox("Model", list(by_name), key="allowlist_model")]


def rendered(fmt: str) -> bytes:
    return decided.render(allowlist.model_sha256, fmt)


st.caption("Android SDK ranges (MINIMUM/MAXIMUM) are written where the measurements support them.")
preview = pd.DataFrame([export.row(e) for e in allowlist.entries])
st.dataframe(preview, hide_index=True, width="stretch")
stem = allowlist.model_name.removesuffix(".tflite")
files = {
    "devicedb-json": (f"{stem}_gpu_compatibility.json", "application/json"),
    "devicedb-bin": (f"{stem}_gpu_compatibility.bin", "application/octet-stream"),
    "csv": (f"{stem}_allowlist.csv", "text/csv"),
    "json": (f"{stem}_allowlist.json", "application/json"),
}
cols = st.columns(len(files))
for col, (fmt, (name, mime)) in zip(cols, files.items(), strict=True):
    # made when clicked (a 1,000-device list takes a second per format)
    col.download_button(fmt, lambda fmt=fmt: rendered(fmt), name, mime, key=f"dl_{fmt}")
with st.expander("devicedb JSON"):
    # a long list's JSON (megabytes at 1,000 devices) is written only when asked for
    if len(allowlist.entries) <= CODE_VIEW_ENTRIES or st.toggle("Show it", key="show_json"):
        st.code(rendered("devicedb-json").decode(), language="json")
