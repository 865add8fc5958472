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
#: Models the matrix shows at once, the first the default: a page of models none of the
#: farm's dashboards has read yet takes about 0.1 s a model at 1,000 devices (their results
#: read and gathered), so five fit a second on a 2-core machine; any other view is faster.
MATRIX_MODELS = (5, 10, 20, 50)

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
engine, projects = ui.engine(), auth.projects_of(ui.viewer())
models = queries.list_models(engine, projects)
if not models:
    st.info("No models or devices yet.")
    st.stop()
c1, c2 = st.columns([3, 1])
wanted = c1.text_input("Models named (a part of the name)", key="model_filter").strip().lower()
per_page = c2.selectbox("Models a page", MATRIX_MODELS, key="models_per_page")
named = [sha for sha, name in models.items() if wanted in name.lower()]
# a page of models at a time: only their evidence is read and decided (100 x 1,000 took 6-17 s)
shown = ui.page_of(named, "models_page", "models", per_page)
decided = cache.allowlists(engine, thresholds, projects, shown)
rows = queries.matrix(decided.lists)
if not rows:
    st.info("No model matches, or no devices yet.")
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
    + f" on these {len(decided.lists)} models · results read at {decided.at:%H:%M:%S} UTC"
    f" (again at most every {cache.MAX_AGE_S:.0f} s as they come in)"
)

st.subheader("Allowlist")
labels = {f"{name} ({sha[:10]})": sha for sha, name in models.items()}
first = list(labels.values()).index(shown[0]) if shown else 0
sha = labels[st.selectbox("Model", list(labels), first, key="allowlist_model")]
chosen = cache.allowlists(engine, thresholds, projects, [sha])
allowlist = chosen.lists[sha]


def rendered(fmt: str) -> bytes:
    return chosen.render(sha, fmt)


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
    # made when clicked (a 1,000-device list takes a second per format); no rerun: a
    # rerun begun with the download could drop the file being made (Streamlit's docs)
    col.download_button(
        fmt, lambda fmt=fmt: rendered(fmt), name, mime, key=f"dl_{fmt}", on_click="ignore"
    )
with st.expander("devicedb JSON"):
    # a long list's JSON (megabytes at 1,000 devices) is written only when asked for
    if len(allowlist.entries) <= CODE_VIEW_ENTRIES or st.toggle("Show it", key="show_json"):
        st.code(rendered("devicedb-json").decode(), language="json")
