"""Runs of a partition's launches as one persistent kernel: each launch a layer, a barrier
across the whole grid between layers.

A kernel boundary costs an H200 about 3.1 us even between empty kernels queued back to
back, and a small layer 4.3 us as its own kernel against 1.2 us as a layer of one kernel
that waits on a grid barrier (bench/persistent_probe.py, docs/notebook/17-2026-11-28-persistent-kernels-runs-of-launches-as-one.md). A model of
short layers (MobileNet v1: 24 kernels of 4-25 us) spends much of its time at the
boundaries. A run of consecutive launches whose kernels are specialized copies taking only
the arena (opencl/specialize.py) becomes one kernel of `groups` work groups of
GROUP_ITEMS items that stay resident:

- each launch's copy becomes a function of its virtual work group and item; the work-item
  functions in its body name those (`pk_group_id(0)` for `get_group_id(0)`, ...), and its
  `__local` arrays become views of one local buffer that every layer shares;
- the kernel walks each layer's work groups, several at a time where a layer's group is
  smaller than GROUP_ITEMS (allowed only for layers without local memory or barriers),
  then waits at a grid barrier: each group counts itself in and spins until all have;
  a GPU-scope fence on either side makes the layer's writes seen by every group after it;
- a counter past the last layer, reset by the last group out, leaves the barrier counts
  at zero for the next invoke.

A grid barrier needs every group resident at once: `groups` stays at the compute unit
count times `persistent_groups_per_cu` (gpu/switches.py: what the kernel's registers, its
neediest layer's, allow), and a spin that outlasts its limit marks the run failed (the
word at FAILED) and releases every barrier, so a device that cannot hold the groups is
caught when the session starts (PartitionExecutor._persist runs each kernel once, with
fewer groups after a failure, and keeps the launches if even one group per compute unit
fails) instead of hanging.
OpenCL itself promises no such forward progress; it is used where the driver gives it:
NVIDIA (its fence as inline PTX), and PoCL's CPU device with one group (the tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..switches import Switches
from .cl_source import kernel_params, read_source
from .launch import Launch, Staging
from .specialize import OFFSETS_PER_PARAM

#: Work items of a persistent kernel's group (the GEMM tiles' 16 x 16).
GROUP_ITEMS = 256
#: The persistent kernels' state, one int buffer per run: in its first 128-byte line the
#: groups out, failed and the spin limit; the barrier count alone in the second line (the
#: groups poll it, and loads of other words in its line slow the arrivals and the polls:
#: bench/barrier_probe.py, docs/notebook/21-2026-11-29-the-grid-barrier-s-line-persistent-kernels-at.md); then each layer's arena offsets (16 ints
#: a vector) from HEADER on.
OUT, FAILED, LIMIT, COUNT, HEADER = 1, 2, 3, 32, 64
#: Bytes of the element types local arrays may have.
_LOCAL_TYPE_BYTES = {
    "char": 1, "uchar": 1, "short": 2, "ushort": 2, "half": 2, "int": 4, "uint": 4,
    "float": 4, "int2": 8, "float2": 8, "int4": 16, "float4": 16, "float8": 32,
    "float16": 64,
}  # fmt: skip
#: The work-item functions a layer's body calls, each `get_` and one of these.
_WORK_ITEM_FUNCTIONS = (
    "group_id",
    "local_id",
    "global_id",
    "local_size",
    "num_groups",
    "global_size",
)
#: A call of any of them, in one pass over a body. The pattern starts with its literal
#: `get_` so that the regex engine scans for it (a leading `\b(...|...)` tried every
#: position: 0.35 ms a body, 29 ms of NASNetMobile's warm start; now 1 ms); the word
#: boundary before it is checked by `_pk_calls`.
_WORK_ITEM_CALL = re.compile(r"get_(" + "|".join(_WORK_ITEM_FUNCTIONS) + r")\s*\(")


def grid_sizes(compute_units: int, switches: Switches) -> list[int]:
    """Work groups of a persistent kernel's grid on a device of `compute_units`, to try
    in turn: the switches' groups per unit, then half as many, down to one per unit (or
    the switches' fixed grid)."""
    if switches.persistent_groups is not None:
        return [switches.persistent_groups]
    per, sizes = switches.persistent_groups_per_cu, []
    while per >= 1:
        sizes.append(compute_units * per)
        per //= 2
    return sizes


def enabled(platform: str, is_gpu: bool, specialized: bool, switches: Switches) -> bool:
    """Whether a session runs persistent kernels: the switch where it was set (on every
    device), else on NVIDIA's GPUs. They need the specialized copies (they take only the
    arena)."""
    if not specialized:
        return False
    forced = switches.explicit("persistent")
    if forced is not None:
        return forced
    return switches.persistent and is_gpu and "NVIDIA" in platform


@dataclass(frozen=True)
class Run:
    """Launches start .. end - 1 of a partition, run as persistent kernel `kernel`, which
    takes the arena, its state and then the staging buffers of `edges` (tensors)."""

    start: int
    end: int
    kernel: str
    edges: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Layer:
    function: str  #: its function's text
    name: str
    groups: int  #: virtual work groups
    items: int  #: items per virtual group
    local_bytes: int
    vectors: int


def plan_runs(
    source: str, launches: list[Launch], prefix: str, switches: Switches
) -> tuple[list[Run], list[str]]:
    """The runs of `launches` (positions in one partition) that become persistent kernels
    and, per run, the source of its kernel (named `prefix`0, `prefix`1, ...) with the layer
    functions it calls: each builds as a program of its own, after `source`'s helpers (the
    model's program holding the launches' copies, its kernels removed) and `prelude()`."""
    text, _, spans = read_source(source)
    layers: list[_Layer | None] = []
    made: dict[tuple, _Layer | None] = {}
    for launch in launches:
        key = (launch.kernel, launch.gsize, launch.lsize)
        if key not in made:
            made[key] = _layer(text, spans, launch, f"pk_{len(made)}_{prefix}")
        layers.append(made[key])
    runs, texts = [], []
    for start, end in _run_spans(layers, switches):
        name = f"{prefix}{len(runs)}"
        calls = []
        functions: dict[str, str] = {}  # the layer functions this run calls, by name
        for launch, layer in zip(launches[start:end], layers[start:end], strict=True):
            assert layer is not None  # the run holds layers only
            functions.setdefault(layer.name, layer.function)
            calls.append((layer, _edge_args(source, launch)))
        edges = tuple(dict.fromkeys(t for _, args in calls for t, _ in args))
        texts.append("\n".join(functions.values()) + "\n" + _kernel(name, calls, edges))
        runs.append(Run(start, end, name, edges))
    return runs, texts


def _run_spans(layers: list[_Layer | None], switches: Switches) -> list[tuple[int, int]]:
    """Each run's launches (start, end): the switches' fewest layers or more in a row,
    split where they call more than its most bytes of layer functions."""
    least = switches.persistent_min_layers
    spans, start = [], 0
    while start < len(layers):
        end = start
        while end < len(layers) and layers[end] is not None:
            end += 1
        if end - start >= least:
            costs = [len(layer.function) for layer in layers[start:end] if layer is not None]
            limit = switches.persistent_max_run_bytes
            spans += [(start + a, start + b) for a, b in split_run(costs, limit, least)]
        start = end + 1
    return spans


def split_run(costs: list[int], limit: int | None, least: int = 2) -> list[tuple[int, int]]:
    """Consecutive spans of a run of layers of these costs (bytes) of at most `limit`
    (None: no bound) each where a span of `least` layers allows, none shorter."""
    if limit is None or sum(costs) <= limit:
        return [(0, len(costs))]
    spans, start, held = [], 0, 0
    for i, cost in enumerate(costs):
        if held + cost > limit and i - start >= least:
            spans.append((start, i))
            start, held = i, 0
        held += cost
    if len(costs) - start < least and spans:
        start = spans.pop()[0]  # a short tail joins the span before it
    spans.append((start, len(costs)))
    return spans


def _layer(text: str, spans: dict, launch: Launch, name: str) -> _Layer | None:
    """`launch`'s copy as a layer function, None where it cannot be one: it must take
    the arena and, besides, staging buffers only (a partition's edges: staging_edges.py)."""
    copy = launch.copy_args
    if copy is None or not copy.offsets or launch.lsize is None:
        return None
    if not all(isinstance(launch.args[i], Staging) for i in copy.kept):
        return None
    span = spans.get(launch.kernel)
    if span is None:
        return None
    gsize, lsize = _dims3(launch.gsize), _dims3(launch.lsize)
    if any(g % lo for g, lo in zip(gsize, lsize, strict=True)):
        return None
    items = lsize[0] * lsize[1] * lsize[2]
    body = text[span.body_open + 1 : span.end - 1]
    shares = "barrier(" in body or "__local" in body
    if GROUP_ITEMS % items or (shares and items != GROUP_ITEMS):
        return None
    try:
        body, local_bytes = _local_views(body)
    except ValueError:
        return None
    body = _pk_calls(body)
    groups = [g // lo for g, lo in zip(gsize, lsize, strict=True)]
    params = span.params.strip()
    head = (
        f"void {name}({params}, __local uchar* lmem_, int vgroup_, int vitem_) {{\n"
        f"  const int pk_ls_[3] = {{{lsize[0]}, {lsize[1]}, {lsize[2]}}};\n"
        f"  const int pk_ng_[3] = {{{groups[0]}, {groups[1]}, {groups[2]}}};\n"
        f"  const int pk_g_[3] = {{vgroup_ % {groups[0]}, (vgroup_ / {groups[0]}) % {groups[1]}, "
        f"vgroup_ / {groups[0] * groups[1]}}};\n"
        f"  const int pk_l_[3] = {{vitem_ % {lsize[0]}, (vitem_ / {lsize[0]}) % {lsize[1]}, "
        f"vitem_ / {lsize[0] * lsize[1]}}};\n"
    )
    vectors = -(-len(copy.offsets) // OFFSETS_PER_PARAM)  # its `offs*_` int16 parameters
    return _Layer(
        head + body + "\n}\n",
        name,
        groups[0] * groups[1] * groups[2],
        items,
        local_bytes,
        vectors,
    )


def _edge_args(source: str, launch: Launch) -> tuple[tuple[int, str], ...]:
    """The staging buffers a layer's copy takes after its offsets: (tensor, parameter
    type) each, in its parameters' order."""
    kept = launch.copy_args.kept if launch.copy_args else ()
    if not kept:
        return ()
    params = kernel_params(source, launch.kernel)[-len(kept) :]
    return tuple((launch.args[i].tensor, p.type) for i, p in zip(kept, params, strict=True))


def _dims3(size: tuple[int, ...]) -> tuple[int, int, int]:
    return tuple(list(size) + [1] * (3 - len(size)))  # type: ignore[return-value]


def _pk_calls(body: str) -> str:
    """`body` with each work-item call (`get_group_id(`...) a call of the persistent
    kernel's own (`pk_group_id(`...): a layer runs as one virtual group of many."""

    def call(m: re.Match) -> str:
        before = body[m.start() - 1] if m.start() else " "
        if before.isalnum() or before == "_":  # part of a longer name
            return m.group(0)
        return f"pk_{m.group(1)}("

    return _WORK_ITEM_CALL.sub(call, body)


_LOCAL_DECL = re.compile(
    r"__local\s+(\w+)\s+(\w+)((?:\s*\[[^\]]+\])*)\s*(?:__attribute__\s*\(\(\s*aligned\s*\(\s*\d+\s*\)\s*\)\))?\s*;"
)


def _local_views(body: str) -> tuple[str, int]:
    """`body` with each `__local` declaration a view into `lmem_` (at 32-byte aligned
    offsets), and the bytes they take; ValueError for a declaration it cannot size. A
    local scalar becomes a pointer, its name a macro reading it to the body's end."""
    at = 0
    scalars = []

    def view(m: re.Match) -> str:
        nonlocal at
        kind, name, dims_text = m.group(1), m.group(2), m.group(3)
        if kind not in _LOCAL_TYPE_BYTES:
            raise ValueError(f"local array of {kind}")
        dims = [_const_int(d) for d in re.findall(r"\[([^\]]+)\]", dims_text)]
        count = 1
        for d in dims:
            count *= d
        where = f"(lmem_ + {at})"
        at += -(-count * _LOCAL_TYPE_BYTES[kind] // 32) * 32
        if not dims:
            scalars.append(name)
            return f"__local {kind}* pk_{name}_ = (__local {kind}*){where};\n#define {name} (*pk_{name}_)\n"
        if len(dims) == 1:
            return f"__local {kind}* {name} = (__local {kind}*){where};"
        inner = "".join(f"[{d}]" for d in dims[1:])
        return f"__local {kind} (*{name}){inner} = (__local {kind} (*){inner}){where};"

    out = _LOCAL_DECL.sub(view, body)
    return out + "".join(f"\n#undef {name}" for name in scalars), at


def _const_int(expr: str) -> int:
    """An array dimension: an integer expression of literals."""
    if not re.fullmatch(r"[\d\s+\-*/()]+", expr):
        raise ValueError(f"array dimension {expr!r}")
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}))  # noqa: S307 (digits only)


_PRELUDE = r"""
// Persistent kernels (opencl/persistent.py): a layer's work-item functions.
#define pk_group_id(d) ((size_t)pk_g_[d])
#define pk_local_id(d) ((size_t)pk_l_[d])
#define pk_local_size(d) ((size_t)pk_ls_[d])
#define pk_num_groups(d) ((size_t)pk_ng_[d])
#define pk_global_id(d) ((size_t)(pk_g_[d] * pk_ls_[d] + pk_l_[d]))
#define pk_global_size(d) ((size_t)(pk_ng_[d] * pk_ls_[d]))
#ifdef PK_PTX_FENCE
#define PK_FENCE() asm volatile("fence.acq_rel.gpu;" ::: "memory")
// On NVIDIA a group arrives with a release reduction (no fence, no returned count) and
// polls with acquire loads (docs/notebook/19-2026-11-28-where-the-persistent-kernel-s-time-goes-a.md).
#define PK_ARRIVE(p) asm volatile("red.release.gpu.global.add.s32 [%0], 1;" :: "l"((ulong)(p)) : "memory")
inline int pk_poll(volatile __global int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"((ulong)(p)) : "memory");
  return v;
}
#define PK_POLL(p) pk_poll(p)
#define PK_AFTER_POLL() do { } while (0)
#else  // elsewhere a fence, then an atomic; volatile loads, then a fence
#define PK_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#define PK_ARRIVE(p) do { PK_FENCE(); atomic_inc(p); } while (0)
#define PK_POLL(p) (*(p))
#define PK_AFTER_POLL() PK_FENCE()
#endif
// Every group arrives, then all leave: barrier `b` (1, 2, ...) waits until the count holds
// b arrivals of every group; a spin past the limit (checked every 1024 spins, the limit
// read once) marks the run failed, which releases every barrier after.
inline void pk_grid_sync(volatile __global int* state, int b) {
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    PK_ARRIVE(state + PK_COUNT);
    int target = b * get_num_groups(0), limit = state[PK_LIMIT];
    for (int spins = 1; PK_POLL(state + PK_COUNT) < target; ++spins) {
      if (!(spins & 1023) && (state[PK_FAILED] || spins > limit)) {
        state[PK_FAILED] = 1;
        break;
      }
    }
    PK_AFTER_POLL();
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
}
// The last group out resets the counts for the next launch.
inline void pk_leave(volatile __global int* state) {
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    PK_FENCE();
    if (atomic_inc(state + PK_OUT) == get_num_groups(0) - 1) {
      state[PK_COUNT] = 0;
      state[PK_OUT] = 0;
    }
  }
}
"""


def _kernel(
    name: str, calls: list[tuple[_Layer, tuple[tuple[int, str], ...]]], edges: tuple[int, ...]
) -> str:
    """The persistent kernel calling each layer in order, each with its staging buffers
    (`edges`: the kernel's parameters `edge0_` ... after the state)."""
    layers = [layer for layer, _ in calls]
    local_bytes = max([layer.local_bytes for layer in layers] + [32])
    edge_params = "".join(f", __global uchar* edge{i}_" for i in range(len(edges)))
    lines = [
        f"__kernel __attribute__((reqd_work_group_size({GROUP_ITEMS}, 1, 1)))",
        f"void {name}(__global uchar* arena_, volatile __global int* state{edge_params}) {{",
        f"  __local float4 lmem_[{-(-local_bytes // 16)}] __attribute__((aligned(32)));",
        "  int g = get_group_id(0), G = get_num_groups(0), t = get_local_id(0);",
        f"  __global const int* offs = (__global const int*)state + {HEADER};",
    ]
    vector = 0
    for i, (layer, edge_args) in enumerate(calls):
        at = GROUP_ITEMS // layer.items  # virtual groups at a time
        offsets = ", ".join(f"vload16({vector + v}, offs)" for v in range(layer.vectors))
        offsets += "".join(f", ({kind})edge{edges.index(t)}_" for t, kind in edge_args)
        vector += layer.vectors
        call = f"{layer.name}(arena_, {offsets}, (__local uchar*)lmem_, v, t % {layer.items})"
        lines.append(f"  for (int base = g * {at}; base < {layer.groups}; base += G * {at}) {{")
        if at == 1:
            lines.append(f"    int v = base; {call};")
            lines.append("    barrier(CLK_LOCAL_MEM_FENCE);")
        else:
            lines.append(f"    int v = base + t / {layer.items};")
            lines.append(f"    if (v < {layer.groups}) {call};")
        lines.append("  }")
        if i + 1 < len(layers):
            lines.append(f"  pk_grid_sync(state, {i + 1});")
    lines.append("  pk_leave(state);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def prelude(ptx_fence: bool) -> str:
    """What every persistent kernel uses (once per program); `ptx_fence`: the grid
    barrier's fence as NVIDIA's PTX (else OpenCL's mem_fence, enough on a CPU)."""
    out = (
        f"#define PK_COUNT {COUNT}\n#define PK_OUT {OUT}\n#define PK_FAILED {FAILED}\n"
        f"#define PK_LIMIT {LIMIT}\n"
    )
    return out + ("#define PK_PTX_FENCE 1\n" if ptx_fence else "") + _PRELUDE
