"""Which delegate for this model on this device: the campaign's configurations side by
side per device and model (latency, init, accuracy against the CPU, nodes delegated and
fallbacks), with a recommendation, and what submission refused (orchestrator.refusals).

The recommended configuration is the fastest succeeded one whose error against the CPU
reference is within its precision's limit (fp32 1e-3, fp16 5e-2 mean absolute), not
slower than the device's `cpu` (a split graph often is); `cpu` itself otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from farm_core.configs import stored_config
from farm_core.schema import SUCCEEDED

#: Mean absolute error against the CPU a configuration may have, by precision.
ERROR_LIMIT = {"fp32": 1e-3, "fp16": 5e-2}


def _ok_error(row: dict[str, Any]) -> bool:
    err = row.get("max_avg_error")
    if err is None:
        return True  # no diff measured (cpu, or diff_runs=0)
    return err <= ERROR_LIMIT[stored_config(row["config"]).precision]


def choose(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (device, model): its configurations' figures and the recommendation."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["device"], r["model"]), []).append(r)
    out = []
    for (device, model), rs in sorted(groups.items()):
        done = [r for r in rs if r["state"] == SUCCEEDED and r.get("avg_ms")]
        cpu = next((r for r in done if r["config"] == "cpu"), None)
        good = [r for r in done if _ok_error(r)]
        if cpu is not None:
            good = [r for r in good if r["avg_ms"] <= cpu["avg_ms"]]
        best = min(good, key=lambda r: r["avg_ms"], default=cpu)
        out.append({
            "device": device,
            "model": model,
            "recommended": best["config"] if best else None,
            "configs": [_figures(r) for r in sorted(rs, key=lambda r: r["config"])],
        })  # fmt: skip
    return out


def _figures(r: dict[str, Any]) -> dict[str, Any]:
    """A row of orchestrator.report.campaign_rows as the comparison shows it."""
    nodes = r.get("delegated") or ""
    done, _, total = nodes.partition("/")
    fallback = int(total) - int(done) if done.isdigit() and total.isdigit() else None
    return {
        "config": r["config"],
        "state": r["state"],
        "avg_ms": r.get("avg_ms"),
        "init_ms": r.get("init_ms"),
        "error_vs_cpu": r.get("max_avg_error"),
        "nodes": nodes,
        "fallback_nodes": fallback,
        "reason": (r.get("reason") or "")[:160],
    }


def _num(x: Any, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def format_choice(
    entries: Sequence[dict[str, Any]], refused: Sequence[dict[str, Any]] | None = ()
) -> str:
    """The comparison as text: a block per device and model, then the refusals submission
    kept (orchestrator.refusals; None: the campaign has no record)."""
    from .refusals import lines as refusal_lines

    lines = []
    for e in entries:
        lines.append(f"{e['device']}  {e['model']}  recommended: {e['recommended'] or '-'}")
        lines.append(f"  {'config':<44} {'state':<10} {'avg_ms':>10} {'init_ms':>10} "
                     f"{'err_vs_cpu':>10} {'nodes':>7} {'fallback':>8}")  # fmt: skip
        for c in e["configs"]:
            mark = "*" if c["config"] == e["recommended"] else " "
            lines.append(
                f"{mark} {c['config']:<44} {c['state']:<10} {_num(c['avg_ms'], '.3f'):>10} "
                f"{_num(c['init_ms'], '.3f'):>10} {_num(c['error_vs_cpu'], '.2e'):>10} "
                f"{c['nodes'] or '-':>7} {_num(c['fallback_nodes'], 'd'):>8}"
            )
            if c["state"] != SUCCEEDED and c["reason"]:
                lines.append(f"    {c['reason']}")
    lines += refusal_lines(refused)
    return "\n".join(lines)
