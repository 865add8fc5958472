"""What the per-fusion tests share: a model's fusion plan, with fusions turned off by name,
and a model run on the OpenCL device with and without one fusion.

Each `test_<fusion>.py` beside this file builds a small graph where its fusion applies and
one where a condition of the fusion refuses (a limit of the switchboard's, set through
the switches the plan is made with), checks the plan of each, and checks on the
device (PoCL in CI) that the fused kernels compute what the unfused ones do.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.gpu.opencl.chain import Chain
from delegate_runtime.gpu.opencl.fusions import plan_fusion
from delegate_runtime.gpu.switches import DEFAULTS, Switches
from delegate_runtime.submodel import boundary
from tests.ops.test_gpu_fusion import work_kernels
from tests.ops.test_gpu_ops import TOL


def plan(model: bytes, *disabled: str, switches: Switches = DEFAULTS) -> dict[int, Chain]:
    """plan_fusion's chains for `model`, every node in one partition (as the delegate
    plans a model it runs whole), with `switches` (the rules' limits) and the fusions
    named in `disabled` off."""
    sg = read_model(model).main
    nodes = list(range(len(sg.operators)))
    _, outs = boundary(sg, nodes)
    return plan_fusion(sg, nodes, set(outs), switches.replace(fusions_off=frozenset(disabled)))


def kernels(chains: dict[int, Chain]) -> dict[int, tuple[int, ...]]:
    """Producer -> every node its kernel runs besides its own, for kernels that run more."""
    return {n: tuple(c.nodes) for n, c in chains.items() if c.nodes}


def fused_equals_unfused(
    monkeypatch: pytest.MonkeyPatch,
    model: bytes,
    inputs: Sequence[np.ndarray],
    fusion: str,
    precision: str = "fp32",
) -> tuple[list[str], list[str]]:
    """Run `model` on the OpenCL device as planned and with `fusion` off; assert the
    outputs agree (within the precision's tolerance) and return each run's kernel names."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.switches import Switches

    def run(off: frozenset[str]) -> tuple[list[np.ndarray], list[str]]:
        switches = Switches.from_env().replace(fusions_off=off)
        session = GpuSession(
            read_model(model), precision=precision, log=io.StringIO(), switches=switches
        )
        names = [n for ex in session.executors for n in ex.kernel_names]
        return session.invoke(list(inputs)), work_kernels(names)

    fused, fused_names = run(frozenset())
    plain, plain_names = run(frozenset({fusion}))
    for f, p in zip(fused, plain, strict=True):
        scale = max(float(np.abs(p).max()), 1.0)
        np.testing.assert_allclose(f, p, rtol=TOL[precision], atol=TOL[precision] * scale)
    return fused_names, plain_names
