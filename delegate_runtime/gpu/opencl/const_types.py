"""Which constants a partition keeps in float32 whatever its storage: those its kernels
read through a `float*` parameter, the biases (every kernel's `bias`, the depthwise
biases `DB`/`db`, squeeze-excite's `b1`/`b2`).

With half storage every other constant is rounded to half like the activations. A bias is
not: rounded to half it carries up to 2^-11 of its own magnitude into every output it is
added to. On NASNetMobile (PoCL, float32 activations, LiteRT's reference kernels), biases
rounded to half alone cost 3.8e-03 of the output's range (docs/benchmarks.md).
"""

from __future__ import annotations

from .cl_source import kernel_params
from .launch import Const, Lowered
from .specialize import generic_name

#: The suffix of a float32 twin of a constant that some kernel reads in the storage type.
FLOAT32_TWIN = ":f32"


def float32_consts(source: str, lowered: Lowered) -> set[str]:
    """The keys of `lowered`'s constants read as float32. A constant read both ways gets
    a float32 twin (its key + FLOAT32_TWIN) for the float readers, in place."""
    as_float: dict[str, list[tuple[int, int]]] = {}
    as_storage: set[str] = set()
    for i, launch in enumerate(lowered.launches):
        params = kernel_params(source, generic_name(launch.kernel))
        for pos, (param, arg) in enumerate(zip(params, launch.args, strict=True)):
            if not (isinstance(arg, Const) and param.global_pointer):
                continue
            if param.pointee == "float":
                as_float.setdefault(arg.key, []).append((i, pos))
            elif param.pointee == "store_t":
                as_storage.add(arg.key)
    for key in as_float.keys() & as_storage:
        twin = key + FLOAT32_TWIN
        lowered.consts[twin] = lowered.consts[key]
        for i, pos in as_float.pop(key):
            lowered.launches[i].args[pos] = Const(twin)
        as_float[twin] = []
    return set(as_float)
