"""An allowlist as TFLite's compatibility database: the tree, its flatbuffer, flatc's JSON.

The tree tests the variables in `facts.ORDER` (runtime ones first, the driver last); each
device's decision sits on the edge where its own path ends, as `tflite.gpu.status` plus our
best options. Three rules make the walk (every root, every matching edge, later properties
win) return exactly each listed device's decision:

- sibling nodes are ordered latest variable first, so that a device following another
  device's shorter path (one that skips a variable it has) does so before its own;
- at the edge where the runtime variables end, a path that continues (to the driver) also
  gets the most conservative decision of the devices below: a stock app, which passes no
  driver, still gets an answer, and an app that passes it gets the exact one;
- under such an edge, a catch-all on the driver (MINIMUM "": every value) first resets the
  decision to UNKNOWN, so a driver version that was never measured does not inherit the
  measured drivers' decision.

Unknown devices are left out unless the walk would give them a decision; then they are
listed as `UNKNOWN`. The Android SDK also gets ranges where the measurements support them
(`sdk_ranges`), as the shipped list has: newer SDKs inherit a newest supported run,
older ones an oldest unsupported run, and SDKs between two measured ones with the same
decision share it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import flatbuffers
from flatbuffers import encode as fb_encode
from flatbuffers import number_types, packer, table

from .facts import DRIVER, ORDER, RUNTIME_VARIABLES, SDK, signature
from .reader import status
from .rules import NOT_MEASURED, SUPPORTED, UNKNOWN, UNSUPPORTED, Decision, merge
from .sdk_ranges import Properties, range_nodes
from .tree import (
    COMPARISON_NAMES,
    ENABLE_QUANT,
    EQUAL,
    GPU,
    MINIMUM,
    PRECISION,
    REASON,
    STATUS,
    STATUS_SUPPORTED,
    STATUS_UNKNOWN,
    STATUS_UNSUPPORTED,
    Edge,
    Node,
    config_variable,
    reason_variable,
    status_variable,
)

Signature = tuple[tuple[str, str], ...]
_TFLITE_STATUS = {
    SUPPORTED: STATUS_SUPPORTED,
    UNSUPPORTED: STATUS_UNSUPPORTED,
    UNKNOWN: STATUS_UNKNOWN,
}


def properties(d: Decision, delegate: str = GPU) -> list[tuple[str, str]]:
    """The derived properties of a decision; every key is always written, so a device that
    passed another device's edge first keeps none of its options. Another delegate's list
    says its status, best configuration and reason (`tree.status_variable` and kin)."""
    ok = d.status == SUPPORTED
    if delegate != GPU:
        return [
            (status_variable(delegate), _TFLITE_STATUS[d.status]),
            (config_variable(delegate), d.config if ok else "none"),
            (reason_variable(delegate), (d.code or "none") if d.status == UNSUPPORTED else "none"),
        ]
    quant = ("true" if d.enable_quant else "false") if ok else "none"
    return [
        (STATUS, _TFLITE_STATUS[d.status]),
        (PRECISION, d.precision if ok else "none"),
        (ENABLE_QUANT, quant),
        (REASON, (d.code or "none") if d.status == UNSUPPORTED else "none"),
    ]


# -- building the tree ---------------------------------------------------------------------


@dataclass
class _TEdge:
    terminal: Decision | None = None
    fallback: list[Decision] = field(default_factory=list)
    children: dict[str, _TNode] = field(default_factory=dict)


@dataclass
class _TNode:
    edges: dict[str, _TEdge] = field(default_factory=dict)


def _insert(roots: dict[str, _TNode], sig: Signature, decision: Decision) -> None:
    runtime = [i for i, (v, _) in enumerate(sig) if v in RUNTIME_VARIABLES]
    runtime_end = runtime[-1] if runtime else -1
    children = roots
    for i, (var, value) in enumerate(sig):
        edge = children.setdefault(var, _TNode()).edges.setdefault(value, _TEdge())
        if i == len(sig) - 1:
            edge.terminal = decision
        elif i == runtime_end:
            edge.fallback.append(decision)
        children = edge.children


#: What an app that passes a driver version nobody measured gets.
UNMEASURED_DRIVER = Decision(UNKNOWN, NOT_MEASURED, "driver version not measured")


def unmeasured_driver_reset(props: Properties = properties) -> Node:
    """A catch-all on the driver: MINIMUM "" matches every value (`value >= ""`)."""
    return Node(DRIVER, MINIMUM, [Edge("", [], props(UNMEASURED_DRIVER))])


def _emit(children: Mapping[str, _TNode], sdk_ranges: bool, props: Properties) -> list[Node]:
    out = []
    for var in sorted(children, key=ORDER.index, reverse=True):
        tn = children[var]
        items = []
        decided: dict[str, tuple[Decision, bool]] = {}
        for value in sorted(tn.edges, key=lambda s: s.encode("utf-8")):
            te = tn.edges[value]
            by_driver = te.terminal is None and bool(te.fallback)
            d = te.terminal or (merge(te.fallback, "driver not given") if by_driver else None)
            nodes = _emit(te.children, sdk_ranges, props)
            if by_driver:
                nodes.insert(0, unmeasured_driver_reset(props))
            if d is not None:
                decided[value] = (d, by_driver)
            items.append(Edge(value, nodes, props(d) if d else []))
        if sdk_ranges and var == SDK:
            out += range_nodes(decided, props, partial(unmeasured_driver_reset, props))
        out.append(Node(var, EQUAL, items))
    return out


def build_tree(
    entries: Iterable[tuple[Mapping[str, str], Decision]],
    sdk_ranges: bool = True,
    delegate: str = GPU,
) -> list[Node]:
    """The tree's roots for (canonical variables, decision) pairs, one per fact signature;
    `sdk_ranges`: MINIMUM/MAXIMUM ranges on the Android SDK where the decisions allow;
    `delegate`: whose properties the edges carry (`properties`)."""
    props: Properties = partial(properties, delegate=delegate)
    variable = status_variable(delegate)
    items = [(signature(v), d) for v, d in entries]
    listed = [(s, d) for s, d in items if s and d.status != UNKNOWN]
    pending = [(s, d) for s, d in items if s and d.status == UNKNOWN]
    for _ in range(len(pending) + 1):
        trie: dict[str, _TNode] = {}
        for s, d in listed:
            _insert(trie, s, d)
        roots = _emit(trie, sdk_ranges, props)
        wrong = [(s, d) for s, d in pending if status(roots, dict(s), variable) != UNKNOWN]
        if not wrong:
            return roots
        listed += wrong
        pending = [p for p in pending if p not in wrong]
    raise AssertionError("unreachable: every unknown device is listed by now")


# -- flatbuffer ----------------------------------------------------------------------------


def encode(roots: Sequence[Node]) -> bytes:
    """The tree as a `DeviceDatabase` flatbuffer (database.fbs; no file identifier)."""
    b = flatbuffers.Builder(1024)

    def vector(offsets: list[int]) -> int:
        b.StartVector(4, len(offsets), 4)
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    def prop(name: str, value: str) -> int:
        var, val = b.CreateSharedString(name), b.CreateSharedString(value)
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, var, 0)
        b.PrependUOffsetTRelativeSlot(1, val, 0)
        return b.EndObject()

    def edge(e: Edge) -> int:
        value = b.CreateSharedString(e.value)
        children = vector([node(n) for n in e.children]) if e.children else 0
        props = vector([prop(k, v) for k, v in e.derived_properties]) if e.derived_properties else 0
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, value, 0)
        if children:
            b.PrependUOffsetTRelativeSlot(1, children, 0)
        if props:
            b.PrependUOffsetTRelativeSlot(2, props, 0)
        return b.EndObject()

    def node(n: Node) -> int:
        var = b.CreateSharedString(n.variable) if n.variable is not None else 0
        items = vector([edge(e) for e in n.items])
        b.StartObject(3)
        if var:
            b.PrependUOffsetTRelativeSlot(0, var, 0)
        b.PrependInt8Slot(1, n.comparison, EQUAL)
        b.PrependUOffsetTRelativeSlot(2, items, 0)
        return b.EndObject()

    root = vector([node(n) for n in roots])
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, root, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def _offset(t: table.Table, field_id: int) -> int:
    return t.Offset(4 + 2 * field_id)


def _string(t: table.Table, field_id: int) -> str | None:
    o = _offset(t, field_id)
    return t.String(o + t.Pos).decode("utf-8") if o else None


def _tables(t: table.Table, field_id: int) -> list[table.Table]:
    o = _offset(t, field_id)
    if not o:
        return []
    start = t.Vector(o)
    return [table.Table(t.Bytes, t.Indirect(start + 4 * i)) for i in range(t.VectorLen(o))]


def _node(t: table.Table) -> Node:
    o = _offset(t, 1)
    comparison = t.Get(number_types.Int8Flags, o + t.Pos) if o else EQUAL
    return Node(_string(t, 0), comparison, [_edge(e) for e in _tables(t, 2)])


def _edge(t: table.Table) -> Edge:
    props = [(_string(p, 0) or "", _string(p, 1) or "") for p in _tables(t, 2)]
    return Edge(_string(t, 0) or "", [_node(n) for n in _tables(t, 1)], props)


def decode(data: bytes) -> list[Node]:
    """The roots of a `DeviceDatabase` flatbuffer; ValueError when it is malformed."""
    try:
        buf = bytearray(data)
        root = table.Table(buf, fb_encode.Get(packer.uoffset, buf, 0))
        return [_node(n) for n in _tables(root, 0)]
    except (IndexError, struct.error, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"not a DeviceDatabase flatbuffer: {exc}") from exc


# -- flatc's JSON --------------------------------------------------------------------------


def _node_json(n: Node) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if n.variable is not None:
        d["variable"] = n.variable
    if n.comparison != EQUAL:
        d["comparison"] = COMPARISON_NAMES.get(n.comparison, n.comparison)
    d["items"] = [_edge_json(e) for e in n.items]
    return d


def _edge_json(e: Edge) -> dict[str, Any]:
    d: dict[str, Any] = {"value": e.value}
    if e.children:
        d["children"] = [_node_json(n) for n in e.children]
    if e.derived_properties:
        d["derived_properties"] = [{"variable": k, "value": v} for k, v in e.derived_properties]
    return d


def to_json(roots: Sequence[Node]) -> str:
    """The tree as `flatc -t --strict-json database.fbs -- list.bin` prints it."""
    return json.dumps({"root": [_node_json(n) for n in roots]}, indent=2) + "\n"


def from_json(text: str) -> list[Node]:
    """Roots from flatc-style JSON (comparison by name or number)."""
    names = {v: k for k, v in COMPARISON_NAMES.items()}

    def node(d: Mapping[str, Any]) -> Node:
        comp = d.get("comparison", EQUAL)
        return Node(
            d.get("variable"),
            names[comp] if isinstance(comp, str) else int(comp),
            [edge(e) for e in d.get("items", [])],
        )

    def edge(d: Mapping[str, Any]) -> Edge:
        return Edge(
            d["value"],
            [node(n) for n in d.get("children", [])],
            [(p["variable"], p["value"]) for p in d.get("derived_properties", [])],
        )

    return [node(n) for n in json.loads(text).get("root", [])]
