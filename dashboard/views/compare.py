"""Compare devices: latency per device and configuration, speed-up over the CPU, init cold
vs cached, memory; each row's configuration fingerprint and timing path, and how a result
was measured (its configuration record, conditions and uncertainty)."""

from __future__ import annotations

from typing import Any

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
older = df["configuration"] != queries.CURRENT
if older.any() and not st.checkbox(
    f"Include {int(older.sum())} row(s) measured under an older, different configuration",
    key="other_configs",
):
    df = df[~older]
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
        "no_baseline": "why no vs CPU",
        "init_cold_ms": st.column_config.NumberColumn("init cold ms", format="%.0f"),
        "init_cached_ms": st.column_config.NumberColumn("init cached ms", format="%.0f"),
        "init_ms": st.column_config.NumberColumn("init ms", format="%.0f"),
        "peak_mb": st.column_config.NumberColumn("peak MB", format="%.1f"),
        "config_fingerprint": "config id",
        "result": None,  # the detail below picks by it
    },
)
tooltip = [
    "device",
    "config",
    alt.Tooltip("avg_ms", format=".2f"),
    alt.Tooltip("speedup", format=".2f"),
    "runs",
]


def chart(place: Any, data: pd.DataFrame, what: str, c: alt.Chart | alt.LayerChart) -> None:
    """An Altair chart, or a note when no result measured `what` (no empty chart)."""
    if data.empty:
        place.info(f"{what}: not measured by these results.")
    else:
        place.altair_chart(c, width="stretch")


left, right = st.columns(2)
left.altair_chart(
    alt.Chart(df, title="Latency (ms, lower is better)")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", sort="x", axis=ui.full_labels()),
        x="avg_ms:Q",
        color="config:N",
        yOffset="config:N",
        tooltip=tooltip,
    ),
    width="stretch",
)
gpu = df[df["config"] != "cpu"].dropna(subset=["speedup"])
chart(
    right,
    gpu,
    "Speed-up over the CPU",
    alt.Chart(gpu, title="Speed-up over the CPU")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", sort="-x", axis=ui.full_labels()),
        x="speedup:Q",
        color="config:N",
        yOffset="config:N",
        tooltip=tooltip,
    )
    + alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 4]).encode(x="x:Q"),
)
init = df.melt(
    id_vars=["device", "config"],
    value_vars=["init_cold_ms", "init_cached_ms"],
    var_name="init",
    value_name="ms",
).dropna()
chart(
    left,
    init,
    "Initialisation: cold vs cached kernels",
    alt.Chart(init, title="Initialisation: cold vs cached kernels (ms)")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", axis=ui.full_labels()),
        x="ms:Q",
        color="init:N",
        yOffset="init:N",
        tooltip=["device", "config", "init", alt.Tooltip("ms", format=".0f")],
    ),
)
peak = df.dropna(subset=["peak_mb"])
chart(
    right,
    peak,
    "Peak memory",
    alt.Chart(peak, title="Peak memory (MB)")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", axis=ui.full_labels()),
        x="peak_mb:Q",
        color="config:N",
        yOffset="config:N",
        tooltip=["device", "config", alt.Tooltip("peak_mb", format=".1f")],
    ),
)

st.subheader("Per-op profile")
pairs = {
    f"{r.device} · {r.config}" + (f" · {r.config_fingerprint}" if older.any() else ""): r
    for r in df.itertuples()
}
picked = st.selectbox("Result", list(pairs), key="profile_of") if pairs else None
profile = []
if picked:
    row = pairs[picked]
    profile = queries.op_profile(
        ui.engine(), model["sha256"], row.device, row.config, int(row.result)
    )
if not profile:
    st.info("No per-op profile stored for this result.")
else:
    ops = pd.DataFrame(profile)
    st.dataframe(
        ops,
        hide_index=True,
        width="stretch",
        column_config={
            "avg_ms": st.column_config.NumberColumn("avg ms", format="%.3f"),
            "first_ms": st.column_config.NumberColumn("first ms", format="%.3f"),
        },
    )
    st.altair_chart(
        alt.Chart(ops.dropna(subset=["avg_ms"]), title="Time per node (ms, run order)")
        .mark_bar()
        .encode(
            y=alt.Y("node:N", sort=None),
            x="avg_ms:Q",
            color="backend:N",
            tooltip=["node", "op", "backend", alt.Tooltip("avg_ms", format=".3f")],
        ),
        width="stretch",
    )

st.subheader("How it was measured")
record = queries.measurement(ui.engine(), int(pairs[picked].result)) if picked else None
if record is not None:
    st.caption(
        f"result {record['result']} · config id {record['config_fingerprint'] or '-'} · "
        f"timing path {record['timing'] or '-'} · median ± ci95 {record['median_ci_ms'] or '-'} ms"
    )
if record is None or not (record["switches"] or record["conditions"] or record["uncertainty"]):
    st.caption(
        "No configuration record stored with this result (results from before the record, "
        "and phone tools, keep none)."
    )
else:
    readings = record["conditions"] | {
        f"uncertainty.{k}": v for k, v in record["uncertainty"].items()
    }
    left, right = st.columns(2)
    left.dataframe(pd.DataFrame(record["switches"]), hide_index=True, width="stretch")
    right.dataframe(
        pd.DataFrame({"condition": list(readings), "value": [str(v) for v in readings.values()]}),
        hide_index=True,
        width="stretch",
    )
