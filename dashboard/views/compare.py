"""Compare devices: latency per device and configuration, speed-up over the CPU, init cold
vs cached, memory; each row's configuration fingerprint and timing path, and how a result
was measured (its configuration record, conditions and uncertainty)."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import auth, queries, ui

st.title("Compare devices")
projects = auth.projects_of(ui.viewer())
# ui.model_picker lists every project's models: the viewer's only here
models = {ui.model_label(m): m for m in queries.models(ui.engine(), projects)}
if not models:
    st.info("No results yet: submit a campaign first.")
    st.stop()
model = models[st.selectbox("Model", sorted(models), key="model")]
rows = queries.compare(ui.engine(), model["sha256"], projects)
if not rows:
    st.info("No successful results for this model yet.")
    st.stop()
df = pd.DataFrame(rows)
#: How the table writes each number column (ui.without_gaps: a missing value reads "—").
COLUMN_FORMATS = {
    "avg_ms": "{:.2f}",
    "best_ms": "{:.2f}",
    "median_ms": "{:.2f}",
    "p95_ms": "{:.2f}",
    "speedup": "{:.2f}x",
    "init_cold_ms": "{:.0f}",
    "init_cached_ms": "{:.0f}",
    "init_ms": "{:.0f}",
    "peak_mb": "{:.1f}",
}
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
ui.table(
    df,
    COLUMN_FORMATS,
    hide_index=True,
    width="stretch",
    column_config={
        "config": "configuration",
        "configuration": "record",
        "results": st.column_config.Column(
            "results", help="stored results (jobs) pooled in this row, each of many runs"
        ),
        "avg_ms": "avg ms",
        "best_ms": st.column_config.Column("best ms", help="the fastest result's median"),
        "median_ms": st.column_config.Column("median ms", help="the results' mean median"),
        "p95_ms": "p95 ms",
        "speedup": st.column_config.Column("vs CPU", help="the CPU's latency over this one"),
        "no_baseline": "why no vs CPU",
        "init_cold_ms": "init cold ms",
        "init_cached_ms": "init cached ms",
        "init_ms": "init ms",
        "peak_mb": "peak MB",
        "config_fingerprint": "config id",
        "timing": "timing path",
        "result": None,  # the detail below picks by it
    },
)
tooltip = [
    "device",
    alt.Tooltip("config", title="configuration"),
    alt.Tooltip("avg_ms", format=".2f", title="avg ms"),
    alt.Tooltip("speedup", format=".2f", title="vs CPU (x)"),
    alt.Tooltip("results", title="results"),
]
CONFIG_COLOUR = alt.Color("config:N", title="configuration")


def chart(place: Any, data: pd.DataFrame, what: str, c: alt.Chart | alt.LayerChart) -> None:
    """An Altair chart, or a note when no result measured `what` (no empty chart)."""
    if data.empty:
        place.info(f"{what}: not measured by these results.")
    else:
        place.altair_chart(c, width="stretch")


# the charts draw a page of devices at a time (a bar per device and configuration)
table = df
drawn = ui.page_of(sorted(df["device"].unique()), "devices_page", "charts: devices")
df = df[df["device"].isin(drawn)]
left, right = st.columns(2)
left.altair_chart(
    alt.Chart(df, title="Latency (ms, lower is better)")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", sort="x", axis=ui.full_labels()),
        x=alt.X("avg_ms:Q", title="average latency (ms)"),
        color=CONFIG_COLOUR,
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
        x=alt.X("speedup:Q", title="speed-up over the CPU (x)"),
        color=CONFIG_COLOUR,
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
init["init"] = init["init"].map({"init_cold_ms": "cold (compiled)", "init_cached_ms": "cached"})
chart(
    left,
    init,
    "Initialisation: cold vs cached kernels",
    alt.Chart(init, title="Initialisation: cold vs cached kernels (ms)")
    .mark_bar()
    .encode(
        y=alt.Y("device:N", axis=ui.full_labels()),
        x=alt.X("ms:Q", title="initialisation (ms)"),
        color=alt.Color("init:N", title="kernels"),
        yOffset="init:N",
        tooltip=[
            "device",
            alt.Tooltip("config", title="configuration"),
            alt.Tooltip("init", title="kernels"),
            alt.Tooltip("ms", format=".0f", title="ms"),
        ],
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
        x=alt.X("peak_mb:Q", title="peak memory (MB)"),
        color=CONFIG_COLOUR,
        yOffset="config:N",
        tooltip=[
            "device",
            alt.Tooltip("config", title="configuration"),
            alt.Tooltip("peak_mb", format=".1f", title="peak MB"),
        ],
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
        ui.engine(), model["sha256"], row.device, row.config, int(row.result), projects
    )
if not profile:
    st.info("No per-op profile stored for this result.")
else:
    ops = pd.DataFrame(profile)
    # TFLite names a node `[its output tensor]:index`: long names that share a prefix, so
    # the chart labels each by its index and op, the whole name in the table and tooltip
    labels = zip(ops["node"], ops["op"], strict=True)
    ops.insert(0, "label", [ui.node_label(n, o, i) for i, (n, o) in enumerate(labels)])
    ui.table(
        ops,
        {"avg_ms": "{:.3f}", "first_ms": "{:.3f}"},
        hide_index=True,
        width="stretch",
        column_config={
            "label": "node",
            "node": "output tensor:index",
            "avg_ms": "avg ms",
            "first_ms": "first ms",
            "times_called": "calls",
        },
    )
    st.altair_chart(
        alt.Chart(ops.dropna(subset=["avg_ms"]), title="Time per node (ms, run order)")
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort=None, axis=ui.full_labels("node")),
            x=alt.X("avg_ms:Q", title="average time (ms)"),
            color=alt.Color("backend:N", title="backend"),
            tooltip=[
                alt.Tooltip("node", title="output tensor:index"),
                "op",
                "backend",
                alt.Tooltip("avg_ms", format=".3f", title="avg ms"),
            ],
        ),
        width="stretch",
    )

st.subheader("How it was measured")
record = queries.measurement(ui.engine(), int(pairs[picked].result), projects) if picked else None
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
