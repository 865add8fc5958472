"""The kernels in the build no device here runs: half arithmetic (`cl_khr_fp16`, which
AMD, Intel and phone GPUs have and NVIDIA and PoCL lack) compiled by clang's OpenCL C
front end. The float and half-storage builds run on PoCL and NVIDIA in the other tests."""

from __future__ import annotations

import glob
import shutil
import subprocess
from pathlib import Path

import pytest

from delegate_runtime.gpu.opencl.program import build_options, program_source
from delegate_runtime.gpu.opencl.runtime import DeviceInfo
from tests.conftest import require

#: OpenCL C 1.2 (what a build without -cl-std compiles), the SPIR target, whose
#: default extensions include cl_khr_fp16, and the standard header.
CLANG_OPENCL = ["-x", "cl", "-cl-std=CL1.2", "-target", "spir64", "-fsyntax-only"]
CLANG_OPENCL += ["-Xclang", "-finclude-default-header", "-Werror"]


def clang() -> str:
    found = shutil.which("clang") or next(iter(sorted(glob.glob("/usr/bin/clang-[0-9]*"))), None)
    require(found is not None, "clang (Debian's clang package)")
    return str(found)


def half_device() -> DeviceInfo:
    return DeviceInfo(
        key="opencl:gpu:half",
        platform="any",
        name="a GPU with cl_khr_fp16",
        vendor="any",
        driver_version="1",
        opencl_version="OpenCL 3.0",
        compute_units=1,
        global_mem_bytes=1 << 30,
        has_fp16=True,
        is_gpu=True,
    )


def compile_errors(source: str, options: str, tmp_path: Path) -> str:
    path = tmp_path / "kernels.cl"
    path.write_text(source)
    cmd = [clang(), *CLANG_OPENCL, *options.split(), str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return done.stderr if done.returncode else ""


@pytest.mark.parametrize("half_weights", [False, True], ids=["float32-weights", "half-weights"])
def test_half_arithmetic_build_compiles(tmp_path, half_weights):
    options = build_options("fp16", half_device(), half_weights)
    assert "-DHALF_ARITH" in options
    assert ("-DHALF_WEIGHTS" in options) == half_weights
    assert compile_errors(program_source(), options, tmp_path) == ""


def test_the_check_catches_an_ambiguous_half_call(tmp_path):
    """The same check on a kernel with a real half-arithmetic mistake fails."""
    bad = program_source() + (
        "__kernel void broken(__global store_t* p) { p[0] = fmax(p[1], 0.0f) * 2.0; }\n"
    )
    assert "ambiguous" in compile_errors(bad, build_options("fp16", half_device()), tmp_path)
