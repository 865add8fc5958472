"""pyopencl's compiler warnings: dropped when NVIDIA's per-kernel noinline notes are the
whole build log, passed on otherwise."""

from __future__ import annotations

import warnings
from typing import Any

from delegate_runtime.gpu.opencl.program import build_quietly, only_benign_notes
from tests.conftest import require_module

cl = require_module("pyopencl", "pyopencl (the OpenCL runtime, PoCL here)")


def note(kernel: str) -> str:
    return (
        f"(): Warning: Function {kernel} is a kernel, so overriding noinline attribute. "
        "The function may be inlined when called.\n"
    )


NOTES = "\n" + note("gemm64") + note("conv2d_direct") + "\n\n"
OTHER = "(): Warning: variable 'acc' is used uninitialized\n"


class Built:
    """A built program as build_quietly sees it: only its build log."""

    def __init__(self, log: str):
        self.log = log

    def get_build_info(self, device: Any, what: int) -> str:
        assert what == cl.program_build_info.LOG
        return self.log


def warnings_of_build(log: str, *categories: type[Warning]) -> list[type[Warning]]:
    def build() -> Built:
        for category in categories:
            warnings.warn("Non-empty compiler output encountered.", category, stacklevel=1)
        return Built(log)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_quietly(build, device=None)
    return [w.category for w in caught]


def test_noinline_notes_alone_are_benign():
    assert only_benign_notes(NOTES)


def test_any_other_line_is_not_benign():
    assert not only_benign_notes(NOTES + OTHER)


def test_an_empty_log_is_not_benign():
    assert not only_benign_notes("\n \n")


def test_the_compiler_warning_of_a_notes_only_log_is_dropped():
    assert warnings_of_build(NOTES, cl.CompilerWarning) == []


def test_the_compiler_warning_of_any_other_log_is_passed_on():
    assert warnings_of_build(NOTES + OTHER, cl.CompilerWarning) == [cl.CompilerWarning]


def test_other_warnings_during_a_build_are_passed_on():
    assert warnings_of_build(NOTES, DeprecationWarning) == [DeprecationWarning]
