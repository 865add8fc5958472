"""What a session says about itself: delegation summary, device facts, versions.

The GPU delegate exposes `.delegation`, `.device_facts` and `.memory_bytes`; the CPU
interpreter exposes none of them. These helpers read whatever is present and normalise it
into plain JSON-able dicts, so the tools work the same on either.
"""

from __future__ import annotations

import inspect
import os
import platform
import sys
from collections.abc import Mapping
from typing import Any

from .benchmark_format import GPU_DELEGATE_NAME

_DELEGATED_KEYS = ("nodes_delegated", "delegated_nodes", "delegated", "num_delegated")
_TOTAL_KEYS = ("nodes_total", "total_nodes", "total", "num_nodes")
_PARTITION_KEYS = ("partitions", "num_partitions", "delegate_kernels")
_UNSUPPORTED_KEYS = ("unsupported", "unsupported_ops", "fallback")


def _get(obj: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
        if value is not None:
            return value() if callable(value) and not isinstance(value, type) else value
    return None


def _unsupported(raw: Any) -> list[dict[str, str]]:
    if not raw:
        return []
    if isinstance(raw, Mapping):
        return [{"op": str(k), "reason": str(v)} for k, v in raw.items()]
    out = []
    for item in raw:
        if isinstance(item, Mapping):
            op = item.get("op") or item.get("name") or "?"
            out.append({"op": str(op), "reason": str(item.get("reason", item.get("why", "")))})
        elif isinstance(item, (tuple, list)) and len(item) >= 2:
            out.append({"op": str(item[0]), "reason": str(item[1])})
        else:
            op = getattr(item, "op", None) or getattr(item, "name", str(item))
            out.append({"op": str(op), "reason": str(getattr(item, "reason", ""))})
    return out


def delegation_summary(session: Any) -> dict[str, Any] | None:
    """The session's delegation as {delegate, nodes_delegated, nodes_total, partitions,
    fully_delegated, unsupported: [{op, reason}]}, or None when it has none (CPU)."""
    raw = getattr(session, "delegation", None)
    if raw is None:
        return None
    if hasattr(raw, "to_dict") and callable(raw.to_dict):
        raw = raw.to_dict()
    delegated = _get(raw, _DELEGATED_KEYS)
    total = _get(raw, _TOTAL_KEYS)
    partitions = _get(raw, _PARTITION_KEYS)
    if isinstance(partitions, (list, tuple)):
        partitions = len(partitions)
    unsupported = _unsupported(_get(raw, _UNSUPPORTED_KEYS))
    fully = _get(raw, ("fully_delegated", "full"))
    if fully is None and delegated is not None and total is not None:
        fully = int(delegated) == int(total) and int(total) > 0
    out = {
        "delegate": GPU_DELEGATE_NAME,
        "nodes_delegated": None if delegated is None else int(delegated),
        "nodes_total": None if total is None else int(total),
        "partitions": None if partitions is None else int(partitions),
        "fully_delegated": bool(fully),
        "unsupported": unsupported,
    }
    small = raw.get("below_min_work") if isinstance(raw, Mapping) else None
    if small and small.get("nodes"):  # supported nodes the placement rule left to the CPU
        out["below_min_work"] = dict(small)
    return out


def cpu_facts() -> dict[str, Any]:
    """Facts of the host CPU, for results run on the CPU reference."""
    return {
        "kind": "cpu",
        "name": platform.processor() or platform.machine(),
        "machine": platform.machine(),
        "system": platform.system(),
        "cpu_count": os.cpu_count(),
        "host": platform.node(),
    }


def device_facts(session: Any, delegate: str) -> dict[str, Any]:
    """The session's `device_facts` (GPU), or the host CPU's facts."""
    facts = getattr(session, "device_facts", None)
    if callable(facts):
        facts = facts()
    if facts:
        return {str(k): v for k, v in dict(facts).items()}
    return cpu_facts() if delegate == "cpu" else {"kind": delegate}


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions(facts: Mapping[str, Any], runtime: str) -> dict[str, Any]:
    """Runtime and driver versions that a result depends on."""
    import numpy

    out: dict[str, Any] = {
        "devicefarm": _dist_version("devicefarm"),
        "runtime": runtime,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }
    for key in ("driver_version", "opencl_version", "opencl_c_version", "platform_version"):
        if facts.get(key):
            out[key] = facts[key]
    if "pyopencl" in sys.modules:
        out["pyopencl"] = getattr(sys.modules["pyopencl"], "VERSION_TEXT", None)
    return out


def accepted_kwargs(fn: Any, wanted: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The subset of `wanted` that `fn` accepts, and the names it does not."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return dict(wanted), []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(wanted), []
    ok = {k: v for k, v in wanted.items() if k in params}
    return ok, [k for k in wanted if k not in params]
