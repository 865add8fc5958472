"""The op profile's count of nodes matches the delegate's `Replacing N out of N node(s)`:
a node that ran as no kernel of its own (a RESHAPE the GPU delegate makes a view) is named,
not silently missing; a node fused into another's kernel is not counted twice."""

from __future__ import annotations

from types import SimpleNamespace

from delegate_runtime.tools.profile import OpProfiler


def gpu_session(ops: list[str], timed: dict[int, int], fused: dict[int, tuple[int, ...]]):
    tensors = [SimpleNamespace(name=f"t{i}") for i in range(len(ops))]
    operators = [SimpleNamespace(op=op, outputs=[i]) for i, op in enumerate(ops)]
    model = SimpleNamespace(main=SimpleNamespace(operators=operators, tensors=tensors))
    return SimpleNamespace(
        model=model, op_profile_ns=lambda: dict(timed), fused_kernels=lambda: dict(fused)
    )


def profile(session) -> str:
    p = OpProfiler()
    p.begin_run()
    p.collect_session(session)
    p.end_run()
    return p.format().rstrip().splitlines()[-1]


def test_a_node_without_a_kernel_is_named_in_the_count() -> None:
    session = gpu_session(["CONV_2D", "RESHAPE", "SOFTMAX"], {0: 5000, 2: 1000}, {})
    assert profile(session) == "2 nodes observed; 1 more ran as no kernel of its own: RESHAPE #1"


def test_fused_nodes_are_not_reported_missing() -> None:
    session = gpu_session(["CONV_2D", "ADD", "SOFTMAX"], {0: 5000, 2: 1000}, {0: (0, 1)})
    assert profile(session) == "2 nodes observed"
