"""History: one model (by name, every version) on one device over time; each run screened
as the CI gate screens it (orchestrator.history): its fastest run against the median of the
runs of its configuration (name and fingerprint) before it, beyond the threshold and beyond
their run-to-run noise."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import auth, queries, ui
from orchestrator.history import K_NOISE
from orchestrator.regression import DEFAULT_THRESHOLD

st.title("History")
engine = ui.engine()
projects = auth.projects_of(ui.viewer())
names = queries.lineages(engine, projects)
if not names:
    st.info("No results yet: submit a campaign first.")
    st.stop()
c1, c2, c3 = st.columns([2, 2, 1])
name = c1.selectbox("Model", names, key="model")
devices = queries.lineage_devices(engine, name, projects)
if not devices:
    st.info("No results for this model yet.")
    st.stop()
device = c2.selectbox("Device", devices, key="device")
default_pct = int(DEFAULT_THRESHOLD * 100)  # the CI gate's
threshold = c3.number_input("regression threshold %", 1, 500, default_pct, key="threshold") / 100
rows = queries.flag_regressions(queries.lineage_history(engine, name, device, projects), threshold)
df = pd.DataFrame(rows).drop(columns=["sample"])
# stored as UTC without a zone: said so, on the axis and in the table, whatever the
# viewer's browser's zone (Vega-Lite would show a zone-less time as the browser's own)
df["at"] = pd.to_datetime(df["at"], utc=True)
df.insert(0, "measured", df["at"].dt.strftime("%Y-%m-%d %H:%M:%S UTC"))
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
    x=alt.X(
        "at:T",
        title="measured (UTC)",
        scale=alt.Scale(type="utc"),
        axis=alt.Axis(format="%b %d %H:%M", labelAngle=-30),
    ),
    y=alt.Y("median_ms:Q", title="median latency (ms)"),
    color=alt.Color("config:N", title="configuration"),
    detail="config_fingerprint:N",  # one line per configuration record: never joined
    tooltip=[
        "measured",
        alt.Tooltip("campaign_name", title="campaign"),
        "version",
        alt.Tooltip("config", title="configuration"),
        alt.Tooltip("median_ms", format=".3f", title="median ms"),
        alt.Tooltip("change", format="+.1%", title="change (fastest run)"),
        alt.Tooltip("noise", format=".1%", title="run-to-run noise"),
        "driver",
        alt.Tooltip("config_fingerprint", title="config id"),
        alt.Tooltip("timing", title="timing path"),
    ],
)
points = base.mark_point(filled=True, size=70).encode(
    shape=alt.Shape(
        "regression:N",
        title="regression",
        scale=alt.Scale(domain=[False, True], range=["circle", "triangle-up"]),
    )
)
st.altair_chart(base.mark_line() + points, width="stretch")
ui.table(
    df.drop(columns=["at"]),
    {
        "avg_ms": "{:.3f}",
        "median_ms": "{:.3f}",
        "change": "{:+.1%}",
        "noise": "{:.1%}",
        "max_avg_error": "{:.2e}",
    },
    hide_index=True,
    width="stretch",
    column_config={
        "campaign": "campaign id",
        "campaign_name": "campaign",
        "config": "configuration",
        "avg_ms": "avg ms",
        "median_ms": "median ms",
        "change": "change (fastest run)",
        "noise": "run-to-run noise",
        "max_avg_error": "diff error",
        "config_fingerprint": "config id",
        "timing": "timing path",
    },
)
