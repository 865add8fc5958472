"""What makes a GPU op as fast as its neighbours, beyond running right: its fast forms, as
the backend gives them to its record (records/record.py: `launches`, `family`, `lacks`),
and the fusions it takes part in (`fusions_of`: each fusion module's `involves`).

An op missing one of these still runs, only slower, so nothing else fails when one is
dropped; tests/unit/test_op_forms.py fails instead, for an op of a family whose other ops
have a form it lacks without saying why (`GpuOp.lacks`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from . import cl_source
from .fusions.plan import FUSION_MODULES
from .program import program_source
from .records import REGISTRY, GpuOp
from .specialize import SPECIALIZED_PREFIXES

#: The fast forms, by name: what each gives, and where the backend decides it.
FORMS = {
    "specialized": "its kernels' int and float arguments compiled into the model's own "
    "program (specialize.SPECIALIZED_PREFIXES)",
    "persistent": "its launches can be layers of a persistent kernel: every argument of "
    "their copies is the arena or compiled in (persistent.py)",
    "epilogue": "its kernel runs the elementwise nodes after it (GpuOp.epilogue, "
    "fusions/epilogue.py)",
    "step": "it runs as a step of its producer's epilogue (GpuOp.as_step)",
}

#: Families of ops that should be as fast as each other.
FAMILIES = {
    "convolution": "products over windows or matrices: convolutions, GEMMs, LSTM",
    "elementwise": "one output element from the same element of each input",
    "reduction": "reductions and scans along axes, softmax",
    "pool": "pooling windows",
    "movement": "copies, gathers, reshapes and resizes",
    "mediapipe": "MediaPipe's custom ops",
}


@functools.lru_cache(maxsize=2)
def kernel_params(source: str) -> dict[str, list[cl_source.Param]]:
    """Every kernel of `source` (a whole program), by name in order, with its parameters."""
    _, defined, spans = cl_source.read_source(source)
    return {name: cl_source.parse_params(k.params, defined) for name, k in spans.items()}


def kernels_of(record: GpuOp, source: str | None = None) -> list[str]:
    """The program's kernels that `record.launches` names, in the program's order."""
    names = kernel_params(source or program_source())
    return [k for k in names if any(_names(pattern, k) for pattern in record.launches)]


def _names(pattern: str, kernel: str) -> bool:
    return kernel.startswith(pattern[:-1]) if pattern.endswith("*") else kernel == pattern


def specialized(kernel: str) -> bool:
    """Whether a copy of `kernel` has its int and float arguments compiled in."""
    return kernel.startswith(SPECIALIZED_PREFIXES)


def arena_only(kernel: str, source: str) -> bool:
    """Whether `kernel`'s specialized copy takes nothing but the arena (and a partition's
    staging buffers): every parameter a global pointer, or a number compiled in."""
    fixed = specialized(kernel)
    return all(
        p.global_pointer or (fixed and (p.int_width or p.float_width))
        for p in kernel_params(source)[kernel]
    )


#: The forms of an op's kernels: an op launching none (an alias) neither has nor lacks them.
KERNEL_FORMS = frozenset({"specialized", "persistent"})


def forms_of(record: GpuOp, source: str | None = None) -> set[str]:
    """The fast forms `record` has: a kernel form where every kernel it launches has it."""
    source = source or program_source()
    kernels = kernels_of(record, source)
    forms = set()
    if kernels and all(specialized(k) for k in kernels):
        forms.add("specialized")
    if kernels and all(arena_only(k, source) for k in kernels):
        forms.add("persistent")
    if record.epilogue:
        forms.add("epilogue")
    if record.as_step is not None:
        forms.add("step")
    return forms


def missing(records: Iterable[GpuOp] | None = None) -> dict[str, dict[str, str]]:
    """op -> {form its family has that it lacks: why}, the why "" where its record does not
    say; every op with a form missing is listed."""
    records = list(REGISTRY.values() if records is None else records)
    source = program_source()
    held = {r.name: forms_of(r, source) for r in records}
    families: dict[str, set[str]] = {}
    for r in records:
        families.setdefault(r.family, set()).update(held[r.name])
    out = {}
    for r in records:
        lacking = families[r.family] - held[r.name]
        if not r.launches:
            lacking -= KERNEL_FORMS
        if lacking:
            out[r.name] = {form: r.lacks.get(form, "") for form in sorted(lacking)}
    return out


def fusions_of(record: GpuOp) -> list[str]:
    """The fusions `record`'s op takes part in (running one, or absorbed by one), in the
    order the fusion pass applies them (fusions/plan.py's FUSION_MODULES)."""
    return [m.NAME for m in FUSION_MODULES if m.involves(record)]
