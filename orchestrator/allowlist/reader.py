"""Walks a compatibility list with a device's variables exactly as TFLite's devicedb.cc.

Every root is followed; a node whose variable the device lacks is skipped; EQUAL finds its
edge by binary search over the (sorted) items, as flatbuffers' `LookupByKey`; MINIMUM
takes every edge with `value >= edge`, any other comparison every edge with
`value <= edge` (byte-wise string comparison); each matching edge's derived properties
are applied in order (later ones overwrite), then its children are followed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .canonical import canonical_value_with_key
from .rules import SUPPORTED, UNKNOWN, UNSUPPORTED
from .tree import (
    EQUAL,
    GPU,
    MINIMUM,
    STATUS,
    STATUS_SUPPORTED,
    STATUS_UNSUPPORTED,
    Edge,
    Node,
)


def _key(text: str) -> bytes:
    return text.encode("utf-8")


def _lookup(items: Sequence[Edge], value: str) -> Edge | None:
    """flatbuffers' LookupByKey: a binary search (strcmp) that assumes sorted items."""
    want = _key(value)
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi) // 2
        got = _key(items[mid].value)
        if got == want:
            return items[mid]
        if got < want:
            lo = mid + 1
        else:
            hi = mid
    return None


def find(node: Node, value: str) -> list[Edge]:
    """The edges of `node` that a device value matches."""
    if node.comparison == EQUAL:
        hit = _lookup(node.items, value)
        return [hit] if hit is not None else []
    v = _key(value)
    if node.comparison == MINIMUM:
        return [e for e in node.items if v >= _key(e.value)]
    return [e for e in node.items if v <= _key(e.value)]


def follow(node: Node, variables: dict[str, str]) -> None:
    """TFLite's `Follow`: apply matching edges' properties, then their children."""
    if node.variable is None or node.variable not in variables:
        return
    for edge in find(node, variables[node.variable]):
        for name, value in edge.derived_properties:
            variables[name] = value
        for child in edge.children:
            follow(child, variables)


def evaluate(roots: Sequence[Node], variables: Mapping[str, str]) -> dict[str, str]:
    """The variables after the walk (inputs canonicalised first, with their keys, as
    GetStatus does)."""
    out = {k: canonical_value_with_key(k, v) for k, v in variables.items()}
    for root in roots:
        follow(root, out)
    return out


def status(roots: Sequence[Node], variables: Mapping[str, str], variable: str = STATUS) -> str:
    """supported / unsupported / unknown for a device's variables (`variable`: the status
    property read: a per-delegate list's `tree.status_variable`)."""
    got = evaluate(roots, variables).get(variable, "")
    if got == STATUS_SUPPORTED:
        return SUPPORTED
    if got == STATUS_UNSUPPORTED:
        return UNSUPPORTED
    return UNKNOWN


_DELEGATE_STATUS = re.compile(r"devicefarm\.([a-z0-9_]+)\.status")


def delegates(roots: Sequence[Node]) -> set[str]:
    """The delegates whose status a list holds: `gpu` for `tflite.gpu.status`, D for a
    per-delegate list's `devicefarm.D.status`."""
    found: set[str] = set()
    nodes = list(roots)
    while nodes:
        node = nodes.pop()
        for edge in node.items:
            nodes.extend(edge.children)
            for name, _ in edge.derived_properties:
                hit = _DELEGATE_STATUS.fullmatch(name)
                if name == STATUS or hit:
                    found.add(hit.group(1) if hit else GPU)
    return found
