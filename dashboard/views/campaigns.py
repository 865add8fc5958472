"""Campaigns: progress, failures with reasons, and a new campaign from an uploaded model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import auth, queries, ui
from farm_core.configs import CONFIGS, DEFAULT_CONFIGS
from farm_core.schema import DEFAULT_PROJECT

st.title("Campaigns")
engine = ui.engine()
viewer = ui.viewer()
projects = auth.projects_of(viewer)
rows = queries.campaigns(engine, projects)
if rows:
    df = pd.DataFrame(rows)
    st.dataframe(
        df[
            [
                "campaign",
                "name",
                "project",
                "owner",
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
            "created": ui.utc_time("created"),
            "progress": st.column_config.ProgressColumn("progress", min_value=0, max_value=1),
            "cancelled_jobs": "cancelled",
        },
    )
    chosen = st.selectbox("Failures of campaign", [r["campaign"] for r in rows], key="campaign")
    failures = queries.campaign_failures(engine, chosen, projects)
    if failures:
        st.dataframe(pd.DataFrame(failures), hide_index=True, width="stretch")
    else:
        st.success(f"Campaign {chosen} has no failed jobs.")
    job_ids = queries.campaign_jobs(engine, chosen, projects)
    job = st.selectbox("Debug artifacts of job", job_ids, key="artifacts_job")
    found = queries.job_artifacts(engine, job, projects) if job is not None else []
    for i, a in enumerate(found):
        cut = " (truncated)" if a["truncated"] else ""
        left, right = st.columns([3, 1])
        left.write(f"attempt {a['attempt']} · {a['kind']} · `{a['name']}` · "
                   f"{a['size_bytes']} bytes{cut}")  # fmt: skip
        # read when clicked (a job's artifacts are up to megabytes each, and every rerun
        # of the page had read them all); no rerun, as the compatibility page's downloads
        right.download_button(
            "Download",
            lambda at=a["attempt"], name=a["name"]: (
                queries.artifact_bytes(engine, job, at, name, projects) or b""
            ),
            file_name=f"job{job}-{a['attempt']}-{a['name']}",
            mime=a["media_type"],
            key=f"artifact_{i}",
            on_click="ignore",
        )
    if job is not None and not found:
        st.caption(f"Job {job} has no debug artifacts.")
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
    configs = st.multiselect("Configurations", list(CONFIGS), list(DEFAULT_CONFIGS))
    name = st.text_input("Campaign name", "")
    writable = viewer.writable_projects() if viewer is not None else ()
    if writable is None:  # an admin, or no login: any project
        project = st.text_input("Project", DEFAULT_PROJECT, key="project")
    else:
        project = st.selectbox("Project", writable, key="project")
    sent = st.form_submit_button("Submit", type="primary")
if sent:
    if upload is None:
        st.error("Choose a .tflite file.")
        st.stop()
    data = upload.getvalue()
    check = queries.check_upload(upload.name, data)
    if check.errors:
        ui.notice("error", "The model was refused:", [f"{upload.name}: {e}" for e in check.errors])
        st.stop()
    from delegate_runtime.errors import DevicefarmError
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.settings import default_broker_url

    dispatcher = CeleryDispatcher(default_broker_url())
    try:
        done = queries.submit_upload(
            engine, dispatcher, upload.name, data, selector, configs, name, project or "",
            owner="" if viewer in (None, auth.ANYONE) else viewer.name,
        )  # fmt: skip
    except DevicefarmError as exc:
        ui.notice("error", "The campaign was refused:", [exc])
    else:
        st.success(
            f"Campaign {done.campaign_id}: {done.jobs} jobs on {len(done.devices)} devices "
            f"({done.sent} sent)."
        )
        if done.warnings:
            ui.notice("warning", "Warnings:", done.warnings)
    finally:
        dispatcher.close()
