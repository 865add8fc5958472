"""A resident builder's process, as build_pool.start_pool starts it:

    python -m delegate_runtime.gpu.opencl.builder_process SPEC CACHE_DIR IDLE_RELEASE_S [warm]

It serves the spool (build_pool.serve); with `warm` (a pool's first builder, where the
pool warms the first tier up) it first posts the warm-up's jobs (tier_warm_up.py), once
its context is made, where the device's sessions start on the tier.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..switches import Switches
from . import build_pool, tier_warm_up
from .cache import KernelCache


def main(argv: list[str]) -> int:
    spec, cache_dir, idle_release_s = argv[0], Path(argv[1]), float(argv[2])

    def warm_up(spool: Path, info: Any) -> None:
        if tier_warm_up.wanted(info, Switches.from_env()):
            for job in tier_warm_up.jobs(info, KernelCache(cache_dir), spec):
                build_pool.post_job(spool, job)

    first_jobs = warm_up if argv[3:] == ["warm"] else None
    return build_pool.serve(spec, cache_dir, idle_release_s, first_jobs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
