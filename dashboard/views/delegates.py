"""Which delegate: per device and model in a campaign, each configuration's latency, init,
error against the CPU, nodes delegated and fallbacks, the recommended configuration
(orchestrator.delegate_choice), and what submission refused with the reasons
(orchestrator.refusals). The viewer's projects' campaigns only."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import auth, queries, ui
from orchestrator.refusals import NOT_RECORDED

#: How the table writes each number column (ui.without_gaps: a missing value reads "—").
COLUMN_FORMATS = {"avg_ms": "{:.3f}", "init_ms": "{:.1f}", "error_vs_cpu": "{:.2e}",
                  "fallback_nodes": "{:.0f}"}  # fmt: skip

st.title("Which delegate")
engine = ui.engine()
projects = auth.projects_of(ui.viewer())
campaigns = queries.campaigns(engine, projects)
if not campaigns:
    st.info("No campaigns yet: submit one with several --configs first.")
    st.stop()
labels = {f"{c['campaign']} · {c['name']}": c["campaign"] for c in campaigns}
chosen = labels[st.selectbox("Campaign", list(labels), key="campaign")]
found = queries.delegate_choice(engine, chosen, projects)
if found is None:
    st.stop()
for e in ui.page_of(found["entries"], "entries_page", "devices and models"):
    st.subheader(f"{e['device']} · {e['model']}")
    if e["recommended"]:
        st.success(f"Recommended: {e['recommended']}")
    else:
        st.warning("No configuration succeeded here yet.")
    df = pd.DataFrame(e["configs"])
    df.insert(0, "recommended", df["config"] == e["recommended"])
    ui.table(
        df,
        COLUMN_FORMATS,
        hide_index=True,
        width="stretch",
        column_config={
            "config": "configuration",
            "avg_ms": "avg ms",
            "init_ms": "init ms",
            "error_vs_cpu": st.column_config.Column(
                "error vs CPU", help="mean absolute error against the CPU reference"
            ),
            "nodes": st.column_config.Column("nodes", help="delegated / total"),
            "fallback_nodes": "fallback nodes",
        },
    )
st.subheader("Refused at submission")
refused = found["refused"]
if refused is None:
    st.info(NOT_RECORDED)
elif not refused:
    st.success("Every selected device took every configuration its kind runs.")
else:
    st.dataframe(pd.DataFrame(refused), hide_index=True, width="stretch", key="refused")
