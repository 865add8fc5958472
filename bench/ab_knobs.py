"""This tree's GPU delegate with some of its tuning constants changed, against itself as
shipped, in one process and one OpenCL context (issue 14).

Each variant is the switchboard (delegate_runtime/gpu/switches.py) with some switches
changed, passed to its session as `GpuSession(..., switches=...)` (the fusions' rules
among them: the session's switches reach each rule through its fusion plan); constants not
on the switchboard (the GEMM's variants) are set on their modules while the variant's
model is lowered. The sessions then take turns in rounds. Per model: each variant's launches, median host-in to host-out,
the shipped tree's time over the variant's, the largest difference of its outputs
from the shipped ones (bench_zoo's max_error: over the range), and its session's init
(of which building its program, cold unless the kernel cache held it); with
`--reference`, each variant's error against LiteRT's reference kernels too (bench_zoo's
max_error, over the range: knobs that change the arithmetic). Separate
processes on a lent machine differed by up to 1.5x on the same tree; one process keeps
the host alike for all.

    python bench/ab_knobs.py MODEL [...] --variant NAME=SWITCH=VALUE[,...] [...]
        [--runs 600] [--rounds 10] [--precision fp32] [--device SPEC] [--reference]

e.g. `--variant split=persistent.MAX_RUN_BYTES=None`, `--variant g8=gemm_groups_per_cu=8`,
`--variant aligned1=opencl.fusions.depthwise_into_gemm.DEPTHWISE_ALIGNED=1` (SWITCH: a
switch's field or its name in the configuration record, with or without "gpu." or the
old "opencl." module path), or a constant not on the switchboard:
`--variant tk32=opencl.records.gemm_kernel.GEMM_VARIANTS={...}` (a module under
delegate_runtime.gpu and its constant); VALUE is a Python literal.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SHIPPED = "shipped"


@dataclass
class Variant:
    """A variant's switches changed (field -> value), and constants not on the
    switchboard set on their modules ((module, CONST, value) each)."""

    switches: dict[str, Any] = field(default_factory=dict)
    constants: list[tuple[Any, str, Any]] = field(default_factory=list)


def parse_variant(text: str) -> tuple[str, Variant]:
    """'NAME=SWITCH=VALUE,...' -> (NAME, its Variant); a SWITCH no switch has is
    MODULE.CONST, a constant of a module under delegate_runtime.gpu."""
    from labkit.knobs import parse_knob

    name, _, settings = text.partition("=")
    variant = Variant()
    # settings apart at commas that start the next NAME= (values may hold commas)
    for setting in re.split(r",(?=[A-Za-z_][\w.]*=)", settings):
        try:
            knob = parse_knob(setting, "delegate_runtime.gpu")
        except ValueError as exc:
            raise SystemExit(f"--variant {text!r}: {exc}") from exc
        if len(knob) == 2:
            variant.switches[knob[0]] = knob[1]
        else:
            variant.constants.append(knob)
    if not name or not (variant.switches or variant.constants):
        raise SystemExit(f"--variant {text!r}: expected NAME=SWITCH=VALUE[,...]")
    return name, variant


@contextlib.contextmanager
def changed(changes: list[tuple[Any, str, Any]]) -> Iterator[None]:
    old = [(module, const, getattr(module, const)) for module, const, _ in changes]
    try:
        for module, const, value in changes:
            setattr(module, const, value)
        yield
    finally:
        for module, const, value in old:
            setattr(module, const, value)


def compare(
    path: str,
    variants: dict[str, Variant],
    precision: str,
    device: str | None,
    runs: int,
    rounds: int,
    against_reference: bool = False,
):
    from bench_gpu import interleaved_ms
    from bench_zoo import inputs_for, max_error, reference

    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.switches import Switches

    xs = inputs_for(path)
    base = Switches.from_env()
    sessions, outputs = {}, {}
    for name, variant in {SHIPPED: Variant(), **variants}.items():
        switches = base.replace(**variant.switches)
        with changed(variant.constants):
            sessions[name] = GpuSession(
                load_model(path), precision, device, io.StringIO(), switches=switches
            )
        outputs[name] = sessions[name].invoke(xs)
    steps = {n: (lambda s=s: s.invoke(xs)) for n, s in sessions.items()}
    stats = interleaved_ms(steps, runs, rounds)
    want = reference(path, xs) if against_reference else None
    base = stats[SHIPPED][0]
    print(f"\n== {Path(path).stem} ({precision}, median of {runs} per variant in {rounds} rounds)")
    print(
        "| variant | launches | ms (p10-p90) | shipped / variant | max diff (of range) "
        "| init ms (kernels built) |" + (" error vs reference (of range) |" if want else "")
    )
    print("| --- | --- | --- | --- | --- | --- |" + (" --- |" if want else ""))
    for name, (median, lo, hi) in stats.items():
        diff = max_error(outputs[name], outputs[SHIPPED])
        session = sessions[name]
        launches = sum(len(ex.kernels) for ex in session.executors)
        phases = session.init_phases_ms
        built = phases.get("program", 0.0)
        print(
            f"| {name} | {launches} | {median:.3f} ({lo:.3f}-{hi:.3f}) | {base / median:.3f}x "
            f"| {diff:.1e} | {phases['total']:.0f} ({built:.0f}) |"
            + (f" {max_error(outputs[name], want):.2e} |" if want else "")
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--variant", action="append", default=[], help="NAME=SWITCH=VALUE,...")
    ap.add_argument("--runs", type=int, default=600, help="timed invokes per variant and model")
    ap.add_argument("--rounds", type=int, default=10, help="turns each variant takes")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--device", default=None)
    ap.add_argument(
        "--reference",
        action="store_true",
        help="each variant's error vs LiteRT's reference kernels",
    )
    a = ap.parse_args()
    variants = dict(parse_variant(v) for v in a.variant)
    for path in a.models:
        try:
            compare(path, variants, a.precision, a.device, a.runs, a.rounds, a.reference)
        except Exception as exc:  # named, and the other models go on
            print(f"\n== {Path(path).stem}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
