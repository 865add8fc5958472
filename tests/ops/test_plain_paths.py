"""Each fast path of the GPU session against the plain path (Switches.plain()) on the same
model and input, on the OpenCL device (PoCL in CI): the pass must change what the session
does (its probe differs), and the outputs must agree, to the bit where the arithmetic is
the same, else within the precision's tolerance (TOL: a fused kernel keeps in registers
what plain stores between launches, in half under fp16). The passes: gpu/passes.py."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu.passes import PASSES
from delegate_runtime.gpu.switches import KNOBS, PLAIN, Switches
from tests.conftest import require, require_module
from tests.ops.test_gpu_concat_views import dense_block
from tests.ops.test_gpu_fusion import conv_swish
from tests.ops.test_gpu_ops import TOL, opencl_device
from tests.ops.test_gpu_persistent import separable_blocks

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32


def folded_product() -> tuple[bytes, list[np.ndarray]]:
    """x + (a * b), a and b constants: the fold pass makes a * b one constant."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 8), F)
    rng = np.random.default_rng(41)
    ca = g.const("a", rng.uniform(-2, 2, (8,)).astype(F))
    cb = g.const("b", rng.uniform(-2, 2, (8,)).astype(F))
    product = g.tensor("ab", (8,), F)
    g.op("MUL", [ca, cb], [product], fused_activation_function="NONE")
    y = g.tensor("y", (1, 4, 4, 8), F)
    g.op("ADD", [x, product], [y], fused_activation_function="NONE")
    g.output(y)
    return b.build(), [rng.uniform(-2, 2, (1, 4, 4, 8)).astype(F)]


def two_convolutions() -> tuple[bytes, list[np.ndarray]]:
    """Two 1x1 convolutions: a run of two layers, small enough that PoCL builds its
    persistent kernel in seconds (a separable block's took minutes on two cores)."""
    return separable_blocks(blocks=0, shape=(1, 4, 4, 8))


def _built(make: Callable[[], Any]) -> Callable[[], tuple[bytes, list[np.ndarray]]]:
    def case() -> tuple[bytes, list[np.ndarray]]:
        built = make()
        return built.model, built.inputs

    return case


def launches(session: Any) -> int:
    return sum(len(ex.kernels) for ex in session.executors)


def _compiler() -> None:
    from delegate_runtime.gpu.opencl.native_library import compiler

    require(compiler() is not None, "a C compiler (the native library)")


@dataclass(frozen=True)
class Case:
    """A pass (gpu/passes.py) on `model`: the switches that turn it on over plain(), what
    must differ from plain's session (`probe`), and the precisions whose outputs agree to
    the bit (in the others: within TOL)."""

    name: str
    model: Callable[[], tuple[bytes, list[np.ndarray]]]
    probe: Callable[[Any], Any]
    on: tuple[str, ...] = ()
    exact: tuple[str, ...] = ("fp32", "fp16")
    needs: Callable[[], None] = lambda: None


CASES = [
    # unfolded, the constants' MUL runs on the CPU in float32, not on the GPU in half
    Case("fold", folded_product, lambda s: s.folded_ops, exact=("fp32",)),
    # fused in registers, plain through memory: the same in float32 only up to rounding
    Case("fuse", _built(conv_swish(True)), launches, ("fuse",), exact=()),
    Case("concat_views", _built(dense_block()), launches, ("concat_views",)),
    Case("specialize", two_convolutions, lambda s: s.specialized_kernels, ("specialize",)),
    Case(
        "persist",
        two_convolutions,
        lambda s: s.persistent_runs,
        ("specialize", "persistent"),
    ),
    # asked for on every device; NVIDIA's alone offers it (then session.host_edges too)
    Case(
        "host_edges",
        separable_blocks,
        lambda s: s.plan.host_edges,
        ("hot_path", "host_edges"),
    ),
    Case("hot_path", separable_blocks, lambda s: s.launch_loop, ("hot_path",)),
    Case(
        "native_loop",
        separable_blocks,
        lambda s: s.launch_loop,
        ("hot_path", "native_loop"),
        needs=_compiler,
    ),
    Case(
        "pinned",
        separable_blocks,
        lambda s: sorted(t for ex in s.executors for t in ex.pinned),
        ("hot_path", "pinned"),
    ),
]


def _tuning() -> dict[str, Any]:
    """Persistent kernels a device can run (tests/ops/test_gpu_persistent.py), and GEMMs
    planned for the same grid whether they run or not, so that the plain path's GEMMs split
    their K as the persistent path's do."""
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    if describe(select_device(None)).is_gpu:
        return {"persistent_groups_per_cu": 1, "gemm_groups_per_cu": 1}
    return {"persistent_groups": 1, "gemm_groups_per_cu": 2}


def _fast_for(case: Case) -> Switches:
    """plain() with the case's switches on, set as their variables set them: explicitly, so
    that they hold on every device (a default holds only where the device suits it)."""
    environ = {KNOBS[name].env: "1" for name in case.on}
    rest = {name: value for name, value in PLAIN.items() if name not in case.on}
    return Switches.from_env(environ).replace(**rest, **_tuning())


def _plain_for(case: Case) -> Switches:
    """plain(), with the case's pass off where plain keeps it (fold)."""
    plain = Switches.plain().replace(**_tuning())
    step = next(p for p in PASSES if p.name == case.name)
    return plain.replace(**{step.switch: step.off}) if step.runs(plain) else plain


def _session(model: bytes, precision: str, switches: Switches) -> Any:
    from delegate_runtime.gpu.delegate import GpuSession

    return GpuSession(read_model(model), precision=precision, log=io.StringIO(), switches=switches)


def test_every_pass_with_a_switch_has_its_case():
    assert {c.name for c in CASES} | {"copy_helpers"} == {p.name for p in PASSES if p.switch}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_fast_path_computes_what_the_plain_path_computes(opencl_device, case, precision):
    case.needs()
    model, inputs = case.model()
    plain = _plain_for(case)
    fast = _fast_for(case)
    step = next(p for p in PASSES if p.name == case.name)
    assert step.runs(fast) and not step.runs(plain)
    simple, session = _session(model, precision, plain), _session(model, precision, fast)
    assert case.probe(session) != case.probe(simple), f"{case.name} changed nothing"
    for _ in range(2):  # a second invoke: state an invoke leaves behind starts again
        for got, want in zip(session.invoke(inputs), simple.invoke(inputs), strict=True):
            if precision in case.exact:
                np.testing.assert_array_equal(got, want)
            else:
                scale = max(float(np.abs(want).max()), 1.0)
                tol = TOL[precision]
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


def test_the_shipped_path_computes_what_the_plain_path_computes(opencl_device):
    """The defaults (what the device suits) against plain(), every pass at once."""
    model, inputs = separable_blocks(tail="mean")
    simple = _session(model, "fp32", Switches.plain().replace(**_tuning()))
    shipped = _session(model, "fp32", Switches().replace(**_tuning()))
    assert launches(shipped) < launches(simple) or shipped.launch_loop != simple.launch_loop
    for got, want in zip(shipped.invoke(inputs), simple.invoke(inputs), strict=True):
        scale = max(float(np.abs(want).max()), 1.0)
        np.testing.assert_allclose(got, want, rtol=TOL["fp32"], atol=TOL["fp32"] * scale)


def test_profiling_observes_the_path_that_launches_one_by_one(opencl_device):
    """Op profiling is no path of its own: it launches the kernels the session with no hot
    path and no persistent kernels launches, in the same order, and computes the same bits,
    with an event each."""
    model, inputs = separable_blocks()
    one_by_one = Switches().replace(hot_path=False, persistent=False, **_tuning())
    observed = _session(model, "fp32", one_by_one)
    from delegate_runtime.gpu.delegate import GpuSession

    profiled = GpuSession(
        read_model(model),
        log=io.StringIO(),
        switches=Switches().replace(**_tuning()),
        profiling=True,
    )
    names = [ex.kernel_names for ex in profiled.executors]
    assert names == [ex.kernel_names for ex in observed.executors]
    assert profiled.launch_loop == observed.launch_loop == "pyopencl"
    for got, want in zip(profiled.invoke(inputs), observed.invoke(inputs), strict=True):
        np.testing.assert_array_equal(got, want)
    assert sum(profiled.op_profile_ns().values()) > 0


def test_the_copy_helpers_copy_what_numpy_copies():
    """copy_helpers (host_copy.c's threads) share an input's copy into host memory; they run
    only with host edges (NVIDIA), so here the copy is called as the hot path calls it."""
    from delegate_runtime.gpu.opencl import host_copy
    from delegate_runtime.gpu.opencl.native_library import native_library

    _compiler()
    native = native_library(switches=Switches())
    assert native is not None
    src = np.random.default_rng(7).standard_normal((1, 224, 224, 3)).astype(F)
    dst = np.zeros_like(src)
    before = host_copy._last_end
    how = host_copy.Settings(helpers=2, min_bytes=0, chunk_bytes=32 * 1024, spin_us=0)
    host_copy.copy(native, dst, src, how)
    assert host_copy._last_end != before, "the C copy did not run"
    np.testing.assert_array_equal(dst, src)
