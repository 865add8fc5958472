"""A program of a model's own: its kernels only, each GEMM and depthwise launch's kernel
specialized to it (its integer arguments compiled in as constants).

The shared program's kernels take shapes, window geometry, activation and epilogue codes
as arguments, so one build serves every model, and that build holds every kernel of every
op. On a GPU, whose driver caches what it compiles, a model's own program is built
instead: only the kernels its launches run, and for each GEMM and depthwise launch a copy
of its kernel with those integers fixed, which lets the compiler unroll the window loops,
turn divisions by shapes into multiplications and drop the epilogue's unused switch
cases. A copy keeps the signature (arguments are still set as before) and assigns the
fixed values to its parameters first: it computes exactly what the generic kernel
computes for that launch. Copies are made from the program source itself (cl_source.py
reads it): every non-const int, int2, int4, int8 or int16 parameter whose launch
argument is an integer is fixed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cl_source import KernelText, Macro, Param, kernels, macros, parse_params, strip_comments
from .launch import Launch

#: Kernels specialized (name prefixes): the convolution kernels, where the time is.
SPECIALIZED_PREFIXES = ("gemm", "depthwise")
#: Specialize on GPUs unless DEVICEFARM_GPU_SPECIALIZE says otherwise (ab_knobs can flip it).
ON_GPU = True
#: "1"/"0" forces specialization on/off on every device (tests, CPU OpenCL).
ENV = "DEVICEFARM_GPU_SPECIALIZE"
#: Between a kernel's name and its copy's digest (no generic kernel's name holds it).
SEPARATOR = "__"


def generic_name(kernel: str) -> str:
    """The generic kernel a (possibly specialized) kernel name is a copy of."""
    return kernel.split(SEPARATOR, 1)[0]


def enabled(is_gpu: bool, option: bool | None = None) -> bool:
    """Whether a session specializes: its option, else $DEVICEFARM_GPU_SPECIALIZE, else on
    GPUs (ON_GPU) and off on CPU OpenCL, where each model's build would cost seconds."""
    if option is not None:
        return option
    env = os.environ.get(ENV, "")
    if env in ("0", "1"):
        return env == "1"
    return ON_GPU and is_gpu


def c_literal(width: int, value: Any) -> str | None:
    """`value` as an OpenCL literal of an int vector of `width`, None if it is no such."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" or arr.size != width or arr.ndim > 1:
        return None
    items = ", ".join(str(int(v)) for v in arr.reshape(-1))
    return items if width == 1 else f"(int{width})({items})"


@dataclass
class ModelProgram:
    """A program for one model's launches, and the kernel each launch now names."""

    source: str
    names: dict[int, str]  #: launch position -> its specialized copy's name

    @property
    def specialized(self) -> int:
        """Distinct specialized copies."""
        return len(set(self.names.values()))


@functools.lru_cache(maxsize=4)
def _read(source: str) -> tuple[str, dict[str, Macro], dict[str, KernelText]]:
    """`source` without comments, its macros and its kernels (read once per source: every
    model's program starts from the same one)."""
    text = strip_comments(source)  # the same length: offsets hold in `source` too
    return text, macros(text), kernels(text)


def model_program(source: str, launches: list[Launch], also: set[str]) -> ModelProgram:
    """A program holding only what `launches` run: a copy of each launch's kernel with its
    integer arguments fixed (kernels named by SPECIALIZED_PREFIXES; one copy per distinct
    kernel and values), the other launches' kernels and the kernels named in `also` as
    they are. It is `source` (the generic program) with every other kernel removed and
    each copy where its original stood, so the helpers and macros around it are the same.
    """
    text, defined, spans = _read(source)
    missing = ({launch.kernel for launch in launches} | also) - spans.keys()
    if missing:
        raise KeyError(f"no kernel {sorted(missing)} in the program source")
    params: dict[str, list[Param]] = {}
    copies: dict[str, tuple[int, str]] = {}  # name -> (original's start, text)
    names: dict[int, str] = {}
    kept = set(also)
    for pos, launch in enumerate(launches):
        kt = spans[launch.kernel]
        fixes = ""
        if launch.kernel.startswith(SPECIALIZED_PREFIXES):
            if launch.kernel not in params:
                params[launch.kernel] = parse_params(kt.params, defined)
            fixes = _fixes(launch, params[launch.kernel])
        if not fixes:
            kept.add(launch.kernel)
            continue
        digest = hashlib.sha256(f"{launch.kernel}|{fixes}".encode()).hexdigest()[:10]
        name = f"{launch.kernel}{SEPARATOR}{digest}"
        if name not in copies:
            head = text[kt.start : kt.body_open + 1]
            head = re.sub(rf"\b{re.escape(launch.kernel)}\b", name, head, count=1)
            copies[name] = (kt.start, f"{head}\n  {fixes}\n{text[kt.body_open + 1 : kt.end]}\n")
        names[pos] = name
    by_start: dict[int, list[str]] = {}
    for start, copy in copies.values():
        by_start.setdefault(start, []).append(copy)
    parts, at = [], 0
    for name, kt in sorted(spans.items(), key=lambda item: item[1].start):
        parts += [source[at : kt.start], *by_start.get(kt.start, [])]
        if name in kept:
            parts.append(source[kt.start : kt.end])
        at = kt.end
    return ModelProgram("".join(parts) + source[at:], names)


def _fixes(launch: Launch, params: list[Param]) -> str:
    """The statements fixing `launch`'s integer arguments, e.g. "M = 196; din = (int4)(...);"."""
    if len(params) != len(launch.args):
        raise ValueError(
            f"{launch.kernel} takes {len(params)} arguments; its launch has {len(launch.args)}"
        )
    fixes = []
    for param, arg in zip(params, launch.args, strict=True):
        width = param.int_width
        literal = None if width is None else c_literal(width, arg)
        if literal is not None:
            fixes.append(f"{param.name} = {literal};")
    return " ".join(fixes)
