"""Kernels specialized per launch: a launch's integer arguments compiled in as constants.

The program's kernels take shapes, window geometry, activation and epilogue codes as
arguments, so one build serves every model. Where a device compiles once per model
anyway (a GPU, whose driver caches the result), a copy of a launch's kernel with those
integers fixed lets the compiler unroll the window loops, turn divisions by shapes into
multiplications and drop the epilogue's unused switch cases. The copy keeps the
signature (arguments are still set as before) and assigns the fixed values to its
parameters first: it computes exactly what the generic kernel computes for that launch.

Copies are made from the program source itself: the kernel's definition is found by
name, its parameter list read (the program's own macros expanded, `#if` constants
decided), and every non-const int, int2, int4, int8 or int16 parameter whose
launch argument is an integer fixed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

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


#: OpenCL integer types a parameter may have to be fixed, by vector width.
INT_TYPES = {"int": 1, "int2": 2, "int4": 4, "int8": 8, "int16": 16}


def enabled(is_gpu: bool, option: bool | None = None) -> bool:
    """Whether a session specializes: its option, else $DEVICEFARM_GPU_SPECIALIZE, else on
    GPUs (ON_GPU) and off on CPU OpenCL, where each model's build would cost seconds."""
    if option is not None:
        return option
    env = os.environ.get(ENV, "")
    if env in ("0", "1"):
        return env == "1"
    return ON_GPU and is_gpu


@dataclass(frozen=True)
class Param:
    type: str  #: the type's words, qualifiers included ("__global const store_t*")
    name: str

    @property
    def int_width(self) -> int | None:
        """The vector width of a plain integer parameter, None for any other."""
        words = self.type.split()
        return INT_TYPES.get(words[0]) if len(words) == 1 else None


def strip_comments(text: str) -> str:
    """`text` with its // and /* */ comments blanked (newlines kept)."""
    return re.sub(
        r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S
    )


@dataclass(frozen=True)
class Macro:
    body: str
    params: tuple[str, ...] | None = None  #: a function-like macro's parameters


def macros(text: str) -> dict[str, Macro]:
    """The #defines of comment-free `text` (continuations joined), object-like and
    function-like."""
    joined = text.replace("\\\n", " ")
    found = {}
    for m in re.finditer(r"^[ \t]*#define[ \t]+(\w+)(\([^)]*\))?[ \t]*(.*)$", joined, flags=re.M):
        params = None
        if m.group(2) is not None:
            params = tuple(p.strip() for p in m.group(2)[1:-1].split(",") if p.strip())
        found[m.group(1)] = Macro(m.group(3).strip(), params)
    return found


def _expand_once(text: str, defined: Mapping[str, Macro | str]) -> str:
    """`text` with each macro use replaced by its body, once: a function-like macro's
    arguments substituted for its parameters, `##` pasting them."""
    out, at = [], 0
    for m in re.finditer(r"\b\w+\b", text):
        if m.start() < at:
            continue
        macro = defined.get(m.group())
        if macro is None:
            continue
        macro = Macro(macro) if isinstance(macro, str) else macro
        out.append(text[at : m.start()])
        at = m.end()
        if macro.params is None:
            out.append(macro.body)
            continue
        open_paren = len(text) - len(text[at:].lstrip())
        if open_paren >= len(text) or text[open_paren] != "(":
            out.append(m.group())  # a function-like macro's name alone is no use of it
            continue
        close = _matching(text, open_paren, "(", ")")
        args = [a.strip() for a in _top_level_split(text[open_paren + 1 : close])]
        if len(args) != len(macro.params):
            raise ValueError(f"macro {m.group()} takes {len(macro.params)} arguments: {args}")
        body = macro.body
        for param, arg in zip(macro.params, args, strict=True):
            body = re.sub(rf"\b{re.escape(param)}\b", arg, body)
        out.append(re.sub(r"\s*##\s*", "", body))
        at = close + 1
    return "".join(out) + text[at:]


def _top_level_split(text: str) -> list[str]:
    """`text` split at the commas outside parentheses."""
    parts, depth, last = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[last:i])
            last = i + 1
    return [*parts, text[last:]]


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced {open_}{close} from offset {start}")


@dataclass(frozen=True)
class KernelText:
    """Where kernel `name` lies in a comment-free source."""

    start: int  #: its `__kernel` keyword
    params: str  #: the text between its parentheses
    body_open: int  #: its body's `{`
    end: int  #: one past its body's `}`


#: A kernel's head, up to its parameters' "(" (attributes hold no ";", "{" or "}").
KERNEL_HEAD = re.compile(r"__kernel\b[^;{}]*?\bvoid\s+(\w+)\s*\(")


def find_kernel(text: str, name: str) -> KernelText:
    """Kernel `name`'s definition in comment-free `text`."""
    for m in KERNEL_HEAD.finditer(text):
        if m.group(1) == name:
            return _kernel_at(text, m)
    raise KeyError(f"no kernel {name!r} in the program source")


def _kernel_at(text: str, m: re.Match) -> KernelText:
    """The definition whose head KERNEL_HEAD matched at `m`."""
    name, start, open_paren = m.group(1), m.start(), m.end() - 1
    close_paren = _matching(text, open_paren, "(", ")")
    body_open = text.index("{", close_paren)
    if text[close_paren + 1 : body_open].strip():
        raise ValueError(f"unexpected text between {name!r}'s parameters and body")
    end = _matching(text, body_open, "{", "}") + 1
    return KernelText(start, text[open_paren + 1 : close_paren], body_open, end)


def _decide_conditionals(params: str) -> str:
    """Keep the lines of `#if N` / `#else` / `#endif` blocks that a constant N selects."""
    kept, stack = [], []  # stack: (this block taken, enclosing blocks all taken)
    for line in params.splitlines():
        word = line.strip()
        live = all(taken for taken, _ in stack)
        if word.startswith("#if"):
            cond = word[3:].strip()
            if not cond.isdigit():
                raise ValueError(f"cannot decide '{word}' in a kernel's parameters")
            stack.append((int(cond) != 0, live))
        elif word.startswith("#else"):
            taken, outer = stack.pop()
            stack.append((not taken, outer))
        elif word.startswith("#endif"):
            stack.pop()
        elif word.startswith("#"):
            raise ValueError(f"cannot read '{word}' in a kernel's parameters")
        elif live:
            kept.append(line)
    return " ".join(kept)


def parse_params(params: str, defined: Mapping[str, Macro | str]) -> list[Param]:
    """A kernel's parameters from the text between its parentheses, `defined` the macros
    (`macros()`; a plain string is an object-like macro's body)."""
    text = _decide_conditionals(params)
    for _ in range(8):  # macros within macros, a few levels deep
        expanded = _expand_once(text, defined)
        if expanded == text:
            break
        text = expanded
    out = []
    for part in _top_level_split(text):
        words = part.replace("*", " * ").split()
        if not words:
            continue
        out.append(Param(" ".join(words[:-1]).replace(" *", "*"), words[-1]))
    return out


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
    kept: list[str]  #: generic kernels the program holds as they are

    @property
    def specialized(self) -> int:
        """Distinct specialized copies."""
        return len(set(self.names.values()))


def kernel_names(text: str) -> list[str]:
    """The names of the kernels defined in comment-free `text`, in order."""
    return [m.group(1) for m in KERNEL_HEAD.finditer(text)]


@functools.lru_cache(maxsize=4)
def _read(source: str) -> tuple[str, dict[str, Macro], dict[str, KernelText]]:
    """`source` without comments, its object-like macros and its kernels (read once per
    source: every model's program starts from the same one)."""
    text = strip_comments(source)  # the same length: offsets hold in `source` too
    spans = {m.group(1): _kernel_at(text, m) for m in KERNEL_HEAD.finditer(text)}
    return text, macros(text), spans


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
    return ModelProgram("".join(parts) + source[at:], names, sorted(kept))


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
