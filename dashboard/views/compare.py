"""Compare devices: latency per device and configuration, speed-up over the CPU, init cold
vs cached, memory."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import queries, ui

st.title("Compare devices")
model = ui.model_picker()
if model is None:
    st.stop()
rows = queries.compare(ui.engine(), model["sha256"])
if not rows:
    st.info("No successful results for this model yet.")
    st.stop()
df = pd.DataFrame(rows)
configs = st.multiselect(
    "Configurations",
    sorted(df["config"].unique()),
    key="configs",
    default=sorted(df["config"].unique()),
)
df = df[df["config"].isin(configs)]
st.dataframe(
    df,
    hide_index=True,
    width="stretch",
    column_config={
        "avg_ms": st.column_config.NumberColumn("avg ms", format="%.2f"),
        "best_ms": st.column_config.NumberColumn("best ms", format="%.2f"),
        "median_ms": st.column_config.NumberColumn("median ms", format="%.2f"),
        "p95_ms": st.column_config.NumberColumn("p95 ms", format="%.2f"),
        "speedup": st.column_config.NumberColumn("vs CPU", format="%.2fx"),
        "init_cold_ms": st.column_config.NumberColumn("init cold ms", format="%.0f"),
        "init_cached_ms": st.column_config.NumberColumn("init cached ms", format="%.0f"),
        "init_ms": st.column_config.NumberColumn("init ms", format="%.0f"),
        "peak_mb": st.column_config.NumberColumn("peak MB", format="%.1f"),
    },
)
tooltip = [
    "device",
    "config",
    alt.Tooltip("avg_ms", format=".2f"),
    alt.Tooltip("speedup", format=".2f"),
    "runs",
]
left, right = st.columns(2)
left.altair_chart(
    alt.Chart(df, title="Latency (ms, lower is better)")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", sort="x"),
        x="avg_ms:Q",
        color="config:N",
        yOffset="config:N",
        tooltip=tooltip,
    ),
    width="stretch",
)
gpu = df[df["config"] != "cpu"].dropna(subset=["speedup"])
right.altair_chart(
    alt.Chart(gpu, title="Speed-up over the CPU")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", sort="-x"),
        x="speedup:Q",
        color="config:N",
        yOffset="config:N",
        tooltip=tooltip,
    )
    + alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 4]).encode(x="x:Q"),
    width="stretch",
)
init = df.melt(
    id_vars=["device", "config"],
    value_vars=["init_cold_ms", "init_cached_ms"],
    var_name="init",
    value_name="ms",
).dropna()
left.altair_chart(
    alt.Chart(init, title="Initialisation: cold vs cached kernels (ms)")
    .mark_bar()
    .encode(
        y="device:N",
        x="ms:Q",
        color="init:N",
        yOffset="init:N",
        tooltip=["device", "config", "init", alt.Tooltip("ms", format=".0f")],
    ),
    width="stretch",
)
right.altair_chart(
    alt.Chart(df.dropna(subset=["peak_mb"]), title="Peak memory (MB)")
    .mark_bar()
    .encode(
        y="device:N",
        x="peak_mb:Q",
        color="config:N",
        yOffset="config:N",
        tooltip=["device", "config", alt.Tooltip("peak_mb", format=".1f")],
    ),
    width="stretch",
)
