"""A model with its inputs resized: every tensor's shape made static for those sizes.

Audio front ends and text models declare a placeholder input shape (`[1, 1]` with the
signature `[1, -1]`): TFLite resizes the input (`ResizeInputTensor`, benchmark_model's
`--input_layer_shape`) and each kernel's Prepare sizes its outputs. The GPU delegate plans
its buffers and launches from declared shapes, so a resized model is made here the same
way: the CPU reference runs once on zeros of the new sizes, and every tensor of the main
subgraph that it computed is declared with the shape it had. Ops whose output shape depends
on input values (WHERE, UNIQUE, NON_MAX_SUPPRESSION) get the shape they had on zeros; the
delegate refuses such ops anyway.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence

import numpy as np

from .errors import JobError
from .graph import Model
from .interpreter import Interpreter


def parse_input_layers(names: str, shapes: str) -> dict[str, tuple[int, ...]]:
    """benchmark_model's `--input_layer` and `--input_layer_shape` values (names joined by
    `,`, their shapes by `:`, e.g. `a,b` and `1,1280:1,16`) as name -> shape. JobError on
    anything else."""
    layer_names = [n.strip() for n in names.split(",") if n.strip()]
    layer_shapes = [s.strip() for s in shapes.split(":") if s.strip()]
    if len(layer_names) != len(layer_shapes):
        raise JobError(
            f"--input_layer names {len(layer_names)} inputs but --input_layer_shape gives "
            f"{len(layer_shapes)} shapes"
        )
    out: dict[str, tuple[int, ...]] = {}
    for name, dims in zip(layer_names, layer_shapes, strict=True):
        if not re.fullmatch(r"\d+(,\d+)*", dims.replace(" ", "")):
            raise JobError(
                f"--input_layer_shape {dims!r} for {name!r}: expected D1,D2,... of positive integers"
            )
        shape = tuple(int(d) for d in dims.replace(" ", "").split(","))
        if 0 in shape:
            raise JobError(f"--input_layer_shape {dims!r} for {name!r}: a dimension is 0")
        out[name] = shape
    return out


def with_input_shapes(model: Model, shapes: Mapping[str, Sequence[int]]) -> Model:
    """A copy of `model` whose main subgraph's inputs named in `shapes` have those shapes
    and whose other tensors have the static shapes they then take. JobError for an unknown
    input or a shape its signature forbids; ModelError where the model cannot run at that
    size."""
    sg = model.main
    by_name = {sg.tensors[t].name: pos for pos, t in enumerate(sg.inputs)}
    unknown = sorted(set(shapes) - set(by_name))
    if unknown:
        raise JobError(f"no input named {unknown[0]!r} (the model's inputs: {sorted(by_name)})")
    feeds = []
    for t in sg.inputs:
        tensor = sg.tensors[t]
        shape = tuple(shapes.get(tensor.name, tensor.shape))
        feeds.append(np.zeros(shape, tensor.dtype))
    interpreter = Interpreter(model)
    values = interpreter.initial_values(0, interpreter.check_inputs(feeds))
    for node in range(len(sg.operators)):
        interpreter.run_node(0, node, values)
    resized = copy.copy(model)
    resized.subgraphs = list(model.subgraphs)
    main = copy.copy(sg)
    main.tensors = [copy.copy(t) for t in sg.tensors]
    for t in main.tensors:
        value = values.get(t.index)
        if value is None or t.is_constant:
            continue
        t.shape = tuple(int(d) for d in np.shape(value))
    resized.subgraphs[0] = main
    return resized
