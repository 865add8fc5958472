"""Test helpers that cut into `.tflite` bytes: locate the fields a reader trusts (indices,
lengths, offsets, shapes) to overwrite them in place, and build models whose constants live
outside the flatbuffer (buffer offset/size), which our builder does not write."""

from __future__ import annotations

import importlib
import importlib.util
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from delegate_runtime.builder import ModelBuilder

#: The shared folder beside the repository (../shared).
SHARED_DIR = Path(__file__).resolve().parents[2].parent / "shared"
DEV_MODELS_DIR = SHARED_DIR / "conformance" / "dev"


def _tests_conftest() -> Any:
    """tests/conftest.py by path: `import conftest` may find another tier's conftest."""
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("_devicefarm_tests_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dev_models() -> list[Path]:
    """The shared dev models; skips locally (fails in CI) when ../shared is missing."""
    found = sorted(DEV_MODELS_DIR.glob("*.tflite"))
    _tests_conftest().require(bool(found), f"shared dev models in {DEV_MODELS_DIR}")
    return found


@dataclass(frozen=True)
class Field:
    """A scalar the reader trusts, at byte `pos`, packed as `fmt` (struct format)."""

    kind: str
    pos: int
    fmt: str


def _tfl() -> Any:
    return importlib.import_module("tflite")


def _slot(obj: Any, slot: int) -> int:
    """Absolute position of a table field, or 0 when the field is absent."""
    o = obj._tab.Offset(slot)
    return obj._tab.Pos + o if o else 0


def _vector(obj: Any, slot: int, kind: str, fmt: str | None) -> list[Field]:
    """The length word of a vector field and, for scalar vectors, each element."""
    o = obj._tab.Offset(slot)
    if not o:
        return []
    start = obj._tab.Vector(o)
    n = obj._tab.VectorLen(o)
    out = [Field(f"{kind}.length", start - 4, "<I")]
    if fmt is not None:
        size = struct.calcsize(fmt)
        out += [Field(kind, start + j * size, fmt) for j in range(min(n, 64))]
    return out


def _scalar(obj: Any, slot: int, kind: str, fmt: str) -> list[Field]:
    pos = _slot(obj, slot)
    return [Field(kind, pos, fmt)] if pos else []


def locate_fields(data: bytes) -> list[Field]:
    """Every index, length, offset, type and shape field of a model (first 64 per vector)."""
    tfl = _tfl()
    m = tfl.Model.GetRootAs(data, 0)
    fields = [Field("root_offset", 0, "<I")]
    fields += _scalar(m, 4, "model.version", "<I")
    for slot, kind in ((6, "opcodes"), (8, "subgraphs"), (12, "buffers"), (18, "signatures")):
        fields += _vector(m, slot, kind, None)
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        fields += _scalar(oc, 4, "opcode.deprecated_code", "<b")
        fields += _scalar(oc, 8, "opcode.version", "<i")
        fields += _scalar(oc, 10, "opcode.builtin_code", "<i")
    for i in range(m.BuffersLength()):
        b = m.Buffers(i)
        fields += _vector(b, 4, "buffer.data", None)
        fields += _scalar(b, 6, "buffer.offset", "<Q")
        fields += _scalar(b, 8, "buffer.size", "<Q")
    for s in range(m.SubgraphsLength()):
        fields += _subgraph_fields(m.Subgraphs(s))
    for i in range(m.SignatureDefsLength()):
        sig = m.SignatureDefs(i)
        fields += _scalar(sig, 12, "signature.subgraph", "<I")
        for j in range(sig.InputsLength()):
            fields += _scalar(sig.Inputs(j), 6, "signature.tensor", "<I")
        for j in range(sig.OutputsLength()):
            fields += _scalar(sig.Outputs(j), 6, "signature.tensor", "<I")
    return fields


def _subgraph_fields(sg: Any) -> list[Field]:
    fields = []
    for slot, kind in ((4, "tensors"), (10, "operators")):
        fields += _vector(sg, slot, kind, None)
    fields += _vector(sg, 6, "subgraph.inputs", "<i")
    fields += _vector(sg, 8, "subgraph.outputs", "<i")
    for t in range(sg.TensorsLength()):
        tensor = sg.Tensors(t)
        fields += _vector(tensor, 4, "tensor.shape", "<i")
        fields += _scalar(tensor, 6, "tensor.type", "<b")
        fields += _scalar(tensor, 8, "tensor.buffer", "<I")
        fields += _scalar(tensor, 14, "tensor.is_variable", "<B")
        fields += _vector(tensor, 18, "tensor.shape_signature", "<i")
        q = tensor.Quantization()
        if q is not None:
            fields += _vector(q, 8, "quant.scale", "<f")
            fields += _vector(q, 10, "quant.zero_point", "<q")
            fields += _scalar(q, 16, "quant.axis", "<i")
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        fields += _scalar(op, 4, "operator.opcode", "<I")
        fields += _vector(op, 6, "operator.inputs", "<i")
        fields += _vector(op, 8, "operator.outputs", "<i")
        fields += _scalar(op, 10, "operator.options_type", "<B")
        fields += _vector(op, 20, "operator.intermediates", "<i")
    return fields


def fields_of(data: bytes, kind: str) -> list[Field]:
    return [f for f in locate_fields(data) if f.kind == kind]


def patch(data: bytes, field: Field, value: int | float) -> bytes:
    """`data` with `field` overwritten by `value` (wrapped to the field's width)."""
    size = struct.calcsize(field.fmt)
    if field.fmt[-1] in "fd":
        raw = struct.pack(field.fmt, value)
    else:
        raw = (int(value) % (1 << (8 * size))).to_bytes(size, "little")
    return data[: field.pos] + raw + data[field.pos + size :]


def tensor_field(data: bytes, kind: str, subgraph: int, tensor: int) -> Field:
    """The `kind` field ("tensor.buffer", "tensor.type") of one tensor."""
    sg = _tfl().Model.GetRootAs(data, 0).Subgraphs(subgraph)
    found = _subgraph_fields_of_tensor(sg.Tensors(tensor), kind)
    if not found:
        raise KeyError(f"tensor {tensor} has no stored {kind}")
    return found[0]


def _subgraph_fields_of_tensor(tensor: Any, kind: str) -> list[Field]:
    slots = {"tensor.type": (6, "<b"), "tensor.buffer": (8, "<I"), "tensor.is_variable": (14, "<B")}
    if kind in slots:
        slot, fmt = slots[kind]
        return _scalar(tensor, slot, kind, fmt)
    return [f for f in _vector(tensor, 4, "tensor.shape", "<i") if f.kind == kind]


def data_regions(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte ranges of constant data: mutations there are only new weights."""
    m = _tfl().Model.GetRootAs(data, 0)
    out = []
    for i in range(m.BuffersLength()):
        b = m.Buffers(i)
        o = b._tab.Offset(4)
        if o:
            start = b._tab.Vector(o)
            out.append((start, start + b._tab.VectorLen(o)))
        if b.Offset() > 1:
            out.append((b.Offset(), b.Offset() + b.Size()))
    return out


def structure_positions(data: bytes) -> np.ndarray:
    """Byte positions outside constant data: where a mutation changes the model's shape."""
    mask = np.ones(len(data), bool)
    for start, end in data_regions(data):
        mask[start:end] = False
    return np.flatnonzero(mask)


#: Marker written in place of each external buffer's offset until the file is laid out.
_MARKER = 0x5EED_0FF5_0000_0000
_ALIGN = 16


class ExternalBufferBuilder(ModelBuilder):
    """A ModelBuilder whose constants follow the flatbuffer, named by offset and size (the
    layout TFLite uses for models over 2 GB)."""

    def __init__(self, description: str = "external buffers") -> None:
        super().__init__(description)
        self._blobs: list[bytes] = []

    def _buffer(self, fb: Any, tfl: Any, data: np.ndarray | None) -> int:
        if data is None:
            return super()._buffer(fb, tfl, data)
        B = importlib.import_module("tflite.Buffer")
        self._blobs.append(data.tobytes())
        B.BufferStart(fb)
        B.BufferAddOffset(fb, _MARKER + len(self._blobs) - 1)
        B.BufferAddSize(fb, len(self._blobs[-1]))
        return B.BufferEnd(fb)

    def build(self) -> bytes:
        self._blobs = []
        out = bytearray(super().build())
        for k, blob in enumerate(self._blobs):
            out += b"\0" * (-len(out) % _ALIGN)
            marker = struct.pack("<Q", _MARKER + k)
            assert out.count(marker) == 1, "marker collision"
            at = out.index(marker)
            out[at : at + 8] = struct.pack("<Q", len(out))
            out += blob
        return bytes(out)
