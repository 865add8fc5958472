"""The per-op profile of benchmark_model's `Run Order` table, as rows to store.

With a delegate, TFLite's profiler times the delegate's kernel as one node whose type is
the delegate's name (the GPU delegate registers `TfLiteGpuDelegateV2`); every other node
is an op the CPU ran. So the backend of a row is the delegate its type names, else cpu.
"""

from __future__ import annotations

from typing import Any

#: Node types of delegate kernels in benchmark_model's profile, and their backend.
DELEGATE_NODE_TYPES = {
    "TfLiteGpuDelegateV2": "gpu",
    "TfLiteGpuDelegate": "gpu",
    "TfLiteXNNPackDelegate": "xnnpack",
    "TfLiteNnapiDelegate": "nnapi",
    "TfLiteHexagonDelegate": "hexagon",
}


def backend_of(node_type: str) -> str:
    return DELEGATE_NODE_TYPES.get(node_type, "cpu")


def op_profile_rows(profile: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per profiled node in run order: node (TFLite's name), op (node type),
    backend, avg_ms, first_ms and times_called; empty without a profile."""
    rows = []
    for r in (profile or {}).get("nodes", []):
        op = str(r.get("node_type", ""))
        rows.append(
            {
                "node": r.get("name"),
                "op": op,
                "backend": r.get("backend") or backend_of(op),
                "avg_ms": r.get("avg_ms"),
                "first_ms": r.get("first_ms"),
                "times_called": r.get("times_called"),
            }
        )
    return rows
