"""A bench's `NAME=VALUE` setting: a switch of the GPU delegate's switchboard (by field,
record name or old module path, the fusions' rules included), or else a constant of one
of its modules that is not on the switchboard (the GEMM's variants: set on the module)."""

from __future__ import annotations

import ast
import importlib
from types import ModuleType
from typing import Any

from delegate_runtime.gpu.switches import parse_setting


def parse_knob(setting: str, root: str) -> tuple[str, Any] | tuple[ModuleType, str, Any]:
    """(field, value) for a switch (switches.parse_setting's names); else `module.NAME=VALUE`
    read as (the module `root`.module, NAME, the literal VALUE). ValueError with the reason
    for a bad value, a module that does not exist or a constant it lacks."""
    try:
        return parse_setting(setting)
    except KeyError:
        pass
    target, _, value = setting.partition("=")
    module_name, _, const = target.rpartition(".")
    try:
        module = importlib.import_module(f"{root}.{module_name}")
    except ModuleNotFoundError:
        raise ValueError(f"no switch or module {target}") from None
    if not hasattr(module, const):
        raise ValueError(f"no switch {target}; {root}.{module_name} has no {const}")
    return module, const, ast.literal_eval(value)
