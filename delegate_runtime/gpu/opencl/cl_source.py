"""Reading the delegate's OpenCL C source as a compiler would, as far as kernel
specialization needs it (opencl/specialize.py): comments blanked, #defines (object-like and
function-like) expanded, `#if` constants decided, each kernel's definition found and its
parameters read. tests/ops/test_gpu_specialize_params.py holds the reading against the
OpenCL compiler's own argument info for every kernel of the program.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

#: OpenCL integer types a parameter may have, by vector width.
INT_TYPES = {"int": 1, "int2": 2, "int4": 4, "int8": 8, "int16": 16}
#: OpenCL float types a parameter may have, by vector width.
FLOAT_TYPES = {"float": 1, "float2": 2, "float4": 4, "float8": 8, "float16": 16}


@dataclass(frozen=True)
class Param:
    """A kernel parameter; what it is, read once from its type (a model's program asks
    about every parameter of every launch)."""

    type: str  #: the type's words, qualifiers included ("__global const store_t*")
    name: str

    @functools.cached_property
    def int_width(self) -> int | None:
        """The vector width of a plain (non-const) integer parameter, None for any other."""
        words = self.type.split()
        return INT_TYPES.get(words[0]) if len(words) == 1 else None

    @functools.cached_property
    def float_width(self) -> int | None:
        """The vector width of a plain (non-const) float parameter, None for any other."""
        words = self.type.split()
        return FLOAT_TYPES.get(words[0]) if len(words) == 1 else None

    @functools.cached_property
    def pointee(self) -> str:
        """What a pointer parameter points to, without qualifiers ("float", "store_t")."""
        return self.type.replace("*", " ").split()[-1]

    @functools.cached_property
    def global_pointer(self) -> bool:
        """Whether the parameter is a pointer into global memory."""
        words = self.type.replace("*", " * ").split()
        return words[-1] == "*" and words[0] in ("__global", "global")


def strip_comments(text: str) -> str:
    """`text` with its // and /* */ comments blanked (newlines kept)."""
    return COMMENT.sub(lambda m: _blank(m.group()), text)


#: A // or /* */ comment.
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", flags=re.S)


def _blank(text: str) -> str:
    """`text` as spaces, its newlines kept."""
    return "\n".join(" " * len(line) for line in text.split("\n"))


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


#: The brackets `_matching` pairs, each pair's pattern finding either of them.
_BRACKETS = {"(": re.compile(r"[()]"), "{": re.compile(r"[{}]")}


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at `start` (round or curly), found by a regex
    that visits only the brackets: a kernel's body is thousands of characters."""
    depth = 0
    for m in _BRACKETS[open_].finditer(text, start):
        if m.group() == open_:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
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


def kernels(text: str) -> dict[str, KernelText]:
    """Every kernel definition of comment-free `text`, by name, in order."""
    return {m.group(1): _kernel_at(text, m) for m in KERNEL_HEAD.finditer(text)}


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


@functools.lru_cache(maxsize=4)
def read_source(source: str) -> tuple[str, dict[str, Macro], dict[str, KernelText]]:
    """`source` without comments, its macros and its kernels (read once per source: every
    model's program starts from the same one)."""
    text = strip_comments(source)  # the same length: offsets hold in `source` too
    return text, macros(text), kernels(text)


@functools.lru_cache(maxsize=256)
def kernel_params(source: str, kernel: str) -> list[Param]:
    """Kernel `kernel`'s parameters in `source`."""
    _, defined, spans = read_source(source)
    return parse_params(spans[kernel].params, defined)
