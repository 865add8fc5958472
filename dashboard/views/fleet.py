"""Fleet: devices by host, kind, state, health, last seen and current job."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import auth, queries, ui

st.title("Fleet")
rows = queries.fleet(ui.engine(), projects=auth.projects_of(ui.viewer()))
if not rows:
    st.info("No devices registered: start a worker agent (`devicefarm worker`).")
    st.stop()
df = pd.DataFrame(rows)
cols = st.columns(4)
cols[0].metric("devices", len(df))
cols[1].metric("online", int((df["state"] == "online").sum()))
cols[2].metric("quarantined", int((df["health"] == "quarantined").sum()))
cols[3].metric("running jobs", int((df["current_job"] != "").sum()))
hosts = sorted(df["host"].unique())
kinds = sorted(df["kind"].unique())
f1, f2 = st.columns(2)
pick_hosts = f1.multiselect("Hosts", hosts, default=hosts)
pick_kinds = f2.multiselect("Kinds", kinds, default=kinds)
shown = df[df["host"].isin(pick_hosts) & df["kind"].isin(pick_kinds)]
st.dataframe(
    shown[
        [
            "host",
            "kind",
            "key",
            "model",
            "driver_version",
            "state",
            "health",
            "health_reason",
            "last_seen",
            "current_job",
        ]
    ],
    hide_index=True,
    width="stretch",
    column_config={
        "driver_version": "driver",
        "health_reason": "why",
        "last_seen": ui.utc_time("last seen"),
        "current_job": "current job",
    },
)
