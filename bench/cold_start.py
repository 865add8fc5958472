"""Cold start per model: our GPU delegate's init and first inference, cold and warm, beside
LiteRT's GPU accelerator's, each in a fresh process of its own.

    python bench/cold_start.py MODEL_OR_FOLDER... [--device NVIDIA] [--precisions fp32,fp16]
        [--env NAME=VALUE ...]

Per model and precision, ours runs twice in fresh processes on one new, empty cache
directory (our kernel cache with the drivers' caches inside it: nothing is assumed
empty): "cold" builds everything, "warm" finds what the cold run stored. LiteRT's GPU
accelerator (`CompiledModel.from_file` with `HardwareAccelerator.GPU`) runs twice the same
way, with NVIDIA's compute cache, its shader cache and the XDG cache pointed at a new empty
directory; where it refuses a model alone, it runs again with LiteRT's CPU beside it
(`GPU | CPU`, as an app asks; the cell says "+CPU" and a line names the refusal). Each
figure is the time from before the model is opened to the first inference's outputs
read back into host arrays (imports and reading the file excluded, as
both are the same for every model: each runtime's modules are loaded first, ours as
LiteRT's, and neither has touched the driver); "process" is the child's whole wall time. Every child
prints one JSON line; the table ends with the ratio of our cold start to LiteRT's.
`--env` passes settings to our children only (e.g. DEVICEFARM_GPU_PERSISTENT=0);
`--set persistent.MAX_RUN_BYTES=None` changes a switch of their sessions
(delegate_runtime/gpu/switches.py: a field, its record name or its old module path, as
`fusions.depthwise_into_gemm.DEPTHWISE_ALIGNED=1`), or, for a constant not on the
switchboard (the GEMM's variants: `records.gemm_kernel.GEMM_VARIANTS={...}`), sets it on
its module of `gpu/opencl`.
`--build-pool N` measures ours a second time with N resident builders
(gpu/opencl/build_pool.py) started on the new cache before the cold run, as a lab agent
keeps them: their start is not timed, and they hold nothing. All but KEEP_HELD (4)
builders give their contexts up after `--pool-idle` seconds idle (the agent's default:
15); the pool's row is cold with every context held (just started) and warm once they gave
them up (a lab's usual state), and a line under it adds warm right after the cold run
(contexts still held) and cold on a new cache whose builders gave theirs up (woken by the
job). `--lab-only` measures ours only so (cold with the builders woken, then warm once
they gave their contexts up again: a lab agent's usual state), about half the time a
model, for a whole zoo in one call.
`--after MODEL` runs MODEL first on each new cache, untimed: a host's earlier model,
whose entries (its first tier's generic units among them: gpu/opencl/first_tier.py) the
timed runs then find.
`--warm-tier` (with `--build-pool`) first has builders on a new cache build the first
tier's generic kernels at their start, as an agent's do (gpu/opencl/tier_warm_up.py; its
seconds and failed units printed), and copies that cache (the drivers' caches inside it)
into each model's new cache before its builders start: the cold run is then a new model on
a host whose agent has started, not a new driver's first.
`--hold-device` opens the device in this process (its OpenCL context) for the whole run,
as a lab host holds it (its agent's context, or nvidia-persistenced): without a process
holding it, NVIDIA's driver sets the GPU up anew for each child (about 100 ms more on
the H200, in ours and LiteRT's alike). Without it, the run holds the device only once
`--build-pool` has started builders.
After the first inference each child times `--steady` more (outputs read back each time):
the warm children's median is the inference speed a cold start must not cost.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

#: Variables that point a process's caches somewhere; a child gets none of the parent's.
CACHE_VARIABLES = (
    "XDG_CACHE_HOME",
    "CUDA_CACHE_PATH",
    "POCL_CACHE_DIR",
    "__GL_SHADER_DISK_CACHE_PATH",
)


def load_sized(model_path: str) -> Any:
    """The model, its placeholder inputs given the sizes the zoo's cases feed it (by file
    name: openWakeWord's melspectrogram declares 1 sample and takes 1,760)."""
    from delegate_runtime import load_model
    from delegate_runtime.static_shapes import with_input_shapes
    from labkit.zoo_cases import OPENWAKEWORD_INPUTS

    model = load_model(model_path)
    shapes = dict(OPENWAKEWORD_INPUTS.get(Path(model_path).stem, (None, ()))[1])
    return with_input_shapes(model, shapes) if shapes else model


def model_inputs(model_path: str, sized: bool = True) -> list[np.ndarray]:
    """Inputs of the model's shapes (load_sized's, else as declared: LiteRT's compiled
    model takes those) and types: floats in [-1, 1), integers 0."""
    from delegate_runtime import load_model

    sg = (load_sized(model_path) if sized else load_model(model_path)).main
    rng = np.random.default_rng(0)
    xs = []
    for t in sg.inputs:
        tensor = sg.tensors[t]
        shape = tuple(int(d) for d in tensor.shape)
        if np.dtype(tensor.dtype).kind == "f":
            xs.append(rng.uniform(-1, 1, shape).astype(tensor.dtype))
        else:
            xs.append(np.zeros(shape, tensor.dtype))
    return xs


def steady_us(invoke, runs: int) -> float | None:
    """The median of `runs` timed calls of `invoke` (None for none)."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        invoke()
        times.append((time.perf_counter() - t) * 1e6)
    return float(np.median(times)) if times else None


def apply_settings(settings: list[str]) -> Any:
    """`NAME=VALUE` each: a switch (the sessions' Switches, returned: the environment's
    with these changed), else `module.NAME` a constant of delegate_runtime.gpu.opencl.module
    not on the switchboard, set on it."""
    from delegate_runtime.gpu.switches import Switches
    from labkit.knobs import parse_knob

    changes = {}
    for item in settings:
        try:
            knob = parse_knob(item, "delegate_runtime.gpu.opencl")
        except ValueError as exc:
            raise SystemExit(f"--set: {exc}") from exc
        if len(knob) == 2:
            changes[knob[0]] = knob[1]
        else:
            setattr(*knob)  # not on the switchboard yet
    return Switches.from_env().replace(**changes)


def child_ours(
    model_path: str,
    precision: str,
    device: str | None,
    cache: str,
    jobs: int | None,
    runs: int = 0,
    settings: tuple[str, ...] = (),
) -> dict:
    import pyopencl  # noqa: F401  (loading the library is process start-up)

    switches = apply_settings(list(settings))

    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import preparation  # noqa: F401  (as LiteRT's module)
    from delegate_runtime.ops.registry import supported_ops

    supported_ops()  # the reference kernels' modules imported, as an agent has them
    model = load_sized(model_path)
    xs = model_inputs(model_path)
    t0 = time.perf_counter()
    session = GpuSession(
        model,
        precision=precision,
        device=device,
        serialization_dir=cache,
        build_jobs=jobs,
        log=io.StringIO(),
        switches=switches,
    )
    t1 = time.perf_counter()
    outs = session.invoke(xs)
    _ = [np.asarray(o).sum() for o in outs]
    t2 = time.perf_counter()
    session.settle()  # its own program, where it began on the first tier
    t3 = time.perf_counter()
    return {
        "init_ms": (t1 - t0) * 1e3,
        "first_ms": (t2 - t1) * 1e3,
        "own_ms": (t3 - t0) * 1e3 if session.first_tier_units else None,
        "first_tier_units": session.first_tier_units,
        "steady_us": steady_us(lambda: [np.asarray(o) for o in session.invoke(xs)], runs),
        "from_cache": session.program_from_cache,
        "phases_ms": session.init_phases_ms,
        "specialized": getattr(session, "specialized_kernels", 0),
        "units": getattr(session, "program_units", 1),
        "program": getattr(session, "program_summary", ""),
        "lowering_from_cache": getattr(session, "lowering_from_cache", False),
        "loaded_early": getattr(session, "program_loaded_early", False),
    }


def child_litert(model_path: str, runs: int = 0, with_cpu: bool = False) -> dict:
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator

    accel = (
        HardwareAccelerator.GPU | HardwareAccelerator.CPU if with_cpu else HardwareAccelerator.GPU
    )
    xs = model_inputs(model_path, sized=False)
    t0 = time.perf_counter()
    model = CompiledModel.from_file(model_path, hardware_accel=accel)
    key = list(model.get_signature_list())[0]
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    t1 = time.perf_counter()
    for buf, x in zip(ins, xs, strict=True):
        buf.write(x)
    details = list(model.get_output_tensor_details(key).values())

    def invoke() -> None:
        for buf, x in zip(ins, xs, strict=True):
            buf.write(x)
        model.run_by_index(0, ins, outs)
        for buf, d in zip(outs, details, strict=True):
            n = int(np.prod(d["shape"]))
            np.asarray(buf.read(n, np.dtype(d.get("dtype", np.float32)))).sum()

    model.run_by_index(0, ins, outs)
    for buf, d in zip(outs, details, strict=True):
        n = int(np.prod(d["shape"]))
        np.asarray(buf.read(n, np.dtype(d.get("dtype", np.float32)))).sum()
    t2 = time.perf_counter()
    steady = steady_us(invoke, runs)
    return {"init_ms": (t1 - t0) * 1e3, "first_ms": (t2 - t1) * 1e3, "steady_us": steady}


def run_child(args: list[str], env: dict[str, str]) -> dict:
    """One fresh process running this file with `args`; its JSON line, its wall time."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env
    )
    wall = (time.perf_counter() - start) * 1e3
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        said = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in said if not ln.startswith(("INFO:", "WARNING:", "VERBOSE:"))]
        return {"error": (errors or said or ["no output"])[-1][:160], "process_ms": wall}
    return {**json.loads(lines[-1]), "process_ms": wall}


def clean_env(cache_root: str, extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without its cache settings, every cache under
    `cache_root` (new and empty), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in CACHE_VARIABLES}
    env["XDG_CACHE_HOME"] = str(Path(cache_root) / "xdg")
    env["__GL_SHADER_DISK_CACHE_PATH"] = str(Path(cache_root) / "gl")
    env["CUDA_CACHE_PATH"] = str(Path(cache_root) / "cuda")
    for sub in ("xdg", "gl", "cuda"):
        (Path(cache_root) / sub).mkdir(parents=True, exist_ok=True)
    return env | extra


def cold_warm(args: list[str], env: dict[str, str]) -> tuple[dict, dict]:
    return run_child(args, env), run_child(args, env)


def measure_ours(
    path: str,
    precision: str,
    device: str | None,
    extra: dict,
    jobs: int | None,
    tail: tuple[str, ...] = (),
) -> tuple[dict, dict]:
    """Ours cold then warm on a new cache."""
    env, args = _ours(path, precision, device, extra, jobs)
    return cold_warm(args + list(tail), env)


def _ours(
    path: str, precision: str, device: str | None, extra: dict, jobs: int | None
) -> tuple[dict[str, str], list[str]]:
    """A child's environment on a new, empty cache, and its arguments."""
    root = tempfile.mkdtemp(prefix="cold-ours-")
    # our sessions point the drivers' caches inside their own directory: none set here
    env = {k: v for k, v in clean_env(root, extra).items() if k != "CUDA_CACHE_PATH"}
    args = ["--child-ours", path, "--precision", precision, "--cache", f"{root}/kernels"]
    args += ["--device", device] if device else []
    args += ["--build-jobs", str(jobs)] if jobs else []
    return env, args


def measure_pool(
    path: str,
    precision: str,
    device: str | None,
    extra: dict,
    tail: tuple[str, ...],
    pool: int,
    idle_s: float,
    jobs: int | None = None,
    lab_only: bool = False,
    after: str | None = None,
    warmed: Path | None = None,
) -> dict[str, dict]:
    """Ours with `pool` resident builders (build_pool.py) started on a new cache, as a lab
    agent has them, outside the timing: cold with their contexts held, warm right after,
    warm once they gave their contexts up; then cold on another new cache whose builders
    gave theirs up before the job came. `lab_only`: only the lab's usual state, builders
    that gave their contexts up: cold (woken by the job), then warm once they gave them
    up again. `after`: a model run on each new cache first, untimed (a host's earlier
    model: what it left in the cache, its first tier's units among them, stays).
    `warmed`: a cache whose builders built the first tier (warm_tier_cache), copied into
    each new cache before its builders start: a host whose agent has started."""
    from delegate_runtime.gpu.opencl.build_pool import start_pool, stop_pool
    from delegate_runtime.gpu.opencl.build_workers import device_spec
    from delegate_runtime.gpu.opencl.runtime import select_device

    spec = device_spec(select_device(device))
    runs: dict[str, dict] = {}
    for fresh in ("released",) if lab_only else ("held", "released"):
        env, args = _ours(path, precision, device, extra, jobs)
        cache = Path(args[args.index("--cache") + 1])
        if warmed is not None:
            shutil.copytree(
                warmed, cache, ignore=shutil.ignore_patterns("build-pool"), dirs_exist_ok=True
            )
        procs = start_pool(
            spec, cache, pool, environ=env, idle_release_s=idle_s, warm_tier=warmed is not None
        )
        try:
            if warmed is not None:
                _await_warm_up(spec, cache)
            if after is not None:
                earlier = [after if a == path else a for a in args]
                runs["after"] = run_child(earlier + list(tail), env)
            if fresh == "released":
                _await_release(spec, cache, pool)
            runs[f"cold_{fresh}"] = run_child(args + list(tail), env)
            if fresh == "held":
                runs["warm_held"] = run_child(args + list(tail), env)
            if fresh == "held" or lab_only:
                _await_release(spec, cache, pool)
                runs["warm_released"] = run_child(args + list(tail), env)
        finally:
            stop_pool(procs)
    return runs


def warm_tier_cache(device: str | None, extra: dict, pool: int, idle_s: float) -> tuple[Path, dict]:
    """A new cache whose `pool` builders, started as an agent's with the warm-up
    (tier_warm_up.py), built the first tier; the warm-up's seconds and failed units."""
    from delegate_runtime.gpu.opencl.build_pool import start_pool, stop_pool
    from delegate_runtime.gpu.opencl.build_workers import device_spec
    from delegate_runtime.gpu.opencl.runtime import select_device

    spec = device_spec(select_device(device))
    env, args = _ours("", "fp32", device, extra, None)
    cache = Path(args[args.index("--cache") + 1])
    started = time.monotonic()
    procs = start_pool(spec, cache, pool, environ=env, idle_release_s=idle_s, warm_tier=True)
    try:
        _await_warm_up(spec, cache)
        seconds = time.monotonic() - started
    finally:
        stop_pool(procs)
    return cache, {"seconds": seconds, "failed": _warm_up_missing(device, spec, cache)}


def _await_warm_up(spec: str, cache: Path, timeout_s: float = 600.0) -> None:
    """Until the builders built the first tier's warm-up (tier_warm_up.py)."""
    from delegate_runtime.gpu.opencl.build_pool import spool_dir
    from delegate_runtime.gpu.opencl.tier_warm_up import units_left

    deadline = time.monotonic() + timeout_s
    while units_left(spool_dir(cache, spec)):
        if time.monotonic() > deadline:
            raise RuntimeError("the builders did not build the first tier's warm-up")
        time.sleep(0.1)


def _warm_up_missing(device: str | None, spec: str, cache: Path) -> int:
    """The warm-up's units the cache lacks once the builders are done: those that failed."""
    from delegate_runtime.gpu.opencl import tier_warm_up
    from delegate_runtime.gpu.opencl.cache import KernelCache
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    info = describe(select_device(device))
    return sum(len(j["units"]) for j in tier_warm_up.jobs(info, KernelCache(cache), spec))


def _await_release(spec: str, cache: Path, pool: int, timeout_s: float = 120.0) -> None:
    """Until the builders that give their contexts up (all but KEEP_HELD) have."""
    from delegate_runtime.gpu.opencl.build_pool import KEEP_HELD, holding_builders, spool_dir

    deadline = time.monotonic() + timeout_s
    while holding_builders(spool_dir(cache, spec)) > min(KEEP_HELD, pool):
        if time.monotonic() > deadline:
            raise RuntimeError("the builders did not give their contexts up")
        time.sleep(0.1)


_HELD: list = []


def hold_device(device: str | None) -> str:
    """Open `device` here and keep its context for the rest of the run; its name."""
    from delegate_runtime.gpu.opencl.runtime import select_device, shared_context

    found = select_device(device)
    _HELD.append(shared_context(found))
    return found.name.strip()


def measure_litert(path: str, runs: int) -> tuple[dict, dict]:
    """LiteRT's GPU accelerator cold then warm on new caches; where it refuses the model
    alone, again with LiteRT's CPU beside it (as an app asks; the result says "with_cpu")."""
    args = ["--child-litert", path, "--steady", str(runs)]
    cold, warm = cold_warm(args, clean_env(tempfile.mkdtemp(prefix="cold-litert-"), {}))
    if "error" not in cold:
        return cold, warm
    root = tempfile.mkdtemp(prefix="cold-litert-cpu-")
    cold_cpu, warm_cpu = cold_warm([*args, "--litert-cpu"], clean_env(root, {}))
    if "error" in cold_cpu:
        return cold, warm
    alone = cold["error"]
    return {**cold_cpu, "with_cpu": alone}, {**warm_cpu, "with_cpu": alone}


def total(r: dict) -> float | None:
    return None if "error" in r else r["init_ms"] + r["first_ms"]


def steady(r: dict) -> str:
    return "-" if r.get("steady_us") is None else f"{r['steady_us']:.0f}"


def cell(r: dict) -> str:
    t = total(r)
    if t is None:
        return f"fails: {r['error']}"
    return f"{t:.0f} ({r['init_ms']:.0f} + {r['first_ms']:.0f})" + (
        " +CPU" if "with_cpu" in r else ""
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--device", default=None)
    ap.add_argument("--precisions", default="fp32")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for our children")
    ap.add_argument("--phases", action="store_true", help="print our init phases per run")
    ap.add_argument("--build-jobs", type=int, default=None, help="ours: units built at once")
    ap.add_argument("--no-litert", action="store_true", help="ours only")
    ap.add_argument(
        "--build-pool",
        type=int,
        default=0,
        help="also ours with N resident builders started on the new cache (a lab agent's)",
    )
    ap.add_argument(
        "--pool-idle",
        type=float,
        default=3.0,
        help="seconds idle after which the builders give their contexts up (agent: 15)",
    )
    ap.add_argument(
        "--hold-device",
        action="store_true",
        help="keep the device open in this process throughout (as a lab host's agent does)",
    )
    ap.add_argument(
        "--lab-only",
        action="store_true",
        help="with --build-pool: ours only as a lab agent's job meets it (builders that gave"
        " their contexts up, cold then warm), not without builders nor with contexts held",
    )
    ap.add_argument("--steady", type=int, default=100, help="timed inferences after the first")
    ap.add_argument("--set", action="append", default=[], help="SWITCH=VALUE for ours")
    ap.add_argument(
        "--after",
        default=None,
        help="with --build-pool: a model run first on each new cache, untimed (a host's "
        "earlier model)",
    )
    ap.add_argument(
        "--warm-tier",
        action="store_true",
        help="with --build-pool: the builders build the first tier at their start, as an"
        " agent's do (awaited before the timed runs, its seconds printed)",
    )
    ap.add_argument("--child-ours", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-litert", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--litert-cpu", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    ap.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if (a.lab_only or a.after or a.warm_tier) and not a.build_pool:
        ap.error("--lab-only, --after and --warm-tier need --build-pool N")
    if a.child_ours:
        got = child_ours(
            a.child_ours, a.precision, a.device, a.cache, a.build_jobs, a.steady, tuple(a.set)
        )
        print(json.dumps(got))
        return 0
    if a.child_litert:
        print(json.dumps(child_litert(a.child_litert, a.steady, a.litert_cpu)))
        return 0
    extra = dict(kv.split("=", 1) for kv in a.env)
    held = hold_device(a.device) if a.hold_device else None
    paths = []
    for m in a.models:
        p = Path(m)
        paths += sorted(str(f) for f in p.glob("*.tflite")) if p.is_dir() else [str(p)]
    print(
        "ms from opening the model to the first outputs read back (init + first inference),"
        " each in a fresh process; caches emptied explicitly before each cold run"
        + (f"; ours with {extra}" if extra else "")
        + (f"; ours with {a.set}" if a.set else "")
        + f"; steady: the warm run's median of {a.steady} more, us"
        + (f"; {held} held open by this process throughout" if held else "")
    )
    warmed = None
    if a.warm_tier:
        warmed, up = warm_tier_cache(a.device, extra, a.build_pool, a.pool_idle)
        print(
            f"first tier built by {a.build_pool} builders at their start: {up['seconds']:.1f} s,"
            f" {up['failed']} units not cached after it (failed, or a CPU device's: not"
            " warmed); copied into each new cache below",
            flush=True,
        )
    print(
        "| model | precision | ours cold | ours warm | LiteRT GPU cold | LiteRT GPU warm |"
        " ours cold / LiteRT cold | ours warm process ms | ours steady | LiteRT steady |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    pools = ([] if a.lab_only else [0]) + ([a.build_pool] if a.build_pool else [])
    ratios: dict[int, list[float]] = {n: [] for n in pools}
    released_ratios: list[float] = []
    for path in paths:
        skipped = {"error": "not run (--no-litert)", "process_ms": 0.0}
        lite_cold, lite_warm = (skipped, skipped) if a.no_litert else measure_litert(path, a.steady)
        tail = ("--steady", str(a.steady), *[f"--set={kv}" for kv in a.set])
        for precision, pool in ((p, n) for p in a.precisions.split(",") for n in pools):
            if pool:
                runs = measure_pool(
                    path,
                    precision,
                    a.device,
                    extra,
                    tail,
                    pool,
                    a.pool_idle,
                    a.build_jobs,
                    a.lab_only,
                    a.after,
                    warmed,
                )
                cold, warm = runs.get("cold_held", runs["cold_released"]), runs["warm_released"]
            else:
                cold, warm = measure_ours(path, precision, a.device, extra, a.build_jobs, tail)
            ratio = "-"
            if total(cold) is not None and total(lite_cold) is not None:
                ratios[pool].append(total(cold) / total(lite_cold))
                ratio = f"{ratios[pool][-1]:.2f}x"
            woken = " woken from given-up contexts" if a.lab_only else ""
            label = precision + (f", {pool} resident builders{woken}" if pool else "")
            print(
                f"| {Path(path).stem} | {label} | {cell(cold)} | {cell(warm)} |"
                f" {cell(lite_cold)} | {cell(lite_warm)} | {ratio} |"
                f" {warm['process_ms']:.0f} | {steady(warm)} | {steady(lite_warm)} |",
                flush=True,
            )
            if "with_cpu" in lite_cold and pool == pools[-1]:
                print(f"  LiteRT GPU alone: {lite_cold['with_cpu']}; timed with its CPU beside it")
            if pool and not a.lab_only:
                lite = total(lite_cold)
                released = total(runs["cold_released"])
                ratio = f" ({released / lite:.2f}x)" if lite and released else ""
                if lite and released:
                    released_ratios.append(released / lite)
                print(
                    f"  builders: cold with contexts held {cell(cold)}, given up"
                    f" {cell(runs['cold_released'])}{ratio}; warm beside held"
                    f" {cell(runs['warm_held'])}, given up {cell(warm)}",
                    flush=True,
                )
            if a.phases:
                shown = (("cold", cold), ("warm", warm))
                if pool and not a.lab_only:
                    shown += (("cold, builders woken", runs["cold_released"]),)
                if pool and "after" in runs:
                    shown = (("the earlier model, untimed", runs["after"]), *shown)
                for name, r in shown:
                    if "phases_ms" in r:
                        phases = {k: round(v) for k, v in r["phases_ms"].items()}
                        lowering = ", lowering from cache" if r.get("lowering_from_cache") else ""
                        lowering += ", units loaded beside it" if r.get("loaded_early") else ""
                        own = (
                            f", own program in at {r['own_ms']:.0f} ms"
                            if r.get("own_ms") is not None
                            else ""
                        )
                        print(
                            f"  {name}: {phases}, {r.get('program', '')}{lowering}{own}",
                            flush=True,
                        )
    for pool, got in ratios.items():
        if got:
            geo = float(np.exp(np.mean(np.log(got))))
            how = f" ({pool} resident builders{' woken' if a.lab_only else ''})" if pool else ""
            print(f"ours cold{how} / LiteRT GPU cold: geomean {geo:.2f}x, worst {max(got):.2f}x")
    if released_ratios:
        geo = float(np.exp(np.mean(np.log(released_ratios))))
        print(
            f"ours cold, builders woken from given-up contexts / LiteRT GPU cold: geomean"
            f" {geo:.2f}x, worst {max(released_ratios):.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
