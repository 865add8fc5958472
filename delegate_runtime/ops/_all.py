"""Imports every kernel module so that each registers its ops."""

import importlib

#: Kernel modules by op family. A module that is not written yet is skipped.
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
)

for _name in KERNEL_MODULES:
    try:
        importlib.import_module(f"{__package__}.{_name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.{_name}":
            raise
