"""Partitioning as TFLite's GPU delegate does it, and the lines it prints (REFERENCE.md)."""

from __future__ import annotations

import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu.partition import DelegationSummary, Unsupported, partition
from delegate_runtime.gpu.support import SupportOptions

SHAPE = (1, 4, 4, 3)


def chain(ops: str):
    """A chain of unary-ish nodes: 'R' = RELU (supported), 'C' = CEIL (not supported),
    'S' = ROUND (not supported, another op name)
    (LiteRT's GPU delegate parses neither)."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE)
    for i, kind in enumerate(ops):
        y = g.tensor(f"t{i}", SHAPE)
        if kind == "R":
            g.op("RELU", [x], [y])
        elif kind == "C":
            g.op("CEIL", [x], [y])
        else:
            g.op("ROUND", [x], [y])
        x = y
    g.output(x)
    return read_model(b.build()).main


def run(ops: str, max_partitions: int = 1) -> DelegationSummary:
    return partition(chain(ops), SupportOptions(), max_partitions)


def test_fully_supported_graph_is_one_partition():
    d = run("RRRR")
    assert d.partitions == [[0, 1, 2, 3]]
    assert d.fully_delegated and d.delegated_nodes == d.total_nodes == 4
    assert d.unsupported == [] and d.dropped_partitions == 0
    assert d.messages() == [
        "Replacing 4 out of 4 node(s) with delegate (TfLiteGpuDelegateV2) node, "
        "yielding 1 partitions for the whole graph."
    ]


def test_unsupported_op_in_the_middle_default_keeps_one_partition():
    d = run("RRCR")
    assert d.partitions == [[0, 1]]
    assert d.delegated_nodes == 2 and d.dropped_partitions == 1
    assert d.unsupported == [Unsupported(2, "CEIL", "Operation is not supported.")]
    assert d.messages() == [
        "Following operations are not supported by GPU delegate:",
        "CEIL: Operation is not supported.",
        "2 operations will run on the GPU, and the remaining 2 operations will run on the CPU.",
        "Replacing 2 out of 4 node(s) with delegate (TfLiteGpuDelegateV2) node, "
        "yielding 2 partitions for the whole graph.",
    ]


def test_reference_md_example():
    """REFERENCE.md: 3 on the GPU, CEIL on the CPU."""
    d = run("RRRC")
    assert d.messages()[:3] == [
        "Following operations are not supported by GPU delegate:",
        "CEIL: Operation is not supported.",
        "3 operations will run on the GPU, and the remaining 1 operations will run on the CPU.",
    ]


def test_max_partitions_keeps_the_largest():
    d = run("RCRRR")
    assert d.partitions == [[2, 3, 4]]
    assert d.delegated_nodes == 3 and d.dropped_partitions == 1


@pytest.mark.parametrize(
    "limit,partitions",
    [
        (1, [[4, 5, 6]]),
        (2, [[0, 1], [4, 5, 6]]),
        (3, [[0, 1], [4, 5, 6]]),
        (0, [[0, 1], [4, 5, 6]]),
    ],
)
def test_max_delegated_partitions(limit, partitions):
    d = run("RRCSRRR", limit)
    assert d.partitions == partitions
    assert d.delegated_nodes == sum(map(len, partitions))


def test_three_runs_with_a_limit_of_two_keep_the_two_largest_in_order():
    d = run("RCRRRCRR", 2)
    assert d.partitions == [[2, 3, 4], [6, 7]]
    assert d.dropped_partitions == 1
    lines = d.messages()
    assert (
        "5 operations will run on the GPU, and the remaining 3 operations will run on the CPU."
        in lines
    )
    # CPU (the dropped RELU with CEIL), GPU, CPU, GPU: TFLite counts every node subset
    assert lines[-1].endswith("yielding 4 partitions for the whole graph.")


def test_nothing_supported():
    d = run("CCS")
    assert d.partitions == [] and d.delegated_nodes == 0 and not d.fully_delegated
    assert d.messages() == [
        "Following operations are not supported by GPU delegate:",
        "CEIL: Operation is not supported.",
        "ROUND: Operation is not supported.",
        "No operations will run on the GPU, and all 3 operations will run on the CPU.",
    ]


def test_each_unsupported_op_and_reason_is_listed_once():
    d = run("CRCRSR", 0)
    assert [u.node for u in d.unsupported] == [0, 2, 4]
    lines = d.messages()
    assert lines.count("CEIL: Operation is not supported.") == 1
    assert lines.count("ROUND: Operation is not supported.") == 1


def test_to_dict_carries_the_facts():
    d = run("RRCR")
    assert d.to_dict() == {
        "total_nodes": 4,
        "delegated_nodes": 2,
        "partitions": 1,
        "partition_nodes": [2],
        "fully_delegated": False,
        "unsupported": [{"node": 2, "op": "CEIL", "reason": "Operation is not supported."}],
        "dropped_partitions": 1,
        "below_min_work": {"nodes": 0, "partitions": 0, "min_work": 0},
    }


def test_empty_graph_is_not_fully_delegated():
    assert not DelegationSummary(0, 0, []).fully_delegated
