"""Every node of LiteRT's shipped gpu_compatibility.bin (../shared/reference), read as
LiteRT reads it: a flatbuffer walker written here from database.fbs alone (no shared code
with orchestrator.allowlist.devicedb) gives the same tree as our reader, and each EQUAL
node's items are in the byte order that flatbuffers' `LookupByKey` (devicedb.cc's `Find`)
relies on, so our binary search and LiteRT's find the same edge."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from orchestrator.allowlist import devicedb, reader
from orchestrator.allowlist.tree import EQUAL, Node
from tests.conftest import require

SHIPPED = Path(__file__).resolve().parents[3] / "shared" / "reference" / "gpu_compatibility.bin"
#: database.fbs: DeviceDatabase {root}, DeviceDecisionTreeNode {variable, comparison,
#: items}, DeviceDecisionTreeEdge {value, children, derived_properties},
#: DerivedProperty {variable, value}; comparison is a byte, EQUAL = 0 by default.


def _u32(buf: bytes, at: int) -> int:
    return struct.unpack_from("<I", buf, at)[0]


def _field(buf: bytes, table: int, field_id: int) -> int | None:
    """The absolute position of a table's field, or None when absent (vtable slot 0)."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    vt_size = struct.unpack_from("<H", buf, vtable)[0]
    slot = 4 + 2 * field_id
    if slot >= vt_size:
        return None
    off = struct.unpack_from("<H", buf, vtable + slot)[0]
    return table + off if off else None


def _string(buf: bytes, table: int, field_id: int) -> str | None:
    at = _field(buf, table, field_id)
    if at is None:
        return None
    start = at + _u32(buf, at)
    return buf[start + 4 : start + 4 + _u32(buf, start)].decode("utf-8")


def _tables(buf: bytes, table: int, field_id: int) -> list[int]:
    at = _field(buf, table, field_id)
    if at is None:
        return []
    vec = at + _u32(buf, at)
    return [vec + 4 + 4 * i + _u32(buf, vec + 4 + 4 * i) for i in range(_u32(buf, vec))]


def _plain(buf: bytes, node: int) -> tuple:
    at = _field(buf, node, 1)
    comparison = struct.unpack_from("<b", buf, at)[0] if at is not None else 0
    items = [
        (
            _string(buf, e, 0),
            [_plain(buf, c) for c in _tables(buf, e, 1)],
            [(_string(buf, p, 0), _string(buf, p, 1)) for p in _tables(buf, e, 2)],
        )
        for e in _tables(buf, node, 2)
    ]
    return (_string(buf, node, 0), comparison, items)


def _ours(node: Node) -> tuple:
    items = [
        (e.value, [_ours(c) for c in e.children], [tuple(p) for p in e.derived_properties])
        for e in node.items
    ]
    return (node.variable, node.comparison, items)


@pytest.fixture(scope="module")
def shipped() -> bytes:
    require(SHIPPED.exists(), f"LiteRT's gpu_compatibility.bin at {SHIPPED}")
    return SHIPPED.read_bytes()


def _nodes(roots: list[Node]) -> list[Node]:
    out, todo = [], list(roots)
    while todo:
        n = todo.pop()
        out.append(n)
        todo += [c for e in n.items for c in e.children]
    return out


def test_our_reader_reads_every_node_as_the_schema_says(shipped: bytes) -> None:
    root = _u32(shipped, 0)
    want = [_plain(shipped, n) for n in _tables(shipped, root, 0)]
    got = [_ours(n) for n in devicedb.decode(shipped)]
    assert got == want
    assert len(_nodes(devicedb.decode(shipped))) > 1000  # the whole list, not a prefix


def test_equal_nodes_are_sorted_as_lookup_by_key_needs(shipped: bytes) -> None:
    for node in _nodes(devicedb.decode(shipped)):
        if node.comparison == EQUAL:
            keys = [e.value.encode() for e in node.items]
            assert keys == sorted(keys), node.variable


def test_every_equal_edge_is_found_by_the_walk(shipped: bytes) -> None:
    """devicedb.cc's `Find` on each EQUAL edge's own value returns that edge."""
    for node in _nodes(devicedb.decode(shipped)):
        if node.comparison == EQUAL:
            for edge in node.items:
                assert reader.find(node, edge.value) == [edge]
