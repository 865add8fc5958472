"""Campaigns: progress, failures with reasons, and a new campaign from an uploaded model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import queries, ui

st.title("Campaigns")
engine = ui.engine()
rows = queries.campaigns(engine)
if rows:
    df = pd.DataFrame(rows)
    st.dataframe(
        df[
            [
                "campaign",
                "name",
                "created",
                "jobs",
                "progress",
                "succeeded",
                "failed",
                "running",
                "queued",
                "dispatched",
                "cancelled_jobs",
            ]
        ],
        hide_index=True,
        width="stretch",
        column_config={
            "progress": st.column_config.ProgressColumn("progress", min_value=0, max_value=1),
            "cancelled_jobs": "cancelled",
        },
    )
    chosen = st.selectbox("Failures of campaign", [r["campaign"] for r in rows], key="campaign")
    failures = queries.campaign_failures(engine, chosen)
    if failures:
        st.dataframe(pd.DataFrame(failures), hide_index=True, width="stretch")
    else:
        st.success(f"Campaign {chosen} has no failed jobs.")
else:
    st.info("No campaigns yet.")

st.subheader("New campaign")
if ui.read_only():
    st.caption("This dashboard is read-only: submit with `devicefarm submit`.")
    st.stop()
with st.form("submit"):
    upload = st.file_uploader("Model (.tflite)", type=["tflite"])
    selector = st.text_input(
        "Devices", "all", help="a selector: `all`, `kind=android`, `vendor=nvidia|amd`, a key glob"
    )
    configs = st.multiselect("Configurations", list(queries.CONFIGS), list(queries.CONFIGS))
    name = st.text_input("Campaign name", "")
    sent = st.form_submit_button("Submit", type="primary")
if sent:
    if upload is None:
        st.error("Choose a .tflite file.")
        st.stop()
    data = upload.getvalue()
    check = queries.check_upload(upload.name, data)
    if check.errors:
        for e in check.errors:
            st.error(f"{upload.name}: {e}")
        st.stop()
    from delegate_runtime.errors import DevicefarmError
    from orchestrator.dispatch import CeleryDispatcher
    from orchestrator.settings import default_broker_url

    dispatcher = CeleryDispatcher(default_broker_url())
    try:
        done = queries.submit_upload(engine, dispatcher, upload.name, data, selector, configs, name)
    except DevicefarmError as exc:
        st.error(str(exc))
    else:
        st.success(
            f"Campaign {done.campaign_id}: {done.jobs} jobs on {len(done.devices)} devices "
            f"({done.sent} sent)."
        )
        for w in done.warnings:
            st.warning(w)
    finally:
        dispatcher.close()
