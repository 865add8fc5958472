"""The simulated phone's programs: `benchmark_model` and inference diff's `run_eval`, which
measure with delegate_runtime and print the official tools' lines.

A pushed file runs as the program its name says (the phone cannot run the lab's real
binaries); the phone's faults apply: slow start, a connection dropped mid-run, garbage or
truncated output.
"""

from __future__ import annotations

import io
import os
import random
import tempfile
import threading
from pathlib import Path

import numpy as np

from delegate_runtime.errors import DevicefarmError

from . import accelerators, delegate_profile, flags, input_layers
from .fs import FsError
from .shell import CANNOT_EXECUTE, Command, Context
from .transport import StreamClosed

#: Bytes of junk the "noise" fault prints.
NOISE_BYTES = 2048
_WARM = threading.Lock()
_warmed = False


def _warm_runtime() -> None:
    """Load the runtime's op registry once, before phones run tools on threads at once.

    NOTE: delegate_runtime fills its kernel registry lazily, unlocked: two first runs on
    two threads can see it half filled ("model uses ops this runtime cannot run").
    """
    global _warmed
    with _WARM:
        if not _warmed:
            from delegate_runtime.ops.registry import supported_ops

            supported_ops()
            _warmed = True


class _Output(io.TextIOBase):
    """The program's stdout: lines go to the stream (the temp path shown as the phone's)."""

    def __init__(self, ctx: Context, tmp_path: str, phone_path: str, hold: bool):
        self.ctx = ctx
        self.tmp_path, self.phone_path = tmp_path, phone_path
        self.hold = hold  #: keep everything (for the "truncated" fault)
        self.kept: list[str] = []

    def write(self, text: str) -> int:
        if self.ctx.cancelled():
            raise StreamClosed("killed")
        text = text.replace(self.tmp_path, self.phone_path)
        if self.hold:
            self.kept.append(text)
        else:
            self.ctx.write(text)
        return len(text)


def _cancel_check(ctx: Context):
    def progress(stage: str, done: int, total: int | None) -> None:
        if ctx.cancelled():
            raise StreamClosed("killed")

    return progress


def _start(ctx: Context) -> bool:
    """Apply the start-of-run faults; False when the program was killed meanwhile."""
    faults = ctx.phone.profile.faults
    if faults.drop_after_s is not None:
        ctx.phone.drop_later(faults.drop_after_s)
    return not faults.slow_s or ctx.sleep(faults.slow_s)


def _noise(ctx: Context) -> int:
    rng = random.Random(len(ctx.argv))
    junk = bytes(rng.randrange(256) for _ in range(NOISE_BYTES))
    ctx.write(b"count=\x00\xff STARTING?!\n" + junk + b"\nSegmentation fault\n")
    return 139


def _run_on_model(ctx: Context, phone_path: str, body) -> int:
    """Copy the phone's model file to a temp file and run `body(path, out)` on it."""
    try:
        data = ctx.phone.fs.read(phone_path)
    except FsError:
        ctx.write(f"ERROR: Could not open '{phone_path}'.\nERROR: Failed to load model\n")
        return 1
    faults = ctx.phone.profile.faults
    _warm_runtime()
    with tempfile.TemporaryDirectory(prefix="adb-sim-") as tmp:
        path = os.path.join(tmp, Path(phone_path).name or "model.tflite")
        Path(path).write_bytes(data)
        out = _Output(ctx, path, phone_path, hold=faults.garbage == "truncated")
        try:
            body(path, out)
            status = 0
        except input_layers.ToolExit as exc:  # the tool's own checks, with its own words
            out.write(exc.text)
            status = exc.status
        except DevicefarmError as exc:
            out.write(f"ERROR: {exc}\n")
            status = 1
        if out.hold:
            text = "".join(out.kept)
            # Cut before the timed runs' statistics (the op profile makes half too long).
            cut = text.rfind("count=", 0, max(text.find("Inference timings"), 0))
            ctx.write(text[: cut if cut > 0 else len(text) // 2])
            return 134  # aborted
    return status


def _parse_flags(ctx: Context, tool: str) -> flags.Parsed | None:
    """The tool's flags as Flags::Parse reads them; None (after the real tool's error
    lines) when a value does not parse. Unknown flags are only warned about."""
    table = flags.TABLES[tool]
    parsed = flags.parse(ctx.argv, table)
    if parsed.errors:
        ctx.write("".join(f"ERROR: {e}\n" for e in parsed.errors))
        ctx.write("ERROR: " + flags.usage(ctx.argv[0], table))
        return None
    if parsed.unconsumed:
        ctx.write(f"WARNING: Unconsumed cmdline flags: {' '.join(parsed.unconsumed)}\n")
    return parsed


class _After(io.TextIOBase):
    """Passes lines on, writing `extra` once right after the `Loaded model` line."""

    def __init__(self, out, extra: str):
        self.out, self.extra = out, extra

    def write(self, text: str) -> int:
        self.out.write(text)
        if self.extra and "Loaded model" in text:
            self.out.write(self.extra)
            self.extra = ""
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def _has(ctx: Context, path: str) -> bool:
    try:
        ctx.phone.fs.read(path)
    except FsError:
        return False
    return True


def _hexagon_ready(ctx: Context, lib_path: str) -> bool:
    """The Hexagon delegate loads libhexagon_interface.so (a system library path or the
    tool's folder) and the skel libraries from --hexagon_lib_path."""
    interface = any(_has(ctx, f"{d}/libhexagon_interface.so") for d in ("/vendor/lib64", lib_path))
    return interface and _has(ctx, f"{lib_path.rstrip('/')}/libhexagon_nn_skel.so")


def _sdk(ctx: Context) -> int:
    raw = ctx.phone.profile.props.get("ro.build.version.sdk", "0")
    return int(raw) if raw.isdigit() else 0


def _accelerator(ctx: Context, v: dict) -> tuple[str | None, str, str]:
    """Which non-GPU delegate benchmark_model applies: (delegate or None, lines printed
    before the run, the error that ends it ("" when it runs))."""
    prof = ctx.phone.profile
    if v["use_nnapi"]:
        listed = ",".join(prof.nnapi)
        lines = f"INFO: NNAPI accelerators available: [{listed}]\n" if listed else ""
        if _sdk(ctx) < 27 or not prof.nnapi:
            return (
                None,
                lines + "WARNING: NNAPI acceleration is unsupported on this platform.\n",
                "",
            )
        name = v["nnapi_accelerator_name"]
        if name and name not in prof.nnapi:
            return (
                None,
                lines,
                (
                    f"ERROR: Could not find the specified NNAPI accelerator: {name}. "
                    f"Must be one of: {{{listed}}}.\nERROR: Failed to apply NNAPI delegate.\n"
                ),
            )
        return "nnapi", lines + "INFO: Created TensorFlow Lite delegate for NNAPI.\n", ""
    if v["use_hexagon"]:
        if not _hexagon_ready(ctx, v["hexagon_lib_path"]):
            return (
                None,
                (
                    "WARNING: Could not create Hexagon delegate: platform may not support delegate "
                    "or required libraries are missing\n"
                ),
                "",
            )
        return "hexagon", "", ""
    if v["use_xnnpack"]:
        return "xnnpack", "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n", ""
    return None, "", ""


def _gpu_backend_error(ctx: Context, v: dict) -> str:
    """The GPU delegate forced to a backend the phone lacks fails (gpu_backend's help:
    "fail if unsuccessful"); opencl_wrapper.cc's words for a missing OpenCL library."""
    if not v["use_gpu"] or v["gpu_backend"] != "cl" or ctx.phone.profile.opencl_lib:
        return ""
    return (
        "ERROR: TfLiteGpuDelegate Init: Can not open OpenCL library on this device - "
        'dlopen failed: library "libOpenCL.so" not found\n'
        "ERROR: TfLiteGpuDelegate Prepare: delegate is not initialized\n"
        "ERROR: Node number 0 (TfLiteGpuDelegateV2) failed to prepare.\n"
        "ERROR: Failed to apply GPU delegate.\n"
    )


def benchmark_model(ctx: Context) -> int:
    from delegate_runtime.reader import load_model
    from delegate_runtime.tools.benchmark import INPUT_SEED, BenchmarkOptions, run_benchmark
    from delegate_runtime.tools.inputs import benchmark_inputs

    parsed = _parse_flags(ctx, "benchmark_model")
    if parsed is None:
        ctx.write("ERROR: Benchmarking failed.\n")
        return 1
    v = parsed.values
    ctx.write("STARTING!\nLog parameter values verbosely: [0]\n")
    ctx.write(f"Graph: [{v['graph']}]\n" + ("Use gpu: [1]\n" if v["use_gpu"] else ""))
    if not v["graph"]:
        ctx.write(
            "ERROR: Please specify the name of your TF Lite input file with --graph\n"
            "ERROR: Benchmarking failed.\n"
        )
        return 1
    try:  # ValidateParams: the input flags are read before the model is
        layers = input_layers.parse(
            v["input_layer"],
            v["input_layer_shape"],
            v["input_layer_value_range"],
            v["input_layer_value_files"],
        )
    except input_layers.ToolExit as exc:
        ctx.write(exc.text + ("ERROR: Benchmarking failed.\n" if exc.status == 1 else ""))
        return exc.status
    if not _start(ctx):
        return 143
    if ctx.phone.profile.faults.garbage == "noise":
        return _noise(ctx)
    accel, accel_lines, accel_error = _accelerator(ctx, v)
    failed = accel_error or _gpu_backend_error(ctx, v)
    if failed:
        ctx.write(f"INFO: Loaded model {v['graph']}\n{accel_lines}{failed}")
        ctx.write("ERROR: Benchmarking failed.\n")
        return 1
    options = BenchmarkOptions(
        num_runs=v["num_runs"],
        min_secs=v["min_secs"],
        max_secs=v["max_secs"],
        warmup_runs=v["warmup_runs"],
        warmup_min_secs=v["warmup_min_secs"],
        use_gpu=v["use_gpu"],
        precision="fp16" if v["use_gpu"] and v["gpu_precision_loss_allowed"] else "fp32",
        enable_quant=v["gpu_experimental_enable_quant"],
        max_delegated_partitions=max(v["max_delegated_partitions"], 1),
        serialize_dir=v["delegate_serialize_dir"] or None,
        serialize_token=v["delegate_serialize_token"] or None,
        enable_op_profiling=v["enable_op_profiling"],
        report_peak_memory=v["report_peak_memory_footprint"],
        require_full_delegation=v["require_full_delegation"],
        report_measurement=False,
    )

    def user_values(path: str, out: _Output) -> list[np.ndarray] | None:
        """Init and PrepareInputData's checks and values, with input flags given."""
        if not layers:
            return None
        model = load_model(path)
        return input_layers.values(
            model,
            layers,
            ctx.phone.fs.read,
            out.write,
            lambda: benchmark_inputs(model, np.random.default_rng(INPUT_SEED)),
        )

    def delegated(path: str, out: _Output):
        """The stream with the accelerator's lines after `Loaded model`."""
        if accel is None:
            return _After(out, accel_lines)
        parts, total = accelerators.partitions(
            accel, load_model(path), v["max_delegated_partitions"]
        )
        return _After(out, accel_lines + accelerators.delegation_lines(accel, parts, total))

    def body(path: str, out: _Output) -> None:
        inputs = user_values(path, out)
        out = delegated(path, out)
        if not options.enable_op_profiling:
            run_benchmark(path, options, progress=_cancel_check(ctx), out=out, inputs=inputs)
            return
        # the profile as a phone's TFLite prints it: a node per delegated partition
        held = delegate_profile.HeldProfile(out)
        result = run_benchmark(path, options, progress=_cancel_check(ctx), out=held, inputs=inputs)
        model = load_model(path)
        delegates = (
            delegate_profile.delegate_nodes(
                model, options.enable_quant, options.max_delegated_partitions
            )
            if options.use_gpu
            else []
        )
        profile = delegate_profile.regroup(result.op_profile or {}, delegates, model)
        out.write(delegate_profile.format_like_tflite(held.text, profile))

    status = _run_on_model(ctx, v["graph"], body)
    if status == 1:
        ctx.write("ERROR: Benchmarking failed.\n")
    return status


#: run_eval.cc: the delegates `--delegate` names (ParseStringToDelegateType).
RUN_EVAL_DELEGATES = ("nnapi", "gpu", "hexagon", "xnnpack", "coreml")


def _eval_delegate_error(ctx: Context, v: dict) -> str:
    """evaluation_delegate_provider.cc's error when `--delegate` cannot be created here
    (the CPU-side delegates are simulated by the CPU path; coreml is iOS only)."""
    d, prof = v["delegate"], ctx.phone.profile
    if d == "coreml":
        return "Core ML delegate not supported."
    if d == "nnapi" and (_sdk(ctx) < 27 or not prof.nnapi):
        return "NNAPI not supported"
    if (
        d == "nnapi"
        and v["nnapi_accelerator_name"]
        and v["nnapi_accelerator_name"] not in prof.nnapi
    ):
        return (f"Could not find the specified NNAPI accelerator: {v['nnapi_accelerator_name']}. "
                f"Must be one of: {{{','.join(prof.nnapi)}}}.")  # fmt: skip
    if d == "hexagon" and not _hexagon_ready(ctx, v["hexagon_lib_path"]):
        return (
            "Hexagon delegate is not supported on the platform or required libraries are missing."
        )
    return ""


def run_eval(ctx: Context) -> int:
    """inference_diff's run_eval: --model_file, --output_file_path, --num_runs,
    --num_interpreter_threads, --delegate, and the providers' flags."""
    from delegate_runtime.tools.benchmark import BenchmarkOptions
    from delegate_runtime.tools.diff import run_inference_diff

    failed = "ERROR: Could not run the task evaluation!\n"
    parsed = _parse_flags(ctx, "run_eval")
    if parsed is None:
        ctx.write(failed)
        return 1
    v = parsed.values
    if v["delegate"] and v["delegate"] not in RUN_EVAL_DELEGATES:
        ctx.write(f"WARNING: Unsupported TFLite delegate: {v['delegate']}\n{failed}")
        return 1
    why = _eval_delegate_error(ctx, v)
    if why:
        ctx.write(f"ERROR: {why}\n{failed}")
        return 1
    if not _start(ctx):
        return 143
    if ctx.phone.profile.faults.garbage == "noise":
        return _noise(ctx)
    use_gpu = v["delegate"] == "gpu"
    # The GPU provider's default lets the delegate compute in fp16 (precision loss on).
    fp16 = use_gpu and v["gpu_precision_loss_allowed"]
    options = BenchmarkOptions(use_gpu=use_gpu, precision="fp16" if fp16 else "fp32")

    def body(path: str, out: _Output) -> None:
        result = run_inference_diff(path, options, num_runs=v["num_runs"], out=out)
        if v["output_file_path"]:
            ctx.phone.fs.write(v["output_file_path"], result.log.encode(), mkdirs=False)

    status = _run_on_model(ctx, v["model_file"], body)
    if status == 1:
        ctx.write(failed)
    return status


def _not_simulated(ctx: Context) -> int:
    ctx.write(f"/system/bin/sh: {ctx.argv[0]}: can't execute: Exec format error\n")
    return CANNOT_EXECUTE


PROGRAMS: dict[str, Command] = {"benchmark_model": benchmark_model, "run_eval": run_eval}


def program_for(path: str) -> Command:
    """The simulated program a pushed file runs as (by its file name)."""
    return PROGRAMS.get(path.rsplit("/", 1)[-1], _not_simulated)
