"""Accuracy: inference-diff error per device and output; task accuracy where measured."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import auth, queries, ui

st.title("Accuracy")
projects = auth.projects_of(ui.viewer())
# ui.model_picker lists every project's models: the viewer's only here
models = {ui.model_label(m): m for m in queries.models(ui.engine(), projects)}
if not models:
    st.info("No results yet: submit a campaign first.")
    st.stop()
model = models[st.selectbox("Model", sorted(models), key="model")]
rows = queries.accuracy(ui.engine(), model["sha256"], projects)
if not rows:
    st.info("No inference diff for this model yet (GPU configurations with diff runs).")
    st.stop()
df = pd.DataFrame(rows)
st.caption("Mean absolute difference from the CPU reference, newest run per device.")
st.altair_chart(
    alt.Chart(df)
    .mark_point(filled=True, size=80)
    .encode(
        x=alt.X("avg_error:Q", scale=alt.Scale(type="log"), title="avg error (log)"),
        y=alt.Y("device:N", axis=ui.full_labels()),
        color=alt.Color("config:N", title="configuration"),
        shape="output:N",
        tooltip=[
            "device",
            alt.Tooltip("config", title="configuration"),
            "output",
            alt.Tooltip("avg_error", format=".3e"),
            alt.Tooltip("max_error", format=".3e"),
        ],
    ),
    width="stretch",
)
st.dataframe(
    df,
    hide_index=True,
    width="stretch",
    column_config={
        k: st.column_config.NumberColumn(k, format="%.3e")
        for k in ("avg_error", "std_dev", "max_error")
    },
)
task = [c for c in df.columns if c.startswith("task ")]
if task:
    st.subheader("Task accuracy")
    st.dataframe(
        df.dropna(subset=task, how="all").drop_duplicates(["device", "config"])[
            ["device", "config", *task]
        ],
        hide_index=True,
        width="stretch",
    )
