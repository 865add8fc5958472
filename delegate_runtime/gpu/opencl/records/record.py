"""One record per GPU op: its support rule, its lowering and its kernel source (template
instances included), the way TFLite's GPU delegate keeps one parser class per op
(IsSupported, Parse)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ....graph import Operator, Subgraph
from ..lowering_api import Lowering, StepSpec

#: (ok, why) for one node; why is TFLite's wording when not ok.
Check = Callable[[Operator, Subgraph], tuple[bool, str]]
#: The shape of each output, computed from the inputs' shapes, constant inputs and options
#: as LiteRT's Prepare does; ModelError where it cannot be.
Shapes = Callable[[Operator, Subgraph], "list[tuple[int, ...]]"]


#: How a node runs as steps of the producer of its input `t`, or None where it cannot.
AsStep = Callable[[Operator, Subgraph, int], "list[StepSpec] | None"]


#: A template's instances: kernel name -> its substitutions ({"@TS@": "64"}); each instance
#: also has @NAME@ replaced by its name.
Instances = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, eq=False)
class Template:
    """A kernel template file (`.cl.in` in gpu/opencl/) and its instances: the kernels
    made of it. `instances` is called when the program is assembled (opencl/program.py),
    so that tuning read then (the GEMM's variants) shapes them. Records sharing a
    template share this object."""

    file: str
    instances: Callable[[], Instances]


#: A record's kernel source: a plain `.cl` file in gpu/opencl/, or a template.
KernelSource = str | Template


def source_file(source: KernelSource) -> str:
    """The file a kernel source is read from."""
    return source.file if isinstance(source, Template) else source


@dataclass(frozen=True)
class OpRule:
    """Versions accepted in float models, and with quantization enabled."""

    float_versions: tuple[int, ...]
    quant_versions: tuple[int, ...] = ()


def versions(n: int) -> tuple[int, ...]:
    """Versions 1 to n."""
    return tuple(range(1, n + 1))


def always(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    return True, ""


def same_as_input(op: Operator, sg: Subgraph) -> list[tuple[int, ...]]:
    """Every output shaped as input 0 (elementwise unary ops, softmax, quantize)."""
    return [tuple(sg.tensors[op.inputs[0]].shape)] * len(op.outputs)


@dataclass(frozen=True)
class GpuOp:
    """Everything the delegate knows about one op."""

    name: str  #: TFLite's op name ("CONV_2D"; custom ops "CUSTOM:<code>")
    rule: OpRule
    lower: Callable[[Lowering, Operator], None]  #: appends the op's launches
    #: its kernel sources: files in gpu/opencl/, templates with their instances
    kernels: tuple[KernelSource, ...] = ()
    check: Check = always  #: the op's own support conditions past versions, types and shapes
    #: its outputs' shapes, computed (the delegate takes it only where they are the declared)
    shapes: Shapes = same_as_input
    bool_tensors: bool = False  #: takes bool runtime tensors (LOGICAL_AND, comparisons)
    int32_tensors: bool = False  #: takes int32 runtime tensors (CAST, GATHER's indices)
    #: its kernel applies an epilogue (absorbs the elementwise nodes after it)
    epilogue: bool = False
    as_step: AsStep | None = None  #: how it is absorbed into its producer's epilogue
    #: whether its kernel can scale its input's channels as it loads them (a squeeze-excite
    #: gate MUL before it, absorbed)
    input_scale: Callable[[Operator, Subgraph], bool] | None = None
    #: whether its kernel can read its input zero-padded in H and W (a PAD before it,
    #: absorbed into its own padding)
    input_pad: Callable[[Operator, Subgraph], bool] | None = None
    #: whether its kernel can compute its input as it loads it from the input of the
    #: depthwise convolution producing it (that node absorbed, its output never stored)
    input_depthwise: Callable[[Operator, Subgraph], bool] | None = None
    #: whether its kernel can compute its input as it loads it from the input of the MEAN
    #: over the pixels producing it (that node absorbed, its output never stored)
    input_mean: Callable[[Operator, Subgraph], bool] | None = None
    #: the kernels its lowering launches, by name ("name*": every kernel whose name starts
    #: so), besides the quantize-and-dequantize launch after a quantized output; None:
    #: not declared (op_forms' test fails)
    launches: tuple[str, ...] | None = None
    #: the ops it should be as fast as (op_forms.FAMILIES): it has every fast form
    #: (op_forms.FORMS) one of them has, unless `lacks` says why not
    family: str = ""
    #: form -> why this op lacks that form of its family
    lacks: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: of its kernel files, those compiled only into the programs of models that carry an
    #: op listing them (ops vision models rarely carry: opencl/program.py on_demand_files);
    #: every record listing such a file says so
    on_demand: tuple[str, ...] = ()


#: op name -> its record, in registration order.
REGISTRY: dict[str, GpuOp] = {}


def register(*records: GpuOp) -> None:
    """Add records; a name registered twice is a bug."""
    for record in records:
        if record.name in REGISTRY:
            raise ValueError(f"GPU op {record.name} registered twice")
        REGISTRY[record.name] = record


def record_for(name: str) -> GpuOp | None:
    return REGISTRY.get(name)
