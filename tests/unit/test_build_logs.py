"""pyopencl's compiler warnings: NVIDIA's per-kernel noinline note is dropped, the rest kept."""

from __future__ import annotations

import warnings

import pytest

from delegate_runtime.gpu.opencl.program import ignore_benign_build_logs

HEADER = (
    "From-source build succeeded, but resulted in non-empty logs:\n"
    "Build on <pyopencl.Device 'NVIDIA H200' on 'NVIDIA CUDA' at 0x20755d60> succeeded, "
    "but said:\n\n"
)


def note(kernel: str) -> str:
    return (
        f"(): Warning: Function {kernel} is a kernel, so overriding noinline attribute. "
        "The function may be inlined when called.\n"
    )


def warned(message: str) -> list[str]:
    cl = pytest.importorskip("pyopencl")
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        ignore_benign_build_logs()
        warnings.warn(message, cl.CompilerWarning, stacklevel=1)
    return [str(w.message) for w in caught]


def test_a_log_of_noinline_notes_only_is_silenced():
    assert warned(HEADER + note("gemm64") + note("conv2d_direct") + "\n\n") == []


def test_a_log_with_any_other_line_still_warns():
    log = HEADER + note("gemm64") + "(): Warning: variable 'acc' is used uninitialized\n"
    assert warned(log) == [log]


def test_other_compiler_warnings_still_warn():
    log = "Built kernel retrieved from cache. Original from-source build had warnings:\n..."
    assert warned(log) == [log]
