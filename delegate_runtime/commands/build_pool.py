"""`devicefarm build-pool`: keep resident program builders for a GPU (their OpenCL contexts
given up while idle, all but four), so that a new model's kernels are built without
starting processes (cold start; gpu/opencl/build_pool.py); they first build the first tier's
generic kernels the cache lacks (gpu/opencl/tier_warm_up.py; --no-warm-tier skips it), as
the agent's do. Runs until interrupted; the
worker agent starts its own for the GPUs it serves."""

from __future__ import annotations

import argparse
import signal
import time

from ._flags import float_at_least, int_at_least


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        default=None,
        help="OpenCL device: 'P:D' or a name substring (default: the first GPU)",
    )
    p.add_argument(
        "--builders",
        type=int_at_least(1),
        default=None,
        help="builders to keep (default: one per usable CPU but one, at most 15)",
    )
    p.add_argument(
        "--serialization_dir",
        default=None,
        help="the kernel cache the sessions use (default: the user's, as theirs)",
    )
    p.add_argument(
        "--idle-release",
        type=float_at_least(0.0),
        default=None,
        help="seconds idle after which a builder gives its OpenCL context up until a job "
        "comes (default: 15)",
    )
    p.add_argument(
        "--warm-tier",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="build the first tier's generic kernels the cache lacks at start (on a GPU), so "
        "that every new model starts on them (default; about 50 s once on an H100)",
    )


def _stop(*_: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from ..gpu.opencl.build_pool import (
        IDLE_RELEASE_S,
        default_builders,
        spool_dir,
        start_pool,
        stop_pool,
    )
    from ..gpu.opencl.build_workers import device_spec
    from ..gpu.opencl.preparation import kernel_cache_dir
    from ..gpu.opencl.runtime import describe, select_device
    from ..gpu.opencl.tier_warm_up import units_left

    device = select_device(args.device)
    spec, name = device_spec(device), describe(device).name
    count = args.builders if args.builders is not None else max(default_builders(), 1)
    cache_dir = kernel_cache_dir(args.serialization_dir)
    signal.signal(signal.SIGTERM, _stop)
    idle_s = IDLE_RELEASE_S if args.idle_release is None else args.idle_release
    started = time.monotonic()
    procs = start_pool(spec, cache_dir, count, idle_release_s=idle_s, warm_tier=args.warm_tier)
    builders = f"{count} resident builder{'s' if count != 1 else ''}"
    print(
        f"{builders} for {name} ({spec}) on {cache_dir}, each giving its context up after"
        f" {idle_s:g} s idle; Ctrl-C stops them",
        flush=True,
    )
    spool = spool_dir(cache_dir, spec)
    warming = units_left(spool)
    if warming:
        print(f"first tier: building {warming} generic kernel units", flush=True)
    try:
        while all(p.poll() is None for p in procs):
            if warming and not units_left(spool):
                warming = 0
                print(f"first tier built in {time.monotonic() - started:.1f} s", flush=True)
            time.sleep(1.0)
        print("a builder exited; stopping the others")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop_pool(procs)
