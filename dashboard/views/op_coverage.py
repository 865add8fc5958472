"""Op coverage: per model and device, what ran on the GPU and what fell back, and why."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import auth, queries, ui

st.title("Op coverage")
projects = auth.projects_of(ui.viewer())
# ui.model_picker lists every project's models: the viewer's only here
models = {ui.model_label(m): m for m in queries.models(ui.engine(), projects)}
if not models:
    st.info("No results yet: submit a campaign first.")
    st.stop()
model = models[st.selectbox("Model", sorted(models), key="model")]
rows = queries.op_coverage(ui.engine(), model["sha256"], projects)
if not rows:
    st.info("No GPU results for this model yet.")
    st.stop()
df = pd.DataFrame(rows)
df["coverage"] = df["gpu_ops"] / df["total_ops"]
st.dataframe(
    df.drop(columns=["fallbacks"]),
    hide_index=True,
    width="stretch",
    column_config={
        "coverage": st.column_config.ProgressColumn(
            "on GPU", min_value=0, max_value=1, format="percent"
        ),
    },
)
fallbacks = [
    {"device": r["device"], "config": r["config"], **f} for r in rows for f in r["fallbacks"]
]
st.subheader("Fell back to the CPU")
if fallbacks:
    fb = pd.DataFrame(fallbacks)
    st.dataframe(
        fb.groupby(["op", "reason"]).agg(devices=("device", "nunique")).reset_index(),
        hide_index=True,
        width="stretch",
    )
    st.dataframe(fb, hide_index=True, width="stretch")
else:
    st.success("Every op ran on the GPU on every device.")
