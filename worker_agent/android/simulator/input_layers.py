"""benchmark_model's input flags, read as benchmark_tflite_model.cc reads them
(PopulateInputLayerInfo, SplitInputLayerNameAndValueFile, Init, LoadInputTensorData).

- `--input_layer` splits on ',' alone: a name's own ':' stays as it is;
- `--input_layer_shape` on ':' between layers, ',' between dimensions (as many shapes as
  names, no -1);
- `--input_layer_value_range` on ':' between items, each `name,low,high`;
- `--input_layer_value_files` on ',' between items, each `name:path` split at its one
  unescaped ':' ("::" stands for a ':' of the name or the path: `in::0:/p` is in:0);
- a range's or a file's name must be one of `--input_layer` (else the tool aborts);
- with the model: as many layers as inputs (else it aborts), a name other than its
  tensor's is only warned about, the rank must match, and a value file must hold exactly
  the tensor's bytes (else it aborts).

What the tool prints goes with each failure (tools/logging.h: ERROR and FATAL lines; a
FATAL aborts, exit 134 through the shell; an error returned ends in "Benchmarking failed.",
exit 1). NOTE: the simulated phone cannot resize an input: a shape other than the model's
is refused (the real tool resizes, and its model may or may not take it), and a value
range is checked but the random values ignore it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .fs import FsError

#: Exit statuses: an error returned (main prints "Benchmarking failed."), an abort.
ERROR, ABORT = 1, 134
_INT = re.compile(r"\s*[-+]?\d+")  #: what `std::istringstream >> int` reads


class ToolExit(Exception):
    """The tool stops with `status` after printing `text`."""

    def __init__(self, status: int, *lines: str):
        super().__init__(lines[0] if lines else "")
        self.status = status
        self.text = "".join(f"{line}\n" for line in lines)


def _error(*lines: str) -> ToolExit:
    return ToolExit(ERROR, *(f"ERROR: {line}" for line in lines))


def _fatal(line: str) -> ToolExit:
    return ToolExit(ABORT, f"FATAL: {line}")


@dataclass
class InputLayer:
    name: str
    shape: tuple[int, ...]
    value_file: str = ""
    value_range: tuple[int, int] | None = None


def _split(text: str, delim: str) -> list[str]:
    """absl::StrSplit, as the tool's Split calls it: none for an empty string."""
    return text.split(delim) if text else []


def split_name_and_file(item: str) -> tuple[str, str]:
    """SplitInputLayerNameAndValueFile: `name:path` at its one unescaped ':', then "::"
    -> ":" in both (`input::::0:/tmp::input` is `input::0` and `/tmp:input`). The last
    character is never the delimiter (the tool's loop stops before it)."""
    delim, i = -1, 0
    while i < len(item) - 1:  # NOTE: the tool's loop is undefined on "" (size_t - 1)
        if item[i] == ":":
            if item[i + 1] == ":":
                i += 1
            elif delim == -1:
                delim = i
            else:
                raise _error(f"{item} contains more than one delimiter.")
        i += 1
    if delim == -1:
        raise _error(f"{item} doesn't contain any delimiter.")
    return item[:delim].replace("::", ":"), item[delim + 1 :].replace("::", ":")


def _shape(text: str) -> tuple[int, ...]:
    """util::SplitAndParse(text, ','): each piece read as `istringstream >> int` does."""
    dims = []
    for piece in _split(text, ","):
        m = _INT.match(piece)
        if m is None:
            raise _fatal(f"Incorrect size string specified: {text}")
        dims.append(int(m.group()))
    return tuple(dims)


def _index(layers: list[InputLayer], name: str, names: str) -> InputLayer:
    """FindLayerInfoIndex: the layer named `name`, or the tool aborts."""
    for layer in layers:
        if layer.name == name:
            return layer
    raise _fatal(
        f"Cannot find the corresponding input_layer name({name}) in --input_layer as {names}"
    )


def parse(names: str, shapes: str, ranges: str, files: str) -> list[InputLayer]:
    """The layers the four flags give (empty without --input_layer); ToolExit as the tool
    fails on them (ValidateParams, before the model is loaded)."""
    name_list, shape_list = _split(names, ","), _split(shapes, ":")
    if len(name_list) != len(shape_list):
        raise _error(
            f"The number of items in --input_layer_shape ({shapes}, with {len(shape_list)} "
            f"items) must match the number of items in --input_layer ({names}, with "
            f"{len(name_list)} items). For example --input_layer=input1,input2 "
            "--input_layer_shape=1,224,224,4:1,20"
        )
    layers = []
    for name, text in zip(name_list, shape_list, strict=True):
        shape = _shape(text)
        if -1 in shape:
            raise _error(
                "Any unknown sizes in the shapes (-1's) must be replaced with the size you "
                "want to benchmark with."
            )
        layers.append(InputLayer(name, shape))
    for item in _split(ranges, ":"):
        parts = _split(item, ",")
        if len(parts) != 3:
            raise _error(f"Wrong input value range item specified: {item}")
        layer = _index(layers, parts[0], names)
        low, high = (_INT.fullmatch(p.strip()) for p in parts[1:])
        if low is None or high is None or int(low.group()) > int(high.group()):
            raise _error(f"Wrong low and high value of the input value range specified: {item}")
        layer.value_range = (int(low.group()), int(high.group()))
    for item in _split(files, ","):
        try:
            name, path = split_name_and_file(item)
        except ToolExit as exc:
            raise ToolExit(
                ERROR,
                *exc.text.splitlines(),
                f"ERROR: Wrong input value file item specified: {item}",
                f"ERROR: {ERROR}",  # the status, as the tool logs it
            ) from exc
        _index(layers, name, names).value_file = path
    return layers


def values(
    model: Any,
    layers: Sequence[InputLayer],
    read: Callable[[str], bytes],
    write: Callable[[str], Any],
    random: Callable[[], list[np.ndarray]],
) -> list[np.ndarray] | None:
    """The model's input values as the tool prepares them (Init, PrepareInputData): the
    layers' value files, `random()`'s values for the others; None without layers.
    `read(path)` reads a phone file (FsError when it cannot), `write` prints."""
    if not layers:
        return None
    sg = model.subgraphs[0]
    if len(layers) != len(sg.inputs):
        raise _fatal(f"Inputs mismatch: Model inputs #:{len(layers)} expected: {len(sg.inputs)}")
    tensors = [sg.tensors[i] for i in sg.inputs]
    for index, t, layer in zip(sg.inputs, tensors, layers, strict=True):
        if layer.name != t.name:
            write(f"WARN: Tensor # {index} is named {t.name} but flags call it {layer.name}\n")
        if len(layer.shape) != len(t.shape):
            raise _error(f"Input tensor #{index} should have {len(t.shape)} dimensions!")
        if tuple(layer.shape) != tuple(t.shape):
            raise _error(  # NOTE: our wording: the simulated phone does not resize inputs
                f"Input tensor #{index}: the simulated phone does not resize inputs "
                f"(--input_layer_shape {list(layer.shape)}, the model's {list(t.shape)})"
            )
    out = random()
    for i, (t, layer) in enumerate(zip(tensors, layers, strict=True)):
        if layer.value_file:
            out[i] = _load(t, layer.value_file, read)
    return out


def _load(t: Any, path: str, read: Callable[[str], bytes]) -> np.ndarray:
    """LoadInputTensorData for a numeric tensor."""
    try:
        data = read(path)
    except FsError as exc:
        raise _fatal(f"Failed to read the input_layer_value_file:{path}") from exc
    dtype = np.dtype(t.dtype)
    need = int(np.prod(t.shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != need:
        raise _fatal(f"The size of {path} is {len(data)} bytes. It should be {need} bytes.")
    return np.frombuffer(data, dtype).reshape(t.shape).copy()
