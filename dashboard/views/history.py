"""History: one model on one device over time; regressions beyond a threshold flagged."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import queries, ui

st.title("History")
model = ui.model_picker()
if model is None:
    st.stop()
engine = ui.engine()
devices = queries.history_devices(engine, model["sha256"])
if not devices:
    st.info("No results for this model yet.")
    st.stop()
c1, c2 = st.columns([3, 1])
device = c1.selectbox("Device", devices, key="device")
threshold = c2.number_input("regression threshold %", 1, 500, 10, key="threshold") / 100.0
rows = queries.flag_regressions(queries.history(engine, model["sha256"], device), threshold)
df = pd.DataFrame(rows)
flagged = df[df["regression"]]
if len(flagged):
    st.error(
        f"{len(flagged)} regression(s) above {threshold:.0%}: "
        + "; ".join(
            f"{r.config} in {r.campaign_name} ({r.change:+.0%})" for r in flagged.itertuples()
        )
    )
else:
    st.success(f"No regression above {threshold:.0%}.")
ok = df.dropna(subset=["avg_ms"])
base = alt.Chart(ok).encode(
    x=alt.X("at:T", title="measured"),
    y=alt.Y("avg_ms:Q", title="avg latency (ms)"),
    color="config:N",
    tooltip=[
        "at",
        "campaign_name",
        "config",
        alt.Tooltip("avg_ms", format=".2f"),
        alt.Tooltip("change", format="+.1%"),
        "driver",
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
        "avg_ms": st.column_config.NumberColumn("avg ms", format="%.2f"),
        "change": st.column_config.NumberColumn("change", format="percent"),
        "max_avg_error": st.column_config.NumberColumn("diff error", format="%.2e"),
    },
)
