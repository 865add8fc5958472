"""The real-model zoo on the GPU delegate beside LiteRT's GPU accelerator and CPU (issue 14).

Every model through ours in fp32 and fp16, LiteRT's GPU accelerator (`CompiledModel`; with
LiteRT's CPU beside it where the GPU alone refuses the model, marked "+CPU") and LiteRT's
CPU interpreter at N threads, measured interleaved in one process (median host in
to host out, batch 1), with the ratios, their geometric means, and each runtime's error
against LiteRT's reference kernels (max |out - ref| over the reference's range; LiteRT's
CPU kernels' own, XNNPACK's, is the fp32 noise floor beside ours). The last line is issue
40's bar: every model whose median ratio over the runs says ours is slower than LiteRT's
CPU (beyond SAME_RUNTIME_SPREAD), or "none".

    python bench/bench_zoo.py MODEL_OR_DIR [...] [--runs 200] [--repeat 3] [--device SPEC]
        [--prebuild JOBS] [--input_layer NAMES --input_layer_shape SHAPES]

`--input_layer`/`--input_layer_shape` (benchmark_model's flags) resize the inputs of that
name in every model that has one, as a dynamic-length audio model needs (openWakeWord's
melspectrogram declares [1, 1]): ours plans the resized model (delegate_runtime/
static_shapes.py), LiteRT's CPU interpreter resizes before it allocates.

A model that fails in a runtime gets its error in that cell; the others go on. A cold
kernel cache costs each model tens of seconds of program builds; `--prebuild JOBS` fills
it first in JOBS processes at once (the builds are single-threaded), so a whole zoo fits
in one sitting, and measures only after the pool is gone. The inputs and the reference
outputs are made once per model and kept over `--repeat`.
Zoo: MediaPipe's models (`pip download --no-deps mediapipe==0.10.14`, the .tflite files
under mediapipe/modules/), the Keras applications models the official converter makes, and
../shared/models/mobilenet_v1_1.0_224_fp32.tflite.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import io
import json
import math
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import interleaved_ms  # noqa: E402

OURS = ("ours fp32", "ours fp16")
LITERT_GPU = "LiteRT GPU"
#: fp32 error target: within this fraction of the reference output's range.
FP32_OF_RANGE = 1e-5
#: Where ours hands a whole model to LiteRT's CPU interpreter (below the GPU's minimum
#: work), both columns time the same runtime; their ratio still moved 0.96-1.09x from run
#: to run on an H100's host (2026-12-06: alexa_v0.1, hey_jarvis_v0.1, SequenceLSTM int8).
#: Issue 40's bar counts a ratio within this of even as even, not as slower.
SAME_RUNTIME_SPREAD = 0.05


@dataclass
class Row:
    model: str
    nodes: int = 0
    gpu_nodes: int = 0
    launches: int = 0  #: kernels per invoke of ours (fp32)
    ms: dict[str, float] = field(default_factory=dict)
    err: dict[str, float] = field(default_factory=dict)  #: max |d| / range of the reference
    failed: dict[str, str] = field(default_factory=dict)
    #: Why LiteRT's GPU accelerator alone refused the model, where it ran with its CPU.
    litert_gpu_fallback: str = ""


def manifest_entry(path: str) -> dict:
    """The zoo's manifest.json entry of a model beside it (the Keras models), else {}."""
    manifest = Path(path).parent / "manifest.json"
    if manifest.exists():
        return json.loads(manifest.read_text()).get(Path(path).name, {})
    return {}


def input_range(path: str) -> tuple[float, float]:
    """The value range a model's float inputs expect: from the zoo's manifest (the Keras
    models: [0, 255] or [-1, 1]), else [-1, 1]."""
    entry = manifest_entry(path)
    if "input_range" in entry:
        lo, hi = entry["input_range"]
        return float(lo), float(hi)
    return -1.0, 1.0


def zoo_images() -> Callable[..., np.ndarray]:
    """scripts/make_keras_zoo.py's image recipe (blobs and fine noise, 224 x 224), the
    images its models' BatchNorm statistics were calibrated on."""
    spec = importlib.util.spec_from_file_location(
        "make_keras_zoo", Path(__file__).resolve().parents[1] / "scripts" / "make_keras_zoo.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.random_images


def smooth(rng: np.random.Generator, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    """An image-like input: random values on a coarse grid, repeated over 8x8 patches of
    NHWC inputs (white noise drives classifiers to saturated, one-hot outputs)."""
    if len(shape) != 4:
        return rng.uniform(lo, hi, shape)
    n, h, w, c = shape
    coarse = rng.uniform(lo, hi, (n, -(-h // 8), -(-w // 8), c))
    return coarse.repeat(8, axis=1).repeat(8, axis=2)[:, :h, :w, :]


#: input name -> shape, from --input_layer/--input_layer_shape
RESIZED: dict[str, tuple[int, ...]] = {}


def load_resized(path: str):
    """The model at `path`, its inputs named in RESIZED resized (every shape static)."""
    from delegate_runtime import load_model
    from delegate_runtime.static_shapes import with_input_shapes

    model = load_model(path)
    names = {model.main.tensors[t].name for t in model.main.inputs}
    wanted = {n: s for n, s in RESIZED.items() if n in names}
    return with_input_shapes(model, wanted) if wanted else model


def inputs_for(path: str) -> list[np.ndarray]:
    sg = load_resized(path).main
    rng = np.random.default_rng(0)
    lo, hi = input_range(path)
    # the Keras models saturate to one-hot outputs on `smooth` (every runtime then agrees
    # exactly and the error columns prove nothing); their own images keep outputs spread
    keras = "input_range" in manifest_entry(path)
    xs = []
    for t in sg.inputs:
        tensor = sg.tensors[t]
        if tensor.dtype.kind == "f" and keras and tuple(tensor.shape) == (1, 224, 224, 3):
            xs.append(np.ascontiguousarray(zoo_images()(rng, 1, lo, hi), tensor.dtype))
        elif tensor.dtype.kind == "f":
            xs.append(np.ascontiguousarray(smooth(rng, tensor.shape, lo, hi), tensor.dtype))
        elif keras:  # token ids: within the vocabulary its manifest gives
            xs.append(rng.integers(int(lo), int(hi), tensor.shape).astype(tensor.dtype))
        else:
            info = np.iinfo(tensor.dtype)
            xs.append(rng.integers(info.min, info.max, tensor.shape).astype(tensor.dtype))
    return xs


def reference(path: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    from delegate_runtime import litert

    return litert.run(Path(path).read_bytes(), xs, reference=True)


def ours(path: str, xs: list[np.ndarray], precision: str, device: str | None, row: Row):
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(load_resized(path), precision=precision, device=device, log=io.StringIO())
    row.nodes = session.delegation.total_nodes
    row.gpu_nodes = session.delegation.delegated_nodes
    if precision == "fp32":
        row.launches = sum(len(ex.kernels) for ex in session.executors)
    return (lambda: session.invoke(xs)), session.invoke(xs)


def litert_cpu(path: str, xs: list[np.ndarray], threads: int):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=path, num_threads=threads)
    for d, x in zip(it.get_input_details(), xs, strict=True):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], list(x.shape))
    it.allocate_tensors()
    ins = [d["index"] for d in it.get_input_details()]
    outs = [d["index"] for d in it.get_output_details()]

    def step() -> list[np.ndarray]:
        for i, x in zip(ins, xs, strict=True):
            it.set_tensor(i, x)
        it.invoke()
        return [it.get_tensor(o) for o in outs]

    return step, step()


#: Each model's probe child's exit code (0: LiteRT's GPU with its CPU ran it).
_PROBED: dict[str, int] = {}


def _litert_gpu_cpu_probe(path: str, xs: list[np.ndarray]) -> None:
    """In a spawned child: LiteRT's GPU accelerator with its CPU fallback runs `path` once
    (it has crashed processes on models it half takes: issue 40's UNPACK)."""
    litert_gpu(path, xs, with_cpu=True)


def litert_gpu_with_fallback(path: str, xs: list[np.ndarray], row: Row):
    """LiteRT's GPU accelerator alone; where it refuses the model, the GPU with LiteRT's CPU
    beside it (as an app would ask), once a child process has run it without crashing."""
    try:
        return litert_gpu(path, xs)
    except Exception as exc:  # noqa: BLE001 - the CPU fallback is tried, the row says why
        alone = first_line(exc)
    if path not in _PROBED:  # once per model over --repeat
        probe = multiprocessing.get_context("spawn").Process(
            target=_litert_gpu_cpu_probe, args=(path, xs)
        )
        probe.start()
        probe.join(120)
        probe.kill()  # a hung probe counts as failed (exit -9)
        probe.join()
        _PROBED[path] = probe.exitcode
    if _PROBED[path] != 0:
        raise RuntimeError(f"with its CPU fallback exit {_PROBED[path]}; alone {alone}")
    row.litert_gpu_fallback = alone
    return litert_gpu(path, xs, with_cpu=True)


def litert_gpu(path: str, xs: list[np.ndarray], with_cpu: bool = False):
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator

    accel = HardwareAccelerator.GPU | (HardwareAccelerator.CPU if with_cpu else 0)
    model = CompiledModel.from_file(path, hardware_accel=accel)
    key = list(model.get_signature_list())[0]
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    details = list(model.get_output_tensor_details(key).values())
    sizes = [(int(np.prod(d["shape"])), np.dtype(d.get("dtype", np.float32))) for d in details]
    shapes = [tuple(d["shape"]) for d in details]

    def step() -> list[np.ndarray]:
        for buf, x in zip(ins, xs, strict=True):
            buf.write(x)
        model.run_by_index(0, ins, outs)
        return [
            buf.read(n, dt).reshape(shape)
            for buf, (n, dt), shape in zip(outs, sizes, shapes, strict=True)
        ]

    step.model = model  # kept alive with the step
    return step, step()


def max_error(got: list[np.ndarray], want: list[np.ndarray], by_shape: bool = False) -> float:
    """Largest |got - want| over the range of `want` (its magnitude where it is constant,
    e.g. one score), over outputs; inf where `got` holds a NaN or an infinity (fp16
    overflow) that `want` does not. LiteRT's signature may
    order outputs otherwise: `by_shape` pairs each with the closest same-shaped one."""
    worst = 0.0
    for i, w in enumerate(want):
        w64 = w.astype(np.float64)
        span = max(float(w64.max() - w64.min()), float(np.abs(w64).max()), 1e-30)
        pool = [g for g in got if g.size == w.size] if by_shape else [got[i]]
        if not pool:
            return math.nan
        errs = [_abs_diff(g.astype(np.float64).reshape(w.shape), w64) for g in pool]
        worst = max(worst, min(errs) / span)
    return worst


def _abs_diff(got: np.ndarray, want: np.ndarray) -> float:
    d = np.abs(got - want)
    return float(d.max()) if np.isfinite(d).all() else math.inf  # max() would drop a NaN


def first_line(exc: Exception) -> str:
    """An error as a table cell: its type and the first 80 characters of its first line."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:80]


@dataclass
class Prepared:
    """A model's inputs and LiteRT's reference outputs for them (None where its reference
    kernels fail, with why), made once and kept over repeats."""

    xs: list[np.ndarray]
    want: list[np.ndarray] | None
    why: str = ""


def prepare(path: str) -> Prepared:
    xs = inputs_for(path)
    try:
        return Prepared(xs, reference(path, xs))
    except Exception as exc:  # noqa: BLE001 - the row reports it
        why = first_line(exc)
        return Prepared(xs, None, why + " (errors against LiteRT's default CPU kernels)")


def measure(path: str, runs: int, threads: int, device: str | None, prepared: Prepared) -> Row:
    row = Row(Path(path).stem)
    xs, want = prepared.xs, prepared.want
    if want is None:
        row.failed["reference"] = prepared.why
    makers: dict[str, Callable[[], tuple[Callable[[], object], list[np.ndarray]]]] = {
        "ours fp32": lambda: ours(path, xs, "fp32", device, row),
        "ours fp16": lambda: ours(path, xs, "fp16", device, row),
        LITERT_GPU: lambda: litert_gpu_with_fallback(path, xs, row),
        f"LiteRT CPU {threads} thr": lambda: litert_cpu(path, xs, threads),
    }
    steps = {}
    outs: dict[str, list[np.ndarray]] = {}
    for name, make in makers.items():
        try:
            step, out = make()
        except Exception as exc:  # noqa: BLE001 - the row reports it and goes on
            row.failed[name] = first_line(exc)
            continue
        steps[name] = step
        if want is None and name.startswith("LiteRT CPU"):
            want = [np.asarray(o) for o in out]
            row.err = {n: max_error(o, want, by_shape=n == LITERT_GPU) for n, o in outs.items()}
        outs[name] = list(out)
        if want is not None:
            row.err[name] = max_error(list(out), want, by_shape=name == LITERT_GPU)
    if steps:
        stats = interleaved_ms(steps, runs)
        row.ms = {name: median for name, (median, _, _) in stats.items()}
    return row


def _ms(row: Row, name: str) -> str:
    if name not in row.ms:
        return "fail"
    return f"{row.ms[name]:.3f}" + (
        " (+CPU)" if name == LITERT_GPU and row.litert_gpu_fallback else ""
    )


def _ratio(row: Row, anchor: str, name: str) -> float | None:
    """anchor's time over name's: above 1 when `name` is faster."""
    if anchor in row.ms and name in row.ms:
        return row.ms[anchor] / row.ms[name]
    return None


def geomean(values: list[float]) -> float:
    good = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, good)) / len(good)) if good else math.nan


def cpu_ratio(row: Row, threads: int) -> float | None:
    """Ours in fp32 against LiteRT's CPU at `threads` (above 1: ours faster)."""
    return _ratio(row, f"LiteRT CPU {threads} thr", "ours fp32")


def print_bar(runs: list[list[Row]], threads: int) -> None:
    """Issue 40's bar over every run: a model is slower than LiteRT's CPU when the median
    of its ratios is below 1 / (1 + SAME_RUNTIME_SPREAD)."""
    by_model: dict[str, list[float]] = {}
    for rows in runs:
        for r in rows:
            if (v := cpu_ratio(r, threads)) is not None:
                by_model.setdefault(r.model, []).append(v)
    medians = {m: statistics.median(vs) for m, vs in by_model.items()}
    slower = [f"{m} {v:.2f}x" for m, v in medians.items() if v < 1 / (1 + SAME_RUNTIME_SPREAD)]
    print(
        f"\nissue 40's bar over {len(runs)} run(s), each model's median ratio against LiteRT's "
        f"CPU ({len(medians)} models, lowest {min(medians.values(), default=math.nan):.2f}x; "
        f"within {SAME_RUNTIME_SPREAD:.0%} counts as even): slower: {', '.join(slower) or 'none'}"
    )


def print_table(rows: list[Row], threads: int) -> None:
    cpu = f"LiteRT CPU {threads} thr"
    print(
        f"\n| model | nodes (GPU) | kernels | ours fp32 ms | ours fp16 ms | LiteRT GPU ms | "
        f"{cpu} ms | fp32 vs LiteRT GPU | fp16 vs LiteRT GPU | fp32 vs CPU | "
        f"err fp32 | err fp16 | err LiteRT GPU | err LiteRT CPU |"
    )
    print("| --- " * 14 + "|")
    ratios: dict[str, list[float]] = {"fp32 GPU": [], "fp16 GPU": [], "fp32 CPU": []}
    for r in rows:
        gpu32, gpu16, cpu32 = (
            _ratio(r, LITERT_GPU, "ours fp32"),
            _ratio(r, LITERT_GPU, "ours fp16"),
            cpu_ratio(r, threads),
        )
        for key, value in (("fp32 GPU", gpu32), ("fp16 GPU", gpu16), ("fp32 CPU", cpu32)):
            if value is not None:
                ratios[key].append(value)
        cells = [_ms(r, n) for n in (*OURS, LITERT_GPU, cpu)]
        cells += [f"{v:.2f}x" if v is not None else "-" for v in (gpu32, gpu16, cpu32)]
        cells += [f"{r.err[n]:.1e}" if n in r.err else "-" for n in (*OURS, LITERT_GPU, cpu)]
        print(
            f"| {r.model} | {r.nodes} ({r.gpu_nodes}) | {r.launches} | " + " | ".join(cells) + " |"
        )
    print(
        f"\ngeometric mean: fp32 vs LiteRT GPU {geomean(ratios['fp32 GPU']):.2f}x "
        f"({len(ratios['fp32 GPU'])} models), fp16 vs LiteRT GPU "
        f"{geomean(ratios['fp16 GPU']):.2f}x, fp32 vs LiteRT CPU {geomean(ratios['fp32 CPU']):.2f}x"
    )
    slower = [f"{r.model} {v:.2f}x" for r in rows if (v := cpu_ratio(r, threads)) and v < 1]
    print(f"slower in fp32 than LiteRT's CPU in this run: {', '.join(slower) or 'none'}")
    for r in rows:
        fp16, anchor = r.err.get("ours fp16"), r.err.get(LITERT_GPU)
        notes = []
        if fp16 is not None and anchor is not None and fp16 > anchor:
            notes.append(f"fp16 error {fp16:.1e} above LiteRT GPU's {anchor:.1e}")
        fp32, xnnpack = r.err.get("ours fp32", 0.0), r.err.get(cpu)
        if fp32 > FP32_OF_RANGE:
            floor = "" if xnnpack is None else f" (LiteRT CPU's {xnnpack:.1e})"
            notes.append(f"fp32 error {fp32:.1e} of range > {FP32_OF_RANGE:g}{floor}")
        notes += [f"{name}: {why}" for name, why in r.failed.items()]
        if r.litert_gpu_fallback:
            notes.append(f"LiteRT GPU alone: {r.litert_gpu_fallback}; ran with its CPU")
        if notes:
            print(f"  {r.model}: " + "; ".join(notes))


def build_session(
    path: str, precision: str, device: str | None, resized: dict[str, tuple[int, ...]]
) -> tuple[float, str]:
    """(seconds, why it failed or "") to build one GPU session: run in a pool's process,
    where what it leaves is the kernel cache's entries; `resized`: the parent's RESIZED."""
    RESIZED.update(resized)
    from delegate_runtime.gpu.delegate import GpuSession

    start = time.perf_counter()
    try:
        GpuSession(load_resized(path), precision=precision, device=device, log=io.StringIO())
    except Exception as exc:  # noqa: BLE001 - measure() reports it again, in its row
        return time.perf_counter() - start, first_line(exc)
    return time.perf_counter() - start, ""


def prebuild(paths: list[str], device: str | None, jobs: int) -> None:
    """Every model's sessions in both precisions built once in `jobs` processes, the
    largest files first, so that measuring finds the kernel cache warm."""
    tasks = [
        (p, prec)
        for p in sorted(paths, key=lambda p: -Path(p).stat().st_size)
        for prec in ("fp32", "fp16")
    ]
    start = time.perf_counter()
    print(f"prebuilding {len(tasks)} sessions in {jobs} processes", flush=True)
    # spawn: a forked child would inherit this process's OpenCL state, if any
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {
            pool.submit(build_session, p, prec, device, RESIZED): (p, prec) for p, prec in tasks
        }
        for done, future in enumerate(as_completed(futures), 1):
            (path, precision), (seconds, why) = futures[future], future.result()
            note = f": {why}" if why else ""
            print(
                f"  [{done}/{len(tasks)}] {Path(path).stem} {precision} {seconds:.0f} s{note}",
                flush=True,
            )
    print(f"prebuilt in {time.perf_counter() - start:.0f} s", flush=True)


def model_paths(args: list[str]) -> list[str]:
    paths: list[str] = []
    for a in args:
        p = Path(a)
        paths += sorted(str(f) for f in p.glob("*.tflite")) if p.is_dir() else [str(p)]
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help=".tflite files or folders of them")
    ap.add_argument("--runs", type=int, default=200, help="timed invokes per runtime")
    ap.add_argument("--repeat", type=int, default=1, help="whole tables, one after another")
    ap.add_argument("--threads", type=int, default=16, help="LiteRT CPU threads")
    ap.add_argument("--device", default=None)
    ap.add_argument(
        "--prebuild",
        type=int,
        default=0,
        metavar="JOBS",
        help="fill the kernel cache first, JOBS builds at once (0: build as measured)",
    )
    ap.add_argument("--input_layer", default="", help="input names, comma-separated")
    ap.add_argument("--input_layer_shape", default="", help="their shapes: 1,1760:1,16")
    a = ap.parse_args()
    if a.input_layer:
        from delegate_runtime.static_shapes import parse_input_layers

        RESIZED.update(parse_input_layers(a.input_layer, a.input_layer_shape))
    paths = model_paths(a.models)
    if a.prebuild > 0:
        prebuild(paths, a.device, a.prebuild)
    prepared: dict[str, Prepared] = {}
    runs: list[list[Row]] = []
    for run in range(a.repeat):
        rows = []
        for path in paths:
            if path not in prepared:
                prepared[path] = prepare(path)
            rows.append(measure(path, a.runs, a.threads, a.device, prepared[path]))
            gc.collect()  # release one model's sessions before the next
            print(f"  measured {rows[-1].model}: {rows[-1].ms}", flush=True)
        print(f"\n## run {run + 1} of {a.repeat}: median of {a.runs} per runtime, interleaved")
        print_table(rows, a.threads)
        runs.append(rows)
    print_bar(runs, a.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
