"""The compatibility list's decision tree as plain objects (database.fbs's tables).

`DeviceDatabase{root:[DeviceDecisionTreeNode]}`; a node is `{variable, comparison, items}`;
an edge `{value, children, derived_properties}`; a property `{variable, value}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: database.fbs `enum Comparison : byte`.
EQUAL, MINIMUM, MAXIMUM = 0, 1, 2
COMPARISON_NAMES = {EQUAL: "EQUAL", MINIMUM: "MINIMUM", MAXIMUM: "MAXIMUM"}

#: TFLite's derived decision and its values (variables.h).
STATUS = "tflite.gpu.status"
STATUS_SUPPORTED, STATUS_UNSUPPORTED, STATUS_UNKNOWN = "SUPPORTED", "UNSUPPORTED", "UNKNOWN"


@dataclass
class Edge:
    value: str
    children: list[Node] = field(default_factory=list)
    derived_properties: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Node:
    variable: str | None
    comparison: int = EQUAL
    items: list[Edge] = field(default_factory=list)


#: Our extra derived properties (names outside TFLite's reserved `tflite.` prefix).
PRECISION = "devicefarm.gpu.precision"  #: fp16 (precision loss allowed) / fp32 / none
ENABLE_QUANT = "devicefarm.gpu.enable_quant"  #: true / false / none
REASON = "devicefarm.gpu.reason"  #: the reason code of an unsupported device, else none

#: The delegate whose list is LiteRT's own (`tflite.gpu.status`, read by an app's
#: GPUCompatibilityList). Another delegate's list is a file of its own with derived
#: properties `devicefarm.<delegate>.*` (docs/delegates.md, "Allowlists per delegate").
GPU = "gpu"


def status_variable(delegate: str = GPU) -> str:
    """The derived property that holds a delegate's SUPPORTED/UNSUPPORTED/UNKNOWN."""
    return STATUS if delegate == GPU else f"devicefarm.{delegate}.status"


def config_variable(delegate: str) -> str:
    """The best canonical configuration of a supported device (another delegate's list)."""
    return f"devicefarm.{delegate}.config"


def reason_variable(delegate: str = GPU) -> str:
    """The reason code of an unsupported device, else none."""
    return REASON if delegate == GPU else f"devicefarm.{delegate}.reason"
