"""How a stored figure was measured, for people: a result's `measurement` record read for
tables and detail views (the CLI's `results`, the dashboard).

The record (results.measurement) holds `config` ({switch: {"value", "source"}}), `timing`
({"path": shipped|profiled, ...}), `conditions` (driver, clocks, host load, ...) and
`uncertainty` (median, 95% interval, trials); `results.config_fingerprint` digests the
configuration. Results from before the record have `{}` and "": every reader here
returns None or an empty list for what is missing, never raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: Hex digits of a fingerprint shown in tables (the full one is 16).
SHORT_FINGERPRINT = 8


def _part(measurement: Any, key: str) -> Mapping[str, Any]:
    value = measurement.get(key) if isinstance(measurement, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def short_fingerprint(fingerprint: str | None) -> str | None:
    """The fingerprint's first digits; None when the result has none."""
    return fingerprint[:SHORT_FINGERPRINT] if fingerprint else None


def timing_path(measurement: Any) -> str | None:
    """Which path the figures timed (`shipped` or `profiled`); None when unknown."""
    path = _part(measurement, "timing").get("path")
    return str(path) if path else None


def median_ci_ms(measurement: Any) -> str | None:
    """`median ± half-width of the 95% interval` in ms ("0.268 ± 0.0025"), marked
    `(unstable)` when the trials disagreed; None without a median."""
    u = _part(measurement, "uncertainty")
    median = u.get("median_us")
    if not isinstance(median, int | float):
        return None
    text = f"{median / 1000:.3f}"
    ci = u.get("ci95_us")
    if (
        isinstance(ci, list | tuple)
        and len(ci) == 2
        and all(isinstance(x, int | float) for x in ci)
    ):
        text += f" ± {(ci[1] - ci[0]) / 2000:.2g}"
    return text + (" (unstable)" if u.get("stable") is False else "")


def config_rows(measurement: Any) -> list[dict[str, Any]]:
    """Every switch of the configuration record, by name: switch, value, source."""
    rows = []
    for name, entry in sorted(_part(measurement, "config").items()):
        known = entry if isinstance(entry, Mapping) else {"value": entry}
        rows.append(
            {"switch": name, "value": known.get("value"), "source": known.get("source") or "?"}
        )
    return rows


def flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record as `a.b` keys (lists kept whole), for one-line readings."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= flat(value, f"{name}.")
        else:
            out[name] = value
    return out


def conditions(measurement: Any) -> dict[str, Any]:
    """The conditions the figures were measured under, flat (`clocks_mhz.sm`)."""
    return flat(_part(measurement, "conditions"))


def uncertainty(measurement: Any) -> dict[str, Any]:
    """The record's uncertainty (median, interval, trials, warm-up, stable), as stored."""
    return dict(_part(measurement, "uncertainty"))


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def describe(fingerprint: str, measurement: Any) -> list[str]:
    """Lines for people: the fingerprint, the timing path, then each switch with its value
    and source (aligned); one line saying so when the result has no record."""
    rows = config_rows(measurement)
    timing = _part(measurement, "timing")
    if not rows and not fingerprint and not timing:
        return ["no configuration record (measured before results kept one)"]
    lines = [f"configuration {fingerprint or '(no fingerprint)'}"]
    if timing:
        lines.append("  timing: " + ", ".join(f"{k} {_value(v)}" for k, v in timing.items()))
    width = max((len(r["switch"]) for r in rows), default=0)
    lines += [f"  {r['switch'].ljust(width)} = {_value(r['value'])}  ({r['source']})" for r in rows]
    return lines if rows else [*lines, "  no switches recorded (the tool keeps none)"]
