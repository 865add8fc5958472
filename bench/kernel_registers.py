"""Registers and spills of a model's GPU kernels as NVIDIA's compiler reports them.

A persistent kernel (opencl/persistent.py) inlines every layer's function, so its
register count is the largest any layer needs, and every layer runs at the occupancy that
count allows; a count past what the resident groups leave (65536 registers an SM over
persistent_groups_per_cu x 256 items: 64 at four groups) spills. This builds the model's
programs with `-cl-nv-verbose` (no kernel cache) and prints ptxas's lines for each kernel.

python bench/kernel_registers.py MODEL [...] [--precision fp32] [--device NVIDIA]
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--all", action="store_true", help="every kernel, not only persistent ones")
    a = ap.parse_args()
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()  # build from source: no kernel cache
    os.environ["CUDA_CACHE_DISABLE"] = "1"  # and the driver compiles the PTX again
    import pyopencl as cl

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import program

    logs: list[str] = []
    build = program.build_from_source

    def verbose_build(lib, ctx, device, source, options):  # type: ignore[no-untyped-def]
        prg, err = build(lib, ctx, device, source, options + " -cl-nv-verbose")
        logs.append(prg.get_build_info(device, cl.program_build_info.LOG) or "")
        return prg, err

    program.build_from_source = verbose_build
    for path in a.models:
        logs.clear()
        GpuSession(load_model(path), precision=a.precision, device=a.device, log=io.StringIO())
        print(f"== {Path(path).name} ({a.precision})")
        name = ""
        for line in "\n".join(logs).splitlines():
            m = re.search(r"Compiling entry function '(\w+)'", line)
            if m:
                name = m.group(1)
            elif (a.all or name.startswith("persistent")) and re.search(r"Used|spill|stack", line):
                print(f"{name}: {line.split('info    :')[-1].strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
