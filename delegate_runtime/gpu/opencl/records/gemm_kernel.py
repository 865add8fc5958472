"""The tiled GEMM kernel that CONV_2D, FULLY_CONNECTED, BATCH_MATMUL and LSTM lower to
(gemm.cl.in): its variants and the template's instances, which those records list as
their kernel source (`GEMM`). Which variant a product takes: opencl/gemm_lowering.py."""

from __future__ import annotations

from .record import Instances, Template

#: GEMM variants: name -> (tile, work per thread, k step).
GEMM_VARIANTS = {"gemm64": (64, 4, 32), "gemm32": (32, 2, 64), "gemm16": (16, 1, 64)}
#: Variants instantiated only computing A from a depthwise input (the others: every kind).
DEPTHWISE_ONLY_VARIANTS = {"gemm16"}
#: Suffix of the variants that load four elements at a time (K and N multiples of 4).
VECTOR_SUFFIX = "v"
#: Suffix of the variants computing A from an absorbed depthwise convolution (before "v").
DEPTHWISE_SUFFIX = "dw"
#: Suffix of the variants reading A as a convolution's patches in place (before "v").
PATCH_SUFFIX = "p"
#: Suffix of the variants computing A as the mean over the pixels of its input (before "v").
MEAN_SUFFIX = "m"


def gemm_instances(variants: dict[str, tuple[int, int, int]] | None = None) -> Instances:
    """gemm.cl.in's substitutions for each variant (default GEMM_VARIANTS): scalar and
    vector loads, each reading A from memory, computing it from a depthwise input or as a
    mean over pixels, or reading it as a convolution's patches."""
    out = {}
    for name, (ts, wpt, tk) in (variants or GEMM_VARIANTS).items():
        if (ts // wpt) ** 2 < tk:
            raise ValueError(f"GEMM variant {name}: fewer items than its k step's channels")
        base = {"@TS@": str(ts), "@WPT@": str(wpt), "@TK@": str(tk)}
        kinds = [
            ("0", "0", "0", name),
            ("1", "0", "0", name + DEPTHWISE_SUFFIX),
            ("0", "1", "0", name + PATCH_SUFFIX),
            ("0", "0", "1", name + MEAN_SUFFIX),
        ]
        if name in DEPTHWISE_ONLY_VARIANTS:
            kinds = kinds[1:2]
        for dw, patch, mean, prefix in kinds:
            kind = {"@DW@": dw, "@PATCH@": patch, "@MEAN@": mean}
            out[prefix] = {**base, **kind, "@VEC@": "0"}
            out[prefix + VECTOR_SUFFIX] = {**base, **kind, "@VEC@": "1"}
    return out


#: The template, its instances made from GEMM_VARIANTS as they are when the program is
#: assembled.
GEMM = Template("gemm.cl.in", gemm_instances)
