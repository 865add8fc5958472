"""History: one model (by name, every version) on one device over time; each run screened
as the CI gate screens it (orchestrator.history): its fastest run against the median of the
runs of its configuration (name and fingerprint) before it, beyond the threshold and beyond
their run-to-run noise."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import queries, ui
from orchestrator.history import K_NOISE
from orchestrator.regression import DEFAULT_THRESHOLD

st.title("History")
engine = ui.engine()
names = queries.lineages(engine)
if not names:
    st.info("No results yet: submit a campaign first.")
    st.stop()
c1, c2, c3 = st.columns([2, 2, 1])
name = c1.selectbox("Model", names, key="model")
devices = queries.lineage_devices(engine, name)
if not devices:
    st.info("No results for this model yet.")
    st.stop()
device = c2.selectbox("Device", devices, key="device")
default_pct = int(DEFAULT_THRESHOLD * 100)  # the CI gate's
threshold = c3.number_input("regression threshold %", 1, 500, default_pct, key="threshold") / 100
rows = queries.flag_regressions(queries.lineage_history(engine, name, device), threshold)
df = pd.DataFrame(rows).drop(columns=["sample"])
flagged = df[df["regression"]]
rule = (
    f"fastest run over {threshold:.0%} and over {K_NOISE:g}x the run-to-run noise slower "
    "than the median of its configuration's earlier runs"
)
if len(flagged):
    ui.notice(
        "error",
        f"{len(flagged)} regression(s) ({rule}):",
        [
            f"{r.config} in {r.campaign_name} ({r.change:+.1%}, noise ±{r.noise:.1%}"
            + f", version {r.version})"
            for r in flagged.itertuples()
        ],
    )
else:
    st.success(f"No regression ({rule}).")
ok = df.dropna(subset=["median_ms"])
base = alt.Chart(ok).encode(
    x=alt.X("at:T", title="measured"),
    y=alt.Y("median_ms:Q", title="median latency (ms)"),
    color="config:N",
    detail="config_fingerprint:N",  # one line per configuration record: never joined
    tooltip=[
        "at",
        "campaign_name",
        "version",
        "config",
        alt.Tooltip("median_ms", format=".3f"),
        alt.Tooltip("change", format="+.1%"),
        alt.Tooltip("noise", format=".1%"),
        "driver",
        "config_fingerprint",
        "timing",
    ],
)
points = base.mark_point(filled=True, size=70).encode(
    shape=alt.Shape(
        "regression:N", scale=alt.Scale(domain=[False, True], range=["circle", "triangle-up"])
    )
)
st.altair_chart(base.mark_line() + points, width="stretch")
st.dataframe(
    df,
    hide_index=True,
    width="stretch",
    column_config={
        "avg_ms": st.column_config.NumberColumn("avg ms", format="%.3f"),
        "median_ms": st.column_config.NumberColumn("median ms", format="%.3f"),
        "change": st.column_config.NumberColumn("change (fastest run)", format="percent"),
        "noise": st.column_config.NumberColumn("run-to-run noise", format="percent"),
        "max_avg_error": st.column_config.NumberColumn("diff error", format="%.2e"),
        "config_fingerprint": "config id",
    },
)
