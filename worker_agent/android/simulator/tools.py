"""The simulated phone's programs: `benchmark_model` and inference diff's `run_eval`, which
measure with delegate_runtime and print the official tools' lines.

A pushed file runs as the program its name says (the phone cannot run the lab's real
binaries); the phone's faults apply: slow start, a connection dropped mid-run, garbage or
truncated output.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import tempfile
import threading
from pathlib import Path

from delegate_runtime.errors import DevicefarmError

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


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgError(message)


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
        except DevicefarmError as exc:
            out.write(f"ERROR: {exc}\n")
            status = 1
        if out.hold:
            text = "".join(out.kept)
            ctx.write(text[: len(text) // 2])
            return 134  # aborted
    return status


def benchmark_model(ctx: Context) -> int:
    from delegate_runtime.commands.benchmark import add_arguments, options_from_args
    from delegate_runtime.tools.benchmark import run_benchmark

    parser = _Parser(prog="benchmark_model", add_help=False)
    add_arguments(parser)
    try:
        args, unknown = parser.parse_known_args(ctx.argv[1:])
    except _ArgError as exc:
        ctx.write(f"ERROR: {exc}\nERROR: Benchmarking failed.\n")
        return 1
    ctx.write("STARTING!\nLog parameter values verbosely: [0]\n")
    ctx.write(f"Graph: [{args.graph}]\n" + ("Use gpu: [1]\n" if args.use_gpu else ""))
    if unknown:
        ctx.write(f"WARNING: Unconsumed cmdline flags: {' '.join(unknown)}\n")
    if not _start(ctx):
        return 143
    if ctx.phone.profile.faults.garbage == "noise":
        return _noise(ctx)
    options = options_from_args(args)

    def body(path: str, out: _Output) -> None:
        run_benchmark(path, options, progress=_cancel_check(ctx), out=out)

    status = _run_on_model(ctx, args.graph, body)
    if status == 1:
        ctx.write("ERROR: Benchmarking failed.\n")
    return status


def run_eval(ctx: Context) -> int:
    """inference_diff's run_eval: --model_file_path, --num_runs, --delegate, --output_file_path."""
    from delegate_runtime.tools.benchmark import BenchmarkOptions
    from delegate_runtime.tools.diff import run_inference_diff

    parser = _Parser(prog="run_eval", add_help=False)
    parser.add_argument("--model_file_path", required=True)
    parser.add_argument("--output_file_path", default="")
    parser.add_argument("--num_runs", type=int, default=50)
    parser.add_argument("--delegate", default="")
    try:
        args, _ = parser.parse_known_args(ctx.argv[1:])
    except _ArgError as exc:
        ctx.write(f"ERROR: {exc}\n")
        return 1
    if not _start(ctx):
        return 143
    if ctx.phone.profile.faults.garbage == "noise":
        return _noise(ctx)
    use_gpu = args.delegate == "gpu"
    options = BenchmarkOptions(use_gpu=use_gpu, precision="fp32")

    def body(path: str, out: _Output) -> None:
        result = run_inference_diff(path, options, num_runs=args.num_runs, out=out)
        if args.output_file_path:
            ctx.phone.fs.write(args.output_file_path, result.log.encode(), mkdirs=False)

    return _run_on_model(ctx, args.model_file_path, body)


def _not_simulated(ctx: Context) -> int:
    ctx.write(f"/system/bin/sh: {ctx.argv[0]}: can't execute: Exec format error\n")
    return CANNOT_EXECUTE


PROGRAMS: dict[str, Command] = {"benchmark_model": benchmark_model, "run_eval": run_eval}


def program_for(path: str) -> Command:
    """The simulated program a pushed file runs as (by its file name)."""
    return PROGRAMS.get(path.rsplit("/", 1)[-1], _not_simulated)
