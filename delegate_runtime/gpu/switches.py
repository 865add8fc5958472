"""The GPU delegate's switchboard: every switch and tuning constant that decides what a
session runs, declared once with its type, default, environment variable (where one
exists) and meaning, read once when the session is made and passed down as a frozen value
(the paths a session takes from them and its options: execution_plan.py).

    switches = Switches.from_env()                        # the defaults and $DEVICEFARM_*
    session = GpuSession(model, switches=switches.replace(persistent_max_run_bytes=None))
    switches.record()                                     # {"gpu.persistent.MAX_RUN_BYTES": ...}

`record()` gives the configuration record's entries (tools/config_record.py) under the
names results have always stored, each with its source: `default`, `env` (a DEVICEFARM_*
variable) or `override` (a value a caller set, as bench/ab_knobs.py does). An on/off
switch set explicitly (env or override) holds on every device; at its default it holds
only where the device suits it (specialization and pinned copies on GPUs, persistent
kernels on NVIDIA's). `Switches.plain()` is the simple path: every pass with a switch off
(gpu/passes.py lists them in the order a session runs them; docs/gpu_passes.md).

Not here: the kernels' layout constants (LAYOUT: what the kernel sources are written
for, recorded as they are).
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import UsageError

_CL = "delegate_runtime.gpu.opencl"


@dataclass(frozen=True)
class Knob:
    """One switch or tuning constant: its name in the configuration record (None: not
    recorded itself), its environment variable and what it means."""

    record: str | None
    meaning: str
    env: str | None = None


def _bool(var: str, raw: str) -> bool:
    if raw not in ("0", "1"):
        raise UsageError(f"${var} must be 0 (off) or 1 (on), not {raw[:40]!r}")
    return raw == "1"


#: The most input-copy helpers host_copy.c starts (its MAX_HELPERS), whatever is asked.
MAX_COPY_HELPERS = 15


def _threads(most: int | None) -> Callable[[str, str], int]:
    """A parser of a whole number of threads from 0 (to `most` where given)."""

    def parse(var: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if value < 0 or (most is not None and value > most):
            span = f"from 0 to {most}" if most is not None else "from 0"
            raise UsageError(f"${var} must be a whole number of threads {span}, not {raw[:40]!r}")
        return value

    return parse


#: Field name -> its knob. The order is the record's; every field of Switches has one.
KNOBS: dict[str, Knob] = {
    # -- paths: on/off, each with its environment variable --------------------------
    "specialize": Knob(
        "gpu.specialize",
        "a program of the model's own, its launches' arguments compiled in (specialize.py); "
        "at its default on GPUs only",
        "DEVICEFARM_GPU_SPECIALIZE",
    ),
    "persistent": Knob(
        "gpu.persistent",
        "runs of launches as one persistent kernel (persistent.py); at its default on "
        "NVIDIA's GPUs only",
        "DEVICEFARM_GPU_PERSISTENT",
    ),
    "host_edges": Knob(
        "gpu.host_edges",
        "partition inputs and outputs in host memory the GPU maps (host_edges.py), where "
        "the device offers it",
        "DEVICEFARM_GPU_HOST_EDGES",
    ),
    "native_loop": Knob(
        "gpu.native_loop",
        "the hot path's native library (native_library.py), where a compiler builds it: the "
        "launch loop in C and the input copy's helper threads; off, both run without it "
        "(the Python loop, numpy's copy)",
        "DEVICEFARM_NATIVE_LOOP",
    ),
    # -- passes added to the switchboard later: recorded, fingerprinted only when off ------
    "fold": Knob(
        "gpu.fold",
        "static ops folded into constants before partitioning (fold.py); off, they run as "
        "nodes (on the CPU where the GPU does not take them)",
        "DEVICEFARM_GPU_FOLD",
    ),
    "fuse": Knob(
        "gpu.fuse",
        "the fusion pass (opencl/fusions/): kernels that also run the nodes around them; "
        "off, every node is its own launch",
        "DEVICEFARM_GPU_FUSE",
    ),
    "fusions_off": Knob(
        "gpu.fusions_off",
        "names of single fusions not applied (opencl/fusions/plan.py FUSIONS), with the pass on",
        "DEVICEFARM_GPU_FUSIONS_OFF",
    ),
    "concat_views": Knob(
        "gpu.concat_views",
        "channel concatenations without copies (opencl/concat_views.py); off, each input is "
        "copied into its slot",
        "DEVICEFARM_GPU_CONCAT_VIEWS",
    ),
    "hot_path": Knob(
        "gpu.hot_path",
        "launches and copies through OpenCL's C API with no events (opencl/hot_path.py); "
        "off, through pyopencl (and so no native library, host edges or pinned copies)",
        "DEVICEFARM_GPU_HOT_PATH",
    ),
    "pinned": Knob(
        "gpu.pinned",
        "page-locked host arrays for the hot path's copies (opencl/executor.py); at its "
        "default on GPUs only",
        "DEVICEFARM_GPU_PINNED",
    ),
    "cc": Knob(
        None,
        "the C compiler of the native library (None: the first of cc, gcc, clang on PATH); "
        "recorded as gpu.session.launch_loop_build (the compiler's --version and the "
        "library's digest)",
        "CC",
    ),
    # -- placement -----------------------------------------------------------------------
    "min_gpu_work": Knob(
        "gpu.placement.MIN_WORK",
        "a GPU partition doing less work (multiply-adds, or output elements) stays on the "
        "CPU runtime (placement.py); 0: every supported partition on the GPU; at its "
        "default on GPUs only",
        "DEVICEFARM_GPU_MIN_WORK",
    ),
    "cpu_thread_trial_min_pool": Knob(
        "gpu.cpu_threads.MIN_POOL_TO_TRY",
        "LiteRT's pool of CPU threads must be at least this large before a CPU run below "
        "min_gpu_work is timed on one thread against it (cpu_threads.py)",
    ),
    # -- the input copy's helper threads (recorded as the plan they make) -----------
    "copy_helpers": Knob(
        None,
        "helper threads the user asks for the input copy (None: host_copy.helper_plan's "
        "default); recorded as gpu.copy_helpers",
        "DEVICEFARM_GPU_COPY_HELPERS",
    ),
    "copy_helper_budget": Knob(
        None,
        "the most helper threads a worker agent allows a job on its host (None: no "
        "budget); recorded as gpu.copy_helpers",
        "DEVICEFARM_GPU_COPY_HELPER_BUDGET",
    ),
    "copy_helpers_default": Knob(
        None,
        "helper threads by default, at most a quarter of the usable CPUs (none under 4); "
        "recorded as gpu.copy_helpers",
    ),
    # -- persistent kernels ----------------------------------------------------------
    "persistent_groups_per_cu": Knob(
        "gpu.persistent.GROUPS_PER_CU",
        "resident work groups per compute unit of a persistent kernel's grid (halved down "
        "to one where the device cannot hold them)",
    ),
    "persistent_groups": Knob(
        "gpu.persistent.GROUPS",
        "the persistent kernels' grid in work groups whatever the compute units (None: "
        "from the compute units; tests on a CPU device set 1)",
    ),
    "persistent_min_layers": Knob("gpu.persistent.MIN_LAYERS", "fewest launches in a run"),
    "persistent_max_run_bytes": Knob(
        "gpu.persistent.MAX_RUN_BYTES",
        "most bytes of layer functions one persistent kernel calls; longer runs split "
        "(None: no bound)",
    ),
    "persistent_check_spins": Knob(
        "gpu.persistent.CHECK_SPINS",
        "spins at a grid barrier before the session's check of a grid marks it failed",
    ),
    "persistent_run_spins": Knob(
        "gpu.persistent.RUN_SPINS",
        "spins at a grid barrier before an invoke's run is marked failed",
    ),
    # -- the input copy ----------------------------------------------------------------
    "copy_min_bytes": Knob(
        "gpu.host_copy.MIN_BYTES", "copies below this many bytes stay with numpy"
    ),
    "copy_chunk_bytes": Knob("gpu.host_copy.CHUNK_BYTES", "bytes a copy thread claims at a time"),
    "copy_spin_us": Knob(
        "gpu.host_copy.SPIN_US",
        "microseconds a helper spins for the next copy, after a copy within this long of "
        "the one before",
    ),
    # -- the GEMMs' work split (lowering.py) -------------------------------------------
    "min_split_steps": Knob(
        "gpu.lowering.MIN_SPLIT_STEPS", "fewest k steps of a GEMM whose K is split"
    ),
    "min_steps_per_split": Knob(
        "gpu.lowering.MIN_STEPS_PER_SPLIT", "fewest k steps in each slice of a split K"
    ),
    "min_computed_split_k": Knob(
        "gpu.lowering.MIN_COMPUTED_SPLIT_K",
        "fewest channels per slice of a split K where A is computed (depthwise, patches)",
    ),
    "gemm_groups_per_cu": Knob(
        "gpu.lowering.GEMM_GROUPS_PER_CU",
        "work groups a GEMM wants in flight per compute unit (the persistent kernels' "
        "grid instead where they run)",
    ),
    "depthwise_small_tile_groups_per_cu": Knob(
        "gpu.lowering.DEPTHWISE_SMALL_TILE_GROUPS_PER_CU",
        "below this many 32-wide tiles per compute unit a GEMM computing its depthwise "
        "input takes 16-wide tiles",
    ),
    # -- launches and lowering rules -------------------------------------------------
    "flush_every": Knob(
        "gpu.executor.FLUSH_EVERY", "launches enqueued between flushes of the queue"
    ),
    "patch_gemm_min_n": Knob(
        "gpu.conv.PATCH_GEMM_MIN_N",
        "overlapping windows become a patch GEMM from this many output channels",
    ),
    "patch_gemm_min_k": Knob(
        "gpu.conv.PATCH_GEMM_MIN_K",
        "... or from this many inputs per window (kh * kw * c)",
    ),
    "mean_wide_from": Knob(
        "gpu.mean.WIDE_FROM", "a MEAN over this many elements or more takes a work group"
    ),
    "max_folded_elements": Knob(
        "gpu.fold.MAX_FOLDED_ELEMENTS",
        "constant subgraphs are folded only where no output is larger (elements)",
    ),
    "reduce_wide_from": Knob(
        "gpu.reduce.WIDE_FROM",
        "a SUM/REDUCE_* over this many elements per output or more takes a work group",
    ),
    # -- the fusions' rules (opencl/fusions/) and the squeeze-excite kernel's split -------
    "depthwise_max_reader_channels": Knob(
        "gpu.fusion.DEPTHWISE_MAX_READER_CHANNELS",
        "the most output channels of a 1x1 convolution that absorbs a stride-1 depthwise "
        "one off a small map (fusions/depthwise_into_gemm.py)",
    ),
    "depthwise_max_gemm_macs": Knob(
        "gpu.fusion.DEPTHWISE_MAX_GEMM_MACS",
        "off a small map, the most depthwise multiply-adds a GEMM absorbing the depthwise "
        "convolution may do (window x outputs x 32-wide tiles of output channels)",
    ),
    "depthwise_small_map_pixels": Knob(
        "gpu.fusion.DEPTHWISE_SMALL_MAP_PIXELS",
        "on a map of at most this many pixels a stride-1 depthwise convolution is absorbed "
        "by a 1x1 convolution of up to depthwise_small_map_channels outputs",
    ),
    "depthwise_small_map_channels": Knob(
        "gpu.fusion.DEPTHWISE_SMALL_MAP_CHANNELS",
        "the most output channels of a 1x1 convolution absorbing a depthwise one on a small map",
    ),
    "depthwise_aligned": Knob(
        "gpu.fusion.DEPTHWISE_ALIGNED",
        "off a small map, a depthwise convolution is absorbed only where its channels are a "
        "multiple of this",
    ),
    "mean_max_reader_channels": Knob(
        "gpu.fusion.MEAN_MAX_READER_CHANNELS",
        "the most output channels of a GEMM that computes its input as a MEAN "
        "(fusions/mean_into_gemm.py)",
    ),
    "squeeze_excite_max_weights": Knob(
        "gpu.squeeze_excite.MAX_WEIGHTS",
        "the most weights of the two convolutions a squeeze-excite kernel runs "
        "(fusions/squeeze_excite_convs.py)",
    ),
    "squeeze_excite_dw_max_channels": Knob(
        "gpu.squeeze_excite.DW_MAX_CHANNELS",
        "the most channels of a depthwise convolution a squeeze-excite kernel computes "
        "(fusions/depthwise_into_squeeze_excite.py)",
    ),
    "squeeze_excite_dw_groups_per_cu": Knob(
        "gpu.squeeze_excite.DW_GROUPS_PER_CU",
        "work groups per compute unit a squeeze-excite kernel's depthwise work aims for "
        "(squeeze_excite.depthwise_slicing)",
    ),
    "squeeze_excite_dw_tail_loads": Knob(
        "gpu.squeeze_excite.DW_TAIL_LOADS",
        "the most loads per item of its last group's reading of the depthwise partial sums",
    ),
    # -- the program's build (init only: recorded, not fingerprinted) ------------------
    "first_tier": Knob(
        "gpu.build.FIRST_TIER",
        "a session whose own program is not in the kernel cache starts on the generic "
        "kernels and swaps its own in once built (opencl/first_tier.py); at its default on "
        "GPUs whose kernel cache holds all of those kernels (else it waits for its own and "
        "leaves them to the host's builders for the next model); off, it waits for its own",
        "DEVICEFARM_GPU_FIRST_TIER",
    ),
    "max_build_jobs": Knob(
        "gpu.build.MAX_JOBS",
        "most program units built at once (one per usable CPU below it)",
    ),
    "max_build_workers": Knob(
        "gpu.build.MAX_WORKERS",
        "most build worker processes beside the session, where the driver compiles one "
        "program at a time per process (NVIDIA)",
    ),
    "build_worker_timeout_s": Knob(
        "gpu.build.WORKER_TIMEOUT_S",
        "a build worker still building after this long is stopped; the session builds what it left",
    ),
}


def _whole(var: str, raw: str) -> int:
    """A whole number from 0."""
    if not raw.isdigit():
        raise UsageError(f"${var} must be a whole number from 0, not {raw[:40]!r}")
    return int(raw)


def _names(var: str, raw: str) -> frozenset[str]:
    """A comma-separated list of names (checked where they are used: plan_fusion)."""
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def _text(var: str, raw: str) -> str:
    return raw


#: Environment variable -> how its text becomes the field's value (the rest: booleans).
_PARSE: dict[str, Callable[[str, str], Any]] = {
    "DEVICEFARM_GPU_COPY_HELPERS": _threads(MAX_COPY_HELPERS),
    "DEVICEFARM_GPU_COPY_HELPER_BUDGET": _threads(None),
    "DEVICEFARM_GPU_FUSIONS_OFF": _names,
    "DEVICEFARM_GPU_MIN_WORK": _whole,
    "CC": _text,
}

#: The kernels' layout: constants their sources are written for (a work group's items,
#: offsets per int16, the arena's unit, 1-D and softmax work groups, the epilogue steps a
#: kernel takes, the squeeze-excite kernel's SE_MAX), recorded as their modules hold them,
#: switched by no one. Record name -> (module, attribute); the fusions' are recorded as
#: `gpu.fusion.*`, as when one module held them all.
LAYOUT: dict[str, tuple[str, str]] = {
    "gpu.persistent.GROUP_ITEMS": (f"{_CL}.persistent", "GROUP_ITEMS"),
    "gpu.specialize.OFFSETS_PER_PARAM": (f"{_CL}.specialize", "OFFSETS_PER_PARAM"),
    "gpu.launch.LOCAL_1D": (f"{_CL}.launch", "LOCAL_1D"),
    "gpu.arena.ARENA_UNIT": (f"{_CL}.arena", "ARENA_UNIT"),
    "gpu.softmax.ROW_GROUP": (f"{_CL}.records.softmax", "ROW_GROUP"),
    "gpu.fusion.MAX_STEPS": (f"{_CL}.fusions.epilogue", "MAX_STEPS"),
    "gpu.squeeze_excite.MAX_CHANNELS": (f"{_CL}.squeeze_excite", "MAX_CHANNELS"),
}


@dataclass(frozen=True)
class Switches:
    """The GPU delegate's switches and tuning constants, as a session was made with them
    (KNOBS says what each means). Make one with `from_env()`; change it with `replace()`."""

    specialize: bool = True
    persistent: bool = True
    host_edges: bool = True
    native_loop: bool = True
    fold: bool = True
    fuse: bool = True
    fusions_off: frozenset[str] = frozenset()
    concat_views: bool = True
    hot_path: bool = True
    pinned: bool = True
    cc: str | None = None
    # Between the work LiteRT's CPU (16 threads, an H200's host) did faster than our GPU
    # path and the least it did slower (docs/benchmarks.md, 2026-11-29 and 12-02):
    # openWakeWord's melspectrogram (2.2 million at 1,760 samples) 67 us against 136, its
    # heads (0.1-0.4 million) 2-7x faster; MediaPipe's hand_recrop (11.5 million) 600 us
    # against 212-250 (placement.py). The geometric middle of 2.2 and 11.5 million.
    min_gpu_work: int = 5_000_000
    # On 2 cores the two-thread pool's speed moved 2x from block to block, and a trial
    # picked one thread for some sessions of a model and two for others (cpu_threads.py).
    cpu_thread_trial_min_pool: int = 8
    copy_helpers: int | None = None
    copy_helper_budget: int | None = None
    copy_helpers_default: int = 3
    # A persistent kernel takes the registers of its neediest layer: 128 an item on an H200
    # where a stem's patch GEMM is one (MobileNet v1; bench/kernel_registers.py), which
    # leaves room for two groups of 256 per SM. Four, with registers capped at 64, measured
    # 0.994x; GEMMs planned for four on a grid of two run in two rounds (bench/ab_knobs.py:
    # docs/notebook/21-2026-11-29-the-grid-barrier-s-line-persistent-kernels-at.md).
    persistent_groups_per_cu: int = 2
    # Tests on a CPU device set 1: two groups may share a thread and never meet at a barrier.
    persistent_groups: int | None = None
    persistent_min_layers: int = 2
    # A layer called twice counts twice (NVIDIA's compiler inlines every call); longer runs
    # are split into kernels in a row, each its own program unit built in parallel
    # (program_units.py), so that no one long build sets a cold start. On an H200
    # (bench/cold_start.py, docs/benchmarks.md "Cold start") hand_landmark_full's 42-layer
    # run of 296 kB, 9 runs at this bound, took its cold start from 20.5 s to 5.2-6.4 s;
    # steady inference moved 1-5 % (more launches).
    persistent_max_run_bytes: int | None = 64_000
    # A layer of an H200 waits well under 1 ms at a barrier; the spins take longer. In the
    # invokes after the check only a device that stopped holding the groups would spin.
    persistent_check_spins: int = 1 << 18
    persistent_run_spins: int = 1 << 30
    # A helper's wake-up costs more than numpy's copy below MIN_BYTES.
    copy_min_bytes: int = 128 * 1024
    copy_chunk_bytes: int = 32 * 1024
    # Back-to-back invokes find the helpers awake; a paced stream lets them sleep
    # (docs/notebook/23-2026-12-02-the-input-copy-s-helpers-cpu-per-invoke-spinning.md).
    copy_spin_us: int = 500
    # A split costs its own tail (partial sums written, a counter, the last slice rereading
    # them: 4-5 us on an H200, diag_gpu's sweep) and saves about 1.6 us per k step a work
    # group no longer walks, so short Ks stay whole.
    min_split_steps: int = 5
    min_steps_per_split: int = 2
    # Where A is computed as it is loaded, a k step costs far more than a split's tail.
    min_computed_split_k: int = 32
    # Where a GEMM's launch is its own; inside a persistent kernel it aims for that
    # kernel's resident groups (persistent_groups_per_cu) instead.
    gemm_groups_per_cu: int = 4
    # Each 16-wide group then sums its windows alone, and four times the groups finish
    # sooner. Profiled per GEMM on an H200 (132 units, bench/dw_tiles.py, 2026-11-28): the
    # 16-wide tile won at 4-196 groups of 32 (NASNet's 36-50: 12-13 us against 15-17), lost
    # at 224-784 (MobileNet v1's 392-784: 24-44 us against 18-30).
    depthwise_small_tile_groups_per_cu: float = 1.6
    # The device works while the host still enqueues (NVIDIA holds work until a flush).
    flush_every: int = 6
    # Else the direct convolution (one item per output, a serial loop over K) is faster. On
    # an H200 (`bench/diag_gpu.py --only patch`, fp32, device us, GEMM / direct): 3x3 stems
    # of 24-32 outputs 14.5-17.4 / 19.5-22.0, of 16 outputs (K 27) 14.9-17.8 / 12.4-15.7; a
    # 3x3 layer of 1 output (K 72) 75.6 / 12.6; EfficientNetV2B0's 3x3 layers (K 144-432)
    # 15.5-30.1 / 24.9-64.4, 16 outputs at K 288 28.3 / 37.7. Windows that tile the input
    # win at every size measured (1 output: 14.4 / 46.2).
    patch_gemm_min_n: int = 24
    patch_gemm_min_k: int = 128
    mean_wide_from: int = 64
    max_folded_elements: int = 1 << 24
    reduce_wide_from: int = 256
    # The GEMM computes the depthwise output again for every tile of output channels. On
    # an H100 (`bench/diag_gpu.py --only timeline`, MobileNet v1) the fused kernel beat the
    # two launches it replaces at 64-128 channels (25-30 us against 24-33) and after every
    # stride-2 depthwise (18-23 us against 22-26, 128-1024 channels), and lost at 256-1024
    # channels after a stride-1 one (36-38 us against 31-34) (docs/notebook/05-*.md, "Fewer
    # launches"; measured again: docs/notebook/07-*.md, "Depthwise-into-GEMM limit").
    depthwise_max_reader_channels: int = 128
    # Inside a persistent kernel a layer boundary costs about 1.2 us, not a launch's 3-4 us,
    # and on an H200 (bench/ab_knobs.py, 2026-11-28, g) MobileNet v1 (7.2-14.5 million a
    # GEMM) and palm_detection_lite (3.7-7.4) ran faster with their depthwise convolutions
    # apart, face_detection_short_range (at most 0.9), hand_landmark_lite (3.8) and
    # MobileNetV2 (4.1) slower (docs/notebook/18-*.md, "Depthwise work inside the GEMM").
    depthwise_max_gemm_macs: int = 5_000_000
    # Recomputing a 7x7 map's depthwise outputs per tile of channels costs less than a
    # launch (NASNet's last cells: 7x7x176; docs/notebook/12-*.md, "What changed").
    depthwise_small_map_pixels: int = 64
    depthwise_small_map_channels: int = 256
    # The GEMM's four-wide loads and depthwise sums. On an H100 NASNet's first cells (11
    # and 22 channels, 5x5 and 7x7 windows on 56x56 to 112x112 maps) took 21-60 us per
    # fused kernel; as two kernels, NASNetMobile ran 1.06x (fp32) and 1.09x (fp16) faster
    # (`bench/ab_trees.py`, 2026-11-28). Refusing windows over 3x3 as well measured 1.08x
    # in fp32 but 0.86x in fp16 (docs/notebook/12-*.md, "What changed").
    depthwise_aligned: int = 4
    # The GEMM recomputes the means for each tile of output channels. On an H200 (profiled
    # timelines, 2026-11-25) the MEAN inside a classifier head of 1000 channels cost about
    # 29 us more than its own launch (docs/notebook/07-*.md, "A MEAN inside the GEMM").
    mean_max_reader_channels: int = 256
    # One work group computes them, so its time grows with them; on an H200
    # (`bench/diag_gpu.py --only timeline`, fp32) the kernel took 11-13 us up to 4,800
    # weights, 16-18 us at 19,200, 20-27 us at 37,632 and 41,472, against about 30 us for
    # the three launches it replaces (MEAN, two GEMMs), but 42-50 us at 110,592
    # (EfficientNetB0's last blocks) and 56-58 us at 165,888 (MobileNetV3Small's)
    # (docs/notebook/06-*.md, "Squeeze-excite").
    squeeze_excite_max_weights: int = 50_000
    # Past them the slices its depthwise work needs make the last group's reading dear: on
    # the H200 EfficientNetB0's 14x14x672 blocks took 39 us against 31-35 for the two
    # launches, its 480-channel ones 28-31 against 28-32 (docs/notebook/09-*.md, "A
    # squeeze-excite that computes its depthwise input").
    squeeze_excite_dw_max_channels: int = 512
    # On an H200 (EfficientNetB0's blocks, profiled) 4 and 64 ran its first six blocks in
    # 136 us against 141 for the two launches each replaces; 2 and 16 left the depthwise
    # work too few groups (its 112x112x32 block 28 us against 20) (docs/notebook/09-*.md).
    squeeze_excite_dw_groups_per_cu: int = 4
    squeeze_excite_dw_tail_loads: int = 64
    first_tier: bool = True
    # Each NVIDIA worker holds a context (hundreds of MB); 16 is the H200 host's measured
    # case.
    max_build_jobs: int = 16
    # NVIDIA creates contexts one at a time across processes (H200: 4 at once ready in
    # 1.4 s, 8 in 2.5 s, 16 in 4.4 s), so past about this many a worker is ready too late to
    # take a unit (docs/notebook/28-2026-12-02-cold-start-runs-split-at-64-kb-units-taken.md).
    max_build_workers: int = 9
    build_worker_timeout_s: float = 600.0
    #: field -> where its value came from ("env", "override"); absent: the default
    sources: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.fusions_off, frozenset):  # a set or list given: frozen
            object.__setattr__(self, "fusions_off", frozenset(self.fusions_off))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Switches:
        """The defaults with the DEVICEFARM_* variables of `environ` (os.environ) applied;
        a UsageError naming the variable for a value it cannot take."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, knob in KNOBS.items():
            raw = env.get(knob.env or "", "").strip()
            if knob.env and raw:
                values[name] = _PARSE.get(knob.env, _bool)(knob.env, raw)
        return cls(**values, sources=MappingProxyType({name: "env" for name in values}))

    def replace(self, **changes: Any) -> Switches:
        """A copy with `changes` (field names; ValueError for others): a value it already
        has keeps its source, another is an `override`, the default again the default."""
        unknown = sorted(set(changes) - set(KNOBS))
        if unknown:
            raise ValueError(f"no switch {', '.join(unknown)} (known: {', '.join(KNOBS)})")
        if "fusions_off" in changes:  # a set literal (parse_setting) is frozen
            changes["fusions_off"] = frozenset(changes["fusions_off"])
        sources = dict(self.sources)
        for name, value in changes.items():
            if value == getattr(self, name):
                continue
            if value != DEFAULTS_BY_NAME[name]:
                sources[name] = "override"
            else:
                sources.pop(name, None)
        return dataclasses.replace(self, **changes, sources=MappingProxyType(sources))

    @classmethod
    def plain(cls, environ: Mapping[str, str] | None = None) -> Switches:
        """The simple path: the switches of `environ` (None: the defaults, no environment)
        with every optional pass and fast path off (PLAIN), each recorded as an override.
        Its arithmetic is the shipped path's except where a fusion keeps a value in
        registers that plain stores between launches (fp16) or sums in another order
        (tests/ops/test_plain_paths.py)."""
        base = cls() if environ is None else cls.from_env(environ)
        return base.replace(**PLAIN)

    def source(self, name: str) -> str:
        """Where field `name`'s value came from: "default", "env" or "override"."""
        return self.sources.get(name, "default")

    def explicit(self, name: str) -> bool | None:
        """An on/off switch's value where it was set (env or override), else None: the
        default, which holds where the device suits it."""
        return None if self.source(name) == "default" else bool(getattr(self, name))

    def record(self) -> dict[str, dict[str, Any]]:
        """The configuration record's entries of the recorded fields: {"value", "source"}."""
        return {
            knob.record: {"value": _plain(getattr(self, name)), "source": self.source(name)}
            for name, knob in KNOBS.items()
            if knob.record is not None
        }


def _plain(value: Any) -> Any:
    if isinstance(value, frozenset):
        return sorted(value)
    return list(value) if isinstance(value, tuple) else value


#: The simple path (Switches.plain()): each optional pass and fast path off. Constant
#: folding stays on: it decides what the GPU takes (converted models delegate whole), not
#: how fast it runs, and plain() is the shipped path's partitions run simply.
PLAIN: dict[str, Any] = {
    "fuse": False,
    "concat_views": False,
    "specialize": False,
    "persistent": False,
    "host_edges": False,
    "hot_path": False,
    "native_loop": False,
    "pinned": False,
    "copy_helpers": 0,
}


#: Field name -> its default.
DEFAULTS_BY_NAME: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(Switches)}
#: The shipped configuration (what a session gets with no DEVICEFARM_* variable set).
DEFAULTS = Switches()

assert set(KNOBS) == set(DEFAULTS_BY_NAME) - {"sources"}, "a switch without its knob"


def by_record_name(name: str) -> str:
    """The field recorded as `name` ("gpu.persistent.MAX_RUN_BYTES"), or as `name` with
    its "gpu." left off ("persistent.MAX_RUN_BYTES", as bench/ab_knobs.py and
    bench/cold_start.py's --set write it); the field's own name passes. KeyError else."""
    if name in KNOBS:
        return name
    for field_name, knob in KNOBS.items():
        if knob.record in (name, f"gpu.{name}"):
            return field_name
    raise KeyError(name)


def parse_setting(text: str) -> tuple[str, Any]:
    """'NAME=VALUE' as (field, value): NAME any name `by_record_name` takes, also as a
    module constant under delegate_runtime.gpu once was ("opencl.persistent.GROUPS_PER_CU",
    "opencl.records.conv.PATCH_GEMM_MIN_N", a fusion's rule as
    "opencl.fusions.depthwise_into_gemm.DEPTHWISE_ALIGNED" or "opencl.fusion.*"); VALUE a
    Python literal ("None", "1 << 16" is not one). KeyError for a name no switch has
    (ValueError for a bad value)."""
    name, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"{text!r}: expected NAME=VALUE")
    name = name.strip()
    for prefix in ("opencl.records.", "opencl."):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    if name.startswith("fusions.") and name.count(".") == 2:  # recorded as gpu.fusion.*
        name = "fusion." + name.rsplit(".", 1)[1]
    field_name = by_record_name(name)
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"{text!r}: {value.strip()!r} is no Python literal") from exc
    return field_name, parsed
