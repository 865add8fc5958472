"""A program of a model's own: its kernels only, each launch's kernel a copy that takes
the partition's arena (opencl/arena.py) in place of its buffers, GEMM and depthwise
copies with their integer and float arguments compiled in as constants.

The shared program's kernels take shapes, window geometry, activation and epilogue codes
as arguments, so one build serves every model, and that build holds every kernel of every
op. On a GPU, whose driver caches what it compiles, a model's own program is built
instead: only the kernels its launches run, each as a copy of its kernel that

- reads its buffers through the arena: one buffer argument and an int16 of offsets per
  16 buffers (`arena_`, `offs_`, `offs1_`, ...) instead of the buffers, each of which
  costs NVIDIA's driver host time on every launch;
- for GEMM and depthwise launches, has its non-const int and float parameters (int,
  int2 ... float16) fixed to the launch's values, which lets the compiler unroll the
  window loops, turn divisions by shapes into multiplications and drop the epilogue's
  unused switch cases.

A copy declares each parameter it no longer takes as a variable holding what the launch
passed (`int M = 196; __global const store_t* A = (...)(arena_ + ...);`), so it computes
exactly what the generic kernel computes for that launch; `Launch.copy_args` says which
arguments it still takes. Copies are made from the program source itself (cl_source.py
reads it).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..switches import Switches
from .arena import ARENA_UNIT
from .cl_source import KERNEL_HEAD, Param, kernel_params, read_source
from .launch import IN_ARENA, CopyArgs, Launch

#: Kernels whose int and float arguments are fixed (name prefixes): the convolution
#: kernels, where the time is, and those ending a classifier and at a partition's edges,
#: whose copies then take nothing but buffers and can join a persistent kernel
#: (persistent.py). Other kernels get one copy, shared by their launches.
SPECIALIZED_PREFIXES = ("gemm", "depthwise", "mean_axis", "softmax", "to_storage", "from_storage")
#: Buffer offsets per int16 parameter of a copy.
OFFSETS_PER_PARAM = 16
#: Between a kernel's name and its copy's digest (no generic kernel's name holds it).
SEPARATOR = "__"


def generic_name(kernel: str) -> str:
    """The generic kernel a (possibly specialized) kernel name is a copy of."""
    return kernel.split(SEPARATOR, 1)[0]


def enabled(is_gpu: bool, option: bool | None, switches: Switches) -> bool:
    """Whether a session specializes: its option, else the switch where it was set (on
    every device), else on GPUs and off on CPU OpenCL, where each model's build would
    cost seconds."""
    if option is not None:
        return option
    forced = switches.explicit("specialize")
    if forced is not None:
        return forced
    return switches.specialize and is_gpu


def c_literal(width: int, value: Any) -> str | None:
    """`value` as an OpenCL literal of an int vector of `width`, None if it is no such."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" or arr.size != width or arr.ndim > 1:
        return None
    items = ", ".join(str(int(v)) for v in arr.reshape(-1))
    return items if width == 1 else f"(int{width})({items})"


def float_literal(width: int, value: Any) -> str | None:
    """`value` as an OpenCL float vector of `width` given by its bits (exact, NaN and
    infinities included), None if it is no float32 value of that width."""
    arr = np.asarray(value)
    if arr.dtype != np.float32 or arr.size != width or arr.ndim > 1:
        return None
    bits = ", ".join(f"0x{int(b):08x}u" for b in arr.reshape(-1).view(np.uint32))
    return f"as_float({bits})" if width == 1 else f"as_float{width}((uint{width})({bits}))"


@dataclass
class ModelProgram:
    """A program for one model's launches, and the kernel each launch now names."""

    source: str
    names: dict[int, str]  #: launch position -> its copy's name
    args: dict[int, CopyArgs]  #: launch position -> the arguments its copy takes

    @property
    def specialized(self) -> int:
        """Distinct copies."""
        return len(set(self.names.values()))


def model_program(source: str, launches: list[Launch]) -> ModelProgram:
    """A program holding only what `launches` run: a copy of each launch's kernel (one
    per distinct kernel, fixed values and argument layout), or the kernel itself where
    a copy would change nothing. It is `source` (the generic program) with every other kernel
    removed and each copy where its original stood, so the helpers and macros around it
    are the same."""
    text, _, spans = read_source(source)
    missing = {launch.kernel for launch in launches} - spans.keys()
    if missing:
        raise KeyError(f"no kernel {sorted(missing)} in the program source")
    copies: dict[str, tuple[int, str]] = {}  # name -> (original's start, text)
    names: dict[int, str] = {}
    taken: dict[int, CopyArgs] = {}
    kept: set[str] = set()
    for pos, launch in enumerate(launches):
        kt = spans[launch.kernel]
        plan = _copy_plan(launch, kernel_params(source, launch.kernel))
        if plan is None:
            kept.add(launch.kernel)
            continue
        decls, signature, copy_args = plan
        digest = hashlib.sha256(f"{launch.kernel}|{signature}|{decls}".encode()).hexdigest()[:10]
        name = f"{launch.kernel}{SEPARATOR}{digest}"
        if name not in copies:
            head = KERNEL_HEAD.match(text, kt.start)
            assert head is not None  # kernels() found it there
            named = re.sub(rf"\b{re.escape(launch.kernel)}\b", name, head.group(), count=1)
            body = text[kt.body_open + 1 : kt.end]
            copies[name] = (kt.start, f"{named}{signature}) {{\n  {decls}\n{body}\n")
        names[pos] = name
        taken[pos] = copy_args
    by_start: dict[int, list[str]] = {}
    for start, copy in copies.values():
        by_start.setdefault(start, []).append(copy)
    parts, at = [], 0
    for name, kt in sorted(spans.items(), key=lambda item: item[1].start):
        parts += [source[at : kt.start], *by_start.get(kt.start, [])]
        if name in kept:
            parts.append(source[kt.start : kt.end])
        at = kt.end
    return ModelProgram("".join(parts) + source[at:], names, taken)


def offsets_param(vector: int) -> str:
    """The name of a copy's int16 parameter holding buffer offsets 16 * vector onwards."""
    return "offs_" if vector == 0 else f"offs{vector}_"


def _copy_plan(launch: Launch, params: list[Param]) -> tuple[str, str, CopyArgs] | None:
    """For `launch`'s copy: the declarations opening its body (the parameters it no
    longer takes), its parameter list and the arguments it takes; None where the generic
    kernel serves (nothing to fix, no buffer for the arena)."""
    if len(params) != len(launch.args):
        raise ValueError(
            f"{launch.kernel} takes {len(params)} arguments; its launch has {len(launch.args)}"
        )
    fix = launch.kernel.startswith(SPECIALIZED_PREFIXES)
    decls, offsets, kept = [], [], []
    for i, (param, arg) in enumerate(zip(params, launch.args, strict=True)):
        literal = None
        if fix and param.int_width is not None:
            literal = c_literal(param.int_width, arg)
        elif fix and param.float_width is not None:
            literal = float_literal(param.float_width, arg)
        if literal is not None:
            decls.append(f"{param.type} {param.name} = {literal};")
        elif param.global_pointer and isinstance(arg, IN_ARENA):
            vector, lane = divmod(len(offsets), OFFSETS_PER_PARAM)
            unit = f"(size_t){offsets_param(vector)}.s{lane:x} * {ARENA_UNIT}"
            decls.append(f"{param.type} {param.name} = ({param.type})(arena_ + {unit});")
            offsets.append(i)
        else:
            kept.append(i)
    if not decls:
        return None
    vectors = -(-len(offsets) // OFFSETS_PER_PARAM)
    signature = ["__global uchar* arena_"] if offsets else []
    signature += [f"int16 {offsets_param(v)}" for v in range(vectors)]
    signature += [f"{params[i].type} {params[i].name}" for i in kept]
    return " ".join(decls), ", ".join(signature), CopyArgs(tuple(offsets), tuple(kept))
