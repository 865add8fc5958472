"""The simulated benchmark_model's op profile with the GPU delegate is the real tool's:
each delegated partition is one node of type `TfLiteGpuDelegateV2` (the registration's
custom_name, GetTFLiteOpName), appended to the graph (its index: the nodes before it),
named by its outputs (profile_summarizer.cc: `[a, b]:index`); the CPU's nodes keep theirs.
The parser gives the delegate's rows the `gpu` backend."""

from __future__ import annotations

import pytest

from delegate_runtime.builder import ModelBuilder
from delegate_runtime.tools.benchmark_parser import parse_benchmark_output
from tests.conftest import require
from worker_agent.android.profile_output import op_profile_rows
from worker_agent.android.simulator import SimulatedPhone
from worker_agent.android.simulator.shell import run_line
from worker_agent.discovery import discover_opencl

SHAPE = (1, 4, 4, 3)
TOOL = "/data/local/tmp/benchmark_model"
MODEL = "/data/local/tmp/m.tflite"
FLAGS = "--num_runs=3 --warmup_runs=1 --min_secs=0 --warmup_min_secs=0 --max_secs=5"


def chain(ops: str) -> bytes:
    """'R' = RELU (the GPU takes it), 'C' = CEIL (it does not), each on the last output."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE)
    for i, kind in enumerate(ops):
        y = g.tensor(f"t{i}", SHAPE)
        g.op("RELU", [x], [y]) if kind == "R" else g.op("CEIL", [x], [y])
        x = y
    g.output(x)
    return b.build()


def two_outputs() -> bytes:
    """RELU a, RELU b (the partition), CEIL of a: the partition hands out a and b."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE)
    a, bb, c = (g.tensor(n, SHAPE) for n in ("a", "b", "c"))
    g.op("RELU", [x], [a])
    g.op("RELU", [a], [bb])
    g.op("CEIL", [a], [c])
    g.output(bb)
    g.output(c)
    return b.build()


class _Stream:
    def __init__(self) -> None:
        import threading

        self.data = b""
        self.closed = threading.Event()

    def write(self, data: bytes) -> None:
        self.data += data


@pytest.fixture(scope="module")
def phone() -> SimulatedPhone:
    p = SimulatedPhone("pixel-7")
    p.fs.write(TOOL, b"\x7fELF", mode=0o755)
    return p


def _profile(phone: SimulatedPhone, model: bytes, flags: str) -> tuple[list[tuple], str]:
    phone.fs.write(MODEL, model)
    s = _Stream()
    status = run_line(phone, s, f"{TOOL} --graph={MODEL} {FLAGS} {flags}")
    text = s.data.decode()
    assert status == 0, text
    rows = op_profile_rows(parse_benchmark_output(text).op_profile)
    return [(r["op"], r["node"], r["backend"]) for r in rows], text


GPU = "TfLiteGpuDelegateV2"


@pytest.mark.parametrize(
    ("model", "flags", "want"),
    [
        (chain("R"), "", [(GPU, "[t0]:1", "gpu")]),
        (chain("RRRR"), "", [(GPU, "[t3]:4", "gpu")]),
        # the delegate's node runs where its partition was; the CPU's nodes keep their index
        (chain("RRCR"), "", [(GPU, "[t1]:4", "gpu"), ("CEIL", "[t2]:2", "cpu"),
                             ("RELU", "[t3]:3", "cpu")]),
        (chain("RRCR"), "--max_delegated_partitions=2",
         [(GPU, "[t1]:4", "gpu"), ("CEIL", "[t2]:2", "cpu"), (GPU, "[t3]:5", "gpu")]),
        (chain("CR"), "", [("CEIL", "[t0]:0", "cpu"), (GPU, "[t1]:2", "gpu")]),
        (two_outputs(), "", [(GPU, "[a, b]:3", "gpu"), ("CEIL", "[c]:2", "cpu")]),
    ],
    ids=["one-node", "whole-graph", "fallback", "two-partitions", "cpu-first", "two-outputs"],
)  # fmt: skip
def test_gpu_profile_shows_the_delegate_node(
    phone: SimulatedPhone, model: bytes, flags: str, want: list[tuple]
) -> None:
    require(bool(discover_opencl("test")), "an OpenCL device (PoCL)")
    rows, text = _profile(phone, model, f"--use_gpu=true --enable_op_profiling=true {flags}")
    assert rows == want
    assert f"Number of nodes executed: {len(want)}\n" in text
    assert "Top by Computation Time" in text and "Summary by node type" in text


def test_cpu_profile_is_every_node() -> None:
    p = SimulatedPhone("pixel-7")
    p.fs.write(TOOL, b"\x7fELF", mode=0o755)
    rows, _ = _profile(p, chain("RRCR"), "--use_gpu=false --enable_op_profiling=true")
    assert rows == [("RELU", "[t0]:0", "cpu"), ("RELU", "[t1]:1", "cpu"),
                    ("CEIL", "[t2]:2", "cpu"), ("RELU", "[t3]:3", "cpu")]  # fmt: skip
