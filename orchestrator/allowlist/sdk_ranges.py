"""MINIMUM/MAXIMUM ranges on `tflite.android_sdk_version`, where the measurements support
them, as LiteRT's shipped list writes them (hundreds of `MINIMUM "29"` and `MAXIMUM "28"`
nodes): a phone that takes an OS update keeps an answer.

The measured SDKs of one path, in order, form runs of equal decisions. A run becomes:
- the newest run, SUPPORTED: `MINIMUM first` (newer SDKs inherit it);
- the oldest run, UNSUPPORTED: `MAXIMUM last` (older SDKs inherit it);
- any other run of two or more: `MINIMUM first` → `MAXIMUM last` (SDKs between share it).
UNKNOWN runs give no range, and a range never crosses an SDK with another decision. The
ranges come before the path's EQUAL node, so a measured SDK ends on its own edge.

devicedb.cc compares strings (`"10" < "9"`): ranges are written only when every SDK of the
path has two digits (10-99), where string order is numeric order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .facts import SDK
from .rules import SUPPORTED, UNKNOWN, UNSUPPORTED, Decision
from .tree import MAXIMUM, MINIMUM, Edge, Node

Properties = Callable[[Decision], list[tuple[str, str]]]


def _two_digits(value: str) -> bool:
    return len(value) == 2 and value.isdigit() and value[0] != "0"


def _runs(
    decided: Mapping[str, tuple[Decision, bool]], properties: Properties
) -> list[tuple[list[str], Decision, bool]]:
    """Consecutive measured SDKs with equal properties: (values, decision, any by driver)."""
    runs: list[tuple[list[str], Decision, bool]] = []
    last_props = None
    for value in sorted(decided, key=int):
        decision, by_driver = decided[value]
        props = properties(decision)
        if runs and props == last_props:
            values, d, driver = runs[-1]
            runs[-1] = (values + [value], d, driver or by_driver)
        else:
            runs.append(([value], decision, by_driver))
        last_props = props
    return runs


def range_nodes(
    decided: Mapping[str, tuple[Decision, bool]],
    properties: Properties,
    driver_reset: Callable[[], Node],
) -> list[Node]:
    """Range nodes for one SDK node's decided edges (value -> (decision, decided by
    measured drivers)); empty when the values are not all two-digit numbers."""
    if not decided or not all(_two_digits(v) for v in decided):
        return []
    runs = _runs(decided, properties)
    out = []
    for i, (values, decision, by_driver) in enumerate(runs):
        if decision.status == UNKNOWN:
            continue
        # A range decided by measured drivers still sends other drivers to UNKNOWN.
        children = [driver_reset()] if by_driver else []
        props = properties(decision)
        if i == len(runs) - 1 and decision.status == SUPPORTED:
            out.append(Node(SDK, MINIMUM, [Edge(values[0], children, props)]))
        elif i == 0 and decision.status == UNSUPPORTED:
            out.append(Node(SDK, MAXIMUM, [Edge(values[-1], children, props)]))
        elif len(values) > 1:
            upper = Node(SDK, MAXIMUM, [Edge(values[-1], children, props)])
            out.append(Node(SDK, MINIMUM, [Edge(values[0], [upper])]))
    return out
