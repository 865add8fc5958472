"""The configuration a figure was measured under: every switch and tuning constant of the
runtime, with its value and where it came from, frozen when the session opened.

    record = configuration(options, session)    # {name: {"value": v, "source": s}}
    fingerprint(record)                          # 16 hex digits; equal records, equal digits

The GPU delegate's switches and tuning constants come from the session's switchboard
(gpu/switches.py: `Switches.record()`), the kernels' layout constants from their modules
(switches.LAYOUT). Sources: `default` (the value the code ships), `env` (a
DEVICEFARM_* variable), `option` (the caller's, e.g. a benchmark flag), `override` (a
switch a caller set, as bench/ab_knobs.py does, or a module constant changed in this
process), `session` (what the session actually did: the launch loop it got, whether host
edges or persistent kernels were available on this device).

Two results are comparable only when their fingerprints agree: the fingerprint covers the
values (not the sources) of everything that changes the timed path. Conditions (driver,
clocks, load) are recorded beside it (conditions.py), not in it.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Mapping
from typing import Any

from ..gpu.switches import LAYOUT, Switches

#: Environment variables that set the CPU reference's BLAS threads (numpy's matmuls).
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: The GpuSession attributes that say which path it took on this device.
SESSION_PATH = ("launch_loop", "host_edges", "specialized_kernels", "half_weights")

#: Record entries left out of the fingerprint: they say how init went, not what is timed.
NOT_FINGERPRINTED = frozenset(
    {
        "gpu.session.program_from_cache",
        "gpu.copy_helpers.why",
        "gpu.session.launch_loop_build",
        "gpu.build.MAX_JOBS",
        "gpu.build.MAX_WORKERS",
        "gpu.build.WORKER_TIMEOUT_S",
        # the first inference's path where the own program was built cold: the timed runs
        # wait for the own program (tools/benchmark.py)
        "gpu.build.FIRST_TIER",
        "gpu.session.first_tier_units",
        # what the rule did to a model is the session's gpu.session.below_min_work
        "gpu.placement.MIN_WORK",
        # the threads it chose are the session's gpu.session.cpu_threads, a condition
        "gpu.cpu_threads.MIN_POOL_TO_TRY",
        "gpu.session.cpu_threads",
    }
)
#: Counts that depend on the model: the fingerprint keeps only whether there were any, so a
#: new version of a model (other kernels) stays comparable with its lineage.
FINGERPRINTED_AS_PRESENCE = frozenset(
    {
        "gpu.session.specialized_kernels",
        "gpu.session.persistent_kernels",
        "gpu.session.below_min_work",
    }
)

#: Constants added after results were stored: fingerprinted only when not None, so that a
#: result of a session with one off is comparable with those from before it existed.
FINGERPRINTED_WHEN_SET = frozenset({"gpu.persistent.MAX_RUN_BYTES"})
#: Constants and passes recorded after results were stored that had this value all along:
#: fingerprinted only when they differ from it (the passes: on, every fusion applied).
FINGERPRINTED_WHEN_CHANGED = {
    "gpu.reduce.WIDE_FROM": 256,
    "gpu.fold": True,
    "gpu.fuse": True,
    "gpu.fusions_off": [],
    "gpu.concat_views": True,
    "gpu.hot_path": True,
    "gpu.pinned": True,
}

#: Switches deleted with the variants they chose (docs/notebook/29-2026-12-03-deleted-variants.md):
#: no longer recorded, but a GPU record's fingerprint still hashes each as the value the
#: code now always has, so that results from before the deletion stay comparable.
RETIRED = {
    "gpu.persistent.LAYER_STAMPS": False,
    "gpu.persistent.BARRIER_RELEASE_ACQUIRE": True,
    "gpu.specialize.ARENA": True,
    "gpu.host_copy.STREAMING": False,
}

#: Each constant's value when this module first read it: later differences are overrides.
_SHIPPED: dict[tuple[str, str], Any] = {}


def _entry(value: Any, source: str) -> dict[str, Any]:
    return {"value": _plain(value), "source": source}


def _plain(value: Any) -> Any:
    """JSON-able, stable across processes (tuples as lists, numpy scalars as Python's)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def _constant(module: str, attr: str) -> tuple[Any, str] | None:
    """A module constant and whether it is as shipped; None when the module is absent
    (the GPU extra is not installed)."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("delegate_runtime"):
            raise  # a module of ours moved: the record must not silently lose it
        return None
    value = getattr(mod, attr)
    shipped = _SHIPPED.setdefault((module, attr), value)
    return value, "default" if value == shipped else "override"


def gpu_switches(switches: Switches | None = None) -> dict[str, dict[str, Any]]:
    """The GPU delegate's switches and tuning constants, each with its source: those of
    `switches` (None: the defaults and the environment's now) and the kernels' layout."""
    switches = Switches.from_env() if switches is None else switches
    out: dict[str, dict[str, Any]] = switches.record()
    for name, (module, attr) in LAYOUT.items():
        found = _constant(module, attr)
        if found is not None:
            out[name] = _entry(*found)
    return out


def _copy_helpers(out: dict[str, dict[str, Any]], switches: Switches) -> None:
    """The helper threads the input copy really gets on this host (host_copy's plan)."""
    try:
        from ..gpu.opencl import host_copy
    except ImportError:
        return
    plan = host_copy.helper_plan(switches)
    out["gpu.copy_helpers"] = _entry(plan["helpers"], plan["source"])
    out["gpu.copy_helpers.why"] = _entry(plan["why"], "session")


def session_path(session: Any) -> dict[str, dict[str, Any]]:
    """What a GPU session did on this device (launch loop, host edges, persistent runs)."""
    out = {f"gpu.session.{a}": _entry(getattr(session, a), "session") for a in SESSION_PATH}
    launches, kernels = getattr(session, "persistent_runs", (0, 0)) or (0, 0)
    out["gpu.session.persistent_kernels"] = _entry(kernels, "session")
    out["gpu.session.profiling"] = _entry(bool(session.options.profiling), "session")
    out["gpu.session.program_from_cache"] = _entry(session.program_from_cache, "session")
    first = getattr(session, "first_tier_units", 0)
    if first:  # only where the first inference ran on the generic kernels (first_tier.py)
        out["gpu.session.first_tier_units"] = _entry(first, "session")
    build = getattr(session, "launch_loop_build", "")
    if build:  # the C loop's compiler and library (which loop ran is fingerprinted above)
        out["gpu.session.launch_loop_build"] = _entry(build, "session")
    moved = getattr(getattr(session, "delegation", None), "nodes_below_min_work", 0)
    if moved:  # only where the placement rule moved nodes: other records stay as they were
        out["gpu.session.below_min_work"] = _entry(moved, "session")
    threads = [run.threads for run in getattr(session, "cpu_runs", ()) if run.threads]
    if threads:  # LiteRT's threads per CPU run (cpu_threads.py)
        out["gpu.session.cpu_threads"] = _entry(threads, "session")
    fallback = getattr(session, "cpu_fallback", "")
    if fallback:  # only where nodes ran on the CPU: fully delegated records stay as they were
        out["gpu.session.cpu_fallback"] = _entry(fallback, "session")
    return out


def cpu_switches() -> dict[str, dict[str, Any]]:
    """The CPU reference's switches: the BLAS thread variables numpy's matmuls obey."""
    out = {}
    for var in BLAS_THREAD_VARS:
        raw = os.environ.get(var, "").strip()
        out[f"cpu.{var}"] = _entry(raw, "env") if raw else _entry("", "default")
    return out


def configuration(options: Mapping[str, Any], session: Any = None) -> dict[str, dict[str, Any]]:
    """The whole record for a run with `options` (name -> value, the caller's) on
    `session` (a GpuSession, or the CPU interpreter); a GPU session's switches are those
    it was made with."""
    record = {f"option.{k}": _entry(v, "option") for k, v in sorted(options.items())}
    record |= cpu_switches()
    if hasattr(session, "launch_loop"):  # the GPU delegate (its partitions may be empty)
        switches = getattr(session, "switches", None) or Switches.from_env()
        record |= gpu_switches(switches)
        _copy_helpers(record, switches)
        record |= session_path(session)
    return record


def fingerprint(record: Mapping[str, Mapping[str, Any]]) -> str:
    """16 hex digits of the record's values (sources, init-only entries and later
    constants still off left out, the model's kernel counts as whether there were any,
    retired switches as their one value where their module's constants are recorded)."""
    values = {
        k: bool(v.get("value")) if k in FINGERPRINTED_AS_PRESENCE else v.get("value")
        for k, v in record.items()
        if k not in NOT_FINGERPRINTED
        and not (k in FINGERPRINTED_WHEN_SET and v.get("value") is None)
        and not (
            k in FINGERPRINTED_WHEN_CHANGED and v.get("value") == FINGERPRINTED_WHEN_CHANGED[k]
        )
    }
    modules = {k.rsplit(".", 1)[0] for k in record}
    retired = {k: v for k, v in RETIRED.items() if k.rsplit(".", 1)[0] in modules}
    values = retired | values  # a stored record's own value of one wins
    text = json.dumps(values, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
