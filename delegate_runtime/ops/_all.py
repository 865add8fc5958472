"""Imports every kernel module so that each registers its ops."""

import importlib

#: Kernel modules by op family. Each must import: a missing or broken one is an error.
KERNEL_MODULES = (
    "conv",
    "pool",
    "fully_connected",
    "elementwise",
    "activations",
    "reduce",
    "shape",
    "slicing",
    "resize",
    "space",
    "quantize",
    "misc",
    "control_flow",
    "lstm",
    "detection",
    "densify",
    "mediapipe",
    "numeric",
    "normalization",
    "spectral",
    "indexing",
    "segments",
    "reduce_window",
    "nms",
    "rnn",
    "conv3d",
    "hashing",
    "hashtable",
    "random_ops",
)


def import_kernel_modules(names: tuple[str, ...] = KERNEL_MODULES) -> None:
    """Import each kernel module; one that is missing or fails raises (never skipped)."""
    for name in names:
        importlib.import_module(f"{__package__}.{name}")


import_kernel_modules()
