"""Write valid `.tflite` files from Python, with no TensorFlow: for tests and op probes.

    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 8, 8, 3), np.float32)
    w = g.const("w", weights)                      # dtype from the array
    y = g.tensor("y", (1, 8, 8, 4), np.float32)
    g.op("CONV_2D", [x, w, bias], [y], padding="SAME", fused_activation_function="RELU")
    g.output(y)
    data = b.build()                               # bytes of a .tflite file

Options are the schema's field names in snake_case; enum fields take their names
("SAME", "RELU6") or codes; vector fields take lists. Custom ops take their options as
raw bytes (usually a flexbuffer map):

    g.custom_op("TFLite_Detection_PostProcess", [boxes, scores, anchors], outs,
                custom_options=flexbuffers.Dumps({...}))

Sparse constants take their stored values and SparsityParameters (see `sparsity.sparsify`):

    values, sp = sparsify(weights, ["DENSE", "SPARSE_CSR"])
    w = g.sparse_const("w", weights.shape, values, sp)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtypes import tflite_type
from .sparsity import INDEX_VECTOR_TYPES, SPARSE_CSR, DimMetadata, Sparsity
from .strings import encode as encode_strings

#: Prefix of custom op names, as the reader names them ("CUSTOM:<custom_code>").
CUSTOM_PREFIX = "CUSTOM:"

_POOL = "Pool2DOptions"
_REDUCER = "ReducerOptions"
#: Ops whose options table is not named after the op.
OPTIONS_TABLE_OVERRIDES = {
    "AVERAGE_POOL_2D": _POOL,
    "MAX_POOL_2D": _POOL,
    "L2_POOL_2D": _POOL,
    "L2_NORMALIZATION": "L2NormOptions",
    "MEAN": _REDUCER,
    "SUM": _REDUCER,
    "REDUCE_MAX": _REDUCER,
    "REDUCE_MIN": _REDUCER,
    "REDUCE_PROD": _REDUCER,
    "REDUCE_ANY": _REDUCER,
    "REDUCE_ALL": _REDUCER,
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "LSTM": "LSTMOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions",
    "RANDOM_UNIFORM": "RandomOptions",
    "MULTINOMIAL": "RandomOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "RELU_N1_TO_1": None,
    "RELU": None,
    "RELU6": None,
    "LOGISTIC": None,
    "TANH": None,
}

#: Enum-valued option fields: field -> tflite enum class name.
ENUM_FIELDS = {
    "padding": "Padding",
    "fused_activation_function": "ActivationFunctionType",
    "weights_format": "FullyConnectedOptionsWeightsFormat",
    "kernel_type": "LSTMKernelType",
    "combiner": "CombinerType",
    "mode": "MirrorPadMode",
    "out_data_type": None,
    "output_type": None,
    "idx_out_type": None,
    "in_data_type": None,
}


@dataclass(frozen=True)
class Quant:
    """Quantization parameters: per tensor (scalars) or per channel (arrays along `axis`)."""

    scale: Any
    zero_point: Any = 0
    axis: int = 0


def _tfl() -> Any:
    return importlib.import_module("tflite")


def _mod(table: str) -> Any:
    """The generated module of a schema table (its Start/Add/End functions)."""
    return importlib.import_module(f"tflite.{table}")


def _options_class(op: str) -> str | None:
    if op in OPTIONS_TABLE_OVERRIDES:
        return OPTIONS_TABLE_OVERRIDES[op]
    wanted = op.replace("_", "").lower() + "options"
    for name in [*vars(_tfl().BuiltinOptions), *vars(_tfl().BuiltinOptions2)]:
        if name.lower() == wanted:
            return name
    return None


def _enum_value(field: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    enum_name = ENUM_FIELDS.get(field)
    if (
        field in ("out_data_type", "output_type", "idx_out_type", "in_data_type")
        or enum_name is None
    ):
        return tflite_type(value) if field.endswith("type") else value
    return getattr(getattr(_tfl(), enum_name), value.upper())


def _camel(field: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in field.split("_"))


@dataclass
class _TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    quant: Quant | None
    data: np.ndarray | None
    shape_signature: tuple[int, ...] | None
    is_variable: bool
    sparsity: Sparsity | None = None  #: `data` then holds the stored values only


@dataclass
class _OpSpec:
    op: str
    version: int
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any]
    intermediates: list[int]
    custom_options: bytes | None = None  #: raw options of a custom op


class SubgraphBuilder:
    """Tensors and operators of one subgraph."""

    def __init__(self, model: ModelBuilder, index: int, name: str):
        self.model = model
        self.index = index
        self.name = name
        self.tensors: list[_TensorSpec] = []
        self.ops: list[_OpSpec] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(
        self,
        name: str,
        shape: tuple[int, ...] | list[int],
        dtype: Any = np.float32,
        quant: Quant | tuple | None = None,
        shape_signature: tuple[int, ...] | None = None,
        is_variable: bool = False,
    ) -> int:
        """Add a runtime tensor; returns its index."""
        if isinstance(quant, tuple):
            quant = Quant(*quant)
        self.tensors.append(
            _TensorSpec(
                name,
                tuple(int(d) for d in shape),
                np.dtype(dtype),
                quant,
                None,
                shape_signature,
                is_variable,
            )
        )
        return len(self.tensors) - 1

    def input(self, name: str, shape: Any, dtype: Any = np.float32, **kw: Any) -> int:
        """Add a tensor and make it the subgraph's next input."""
        t = self.tensor(name, shape, dtype, **kw)
        self.inputs.append(t)
        return t

    def const(
        self, name: str, data: Any, quant: Quant | tuple | None = None, dtype: Any = None
    ) -> int:
        """Add a constant tensor holding `data` (its dtype unless `dtype` is given)."""
        arr = np.array(data, dtype=dtype, order="C")  # keeps 0-d constants 0-d
        t = self.tensor(name, arr.shape, arr.dtype, quant)
        self.tensors[t].data = arr
        return t

    def sparse_const(
        self,
        name: str,
        shape: tuple[int, ...] | list[int],
        values: Any,
        sparsity: Sparsity,
        quant: Quant | tuple | None = None,
    ) -> int:
        """Add a sparse constant of `shape` storing `values` as `sparsity` describes
        (written as given, so tests can write malformed ones too)."""
        arr = np.ascontiguousarray(values)
        t = self.tensor(name, shape, arr.dtype, quant)
        self.tensors[t].data = arr
        self.tensors[t].sparsity = sparsity
        return t

    def output(self, *tensors: int) -> None:
        self.outputs.extend(tensors)

    def op(
        self,
        op: str,
        inputs: list[int],
        outputs: list[int],
        version: int = 1,
        intermediates: list[int] | None = None,
        **options: Any,
    ) -> None:
        """Add a builtin operator; `options` are its schema fields in snake_case."""
        self.ops.append(
            _OpSpec(op, version, list(inputs), list(outputs), options, list(intermediates or []))
        )

    def custom_op(
        self,
        custom_code: str,
        inputs: list[int],
        outputs: list[int],
        custom_options: bytes = b"",
        version: int = 1,
    ) -> None:
        """Add a custom operator (builtin code CUSTOM) with raw flexbuffer `custom_options`."""
        self.ops.append(
            _OpSpec(
                CUSTOM_PREFIX + custom_code,
                version,
                list(inputs),
                list(outputs),
                {},
                [],
                bytes(custom_options),
            )
        )


class ModelBuilder:
    """A whole model: subgraph 0 (`main`), more subgraphs, signatures."""

    def __init__(self, description: str = "devicefarm builder"):
        self.description = description
        self.subgraphs: list[SubgraphBuilder] = []
        self.signatures: list[tuple[str, int, dict[str, int], dict[str, int]]] = []
        self.main = self.subgraph("main")

    def subgraph(self, name: str) -> SubgraphBuilder:
        sg = SubgraphBuilder(self, len(self.subgraphs), name)
        self.subgraphs.append(sg)
        return sg

    def signature(
        self, key: str, subgraph: SubgraphBuilder, inputs: dict[str, int], outputs: dict[str, int]
    ) -> None:
        self.signatures.append((key, subgraph.index, inputs, outputs))

    # -- serialisation ----------------------------------------------------------

    def build(self) -> bytes:
        """Serialise to `.tflite` bytes."""
        import flatbuffers

        tfl = _tfl()
        fb = flatbuffers.Builder(1024)
        opcode_keys: list[tuple[str, int]] = []
        for sg in self.subgraphs:
            for o in sg.ops:
                if (o.op, o.version) not in opcode_keys:
                    opcode_keys.append((o.op, o.version))
        buffers: list[np.ndarray | None] = [None]
        sg_offsets = [self._subgraph(fb, tfl, sg, opcode_keys, buffers) for sg in self.subgraphs]
        buf_offsets = [self._buffer(fb, tfl, data) for data in buffers]
        code_offsets = [self._opcode(fb, tfl, op, v) for op, v in opcode_keys]
        sig_offsets = [self._signature(fb, tfl, *s) for s in self.signatures]
        desc = fb.CreateString(self.description)
        vecs = {
            "OperatorCodes": code_offsets,
            "Subgraphs": sg_offsets,
            "Buffers": buf_offsets,
            "SignatureDefs": sig_offsets,
        }
        vec_offsets = {
            k: self._offset_vector(fb, _mod("Model"), "Model", k, v) for k, v in vecs.items()
        }
        _mod("Model").ModelStart(fb)
        _mod("Model").ModelAddVersion(fb, 3)
        _mod("Model").ModelAddDescription(fb, desc)
        for k, off in vec_offsets.items():
            getattr(_mod("Model"), f"ModelAdd{k}")(fb, off)
        fb.Finish(_mod("Model").ModelEnd(fb), file_identifier=b"TFL3")
        return bytes(fb.Output())

    @staticmethod
    def _offset_vector(fb: Any, module: Any, table: str, field: str, offsets: list[int]) -> int:
        getattr(module, f"{table}Start{field}Vector")(fb, len(offsets))
        for off in reversed(offsets):
            fb.PrependUOffsetTRelative(off)
        return fb.EndVector()

    @staticmethod
    def _int_vector(fb: Any, values: list[int], dtype: Any = np.int32) -> int:
        return fb.CreateNumpyVector(np.asarray(values, dtype=dtype))

    def _buffer(self, fb: Any, tfl: Any, data: np.ndarray | None) -> int:
        raw_off = None
        if data is not None:
            raw = encode_strings(data) if data.dtype == np.dtype(object) else data.tobytes()
            fb.StartVector(1, len(raw), 16)  # 16-byte aligned constants
            fb.head -= len(raw)
            fb.Bytes[fb.head : fb.head + len(raw)] = raw
            raw_off = fb.EndVector()
        _mod("Buffer").BufferStart(fb)
        if raw_off is not None:
            _mod("Buffer").BufferAddData(fb, raw_off)
        return _mod("Buffer").BufferEnd(fb)

    def _opcode(self, fb: Any, tfl: Any, op: str, version: int) -> int:
        custom = None
        if op.startswith(CUSTOM_PREFIX):
            code = tfl.BuiltinOperator.CUSTOM
            custom = fb.CreateString(op[len(CUSTOM_PREFIX) :])
        else:
            code = getattr(tfl.BuiltinOperator, op)
        _mod("OperatorCode").OperatorCodeStart(fb)
        if custom is not None:
            _mod("OperatorCode").OperatorCodeAddCustomCode(fb, custom)
        _mod("OperatorCode").OperatorCodeAddDeprecatedBuiltinCode(fb, min(code, 127))
        _mod("OperatorCode").OperatorCodeAddBuiltinCode(fb, code)
        _mod("OperatorCode").OperatorCodeAddVersion(fb, version)
        return _mod("OperatorCode").OperatorCodeEnd(fb)

    def _quant(self, fb: Any, tfl: Any, q: Quant) -> int:
        scale = np.atleast_1d(np.asarray(q.scale, np.float32))
        zp = np.atleast_1d(np.asarray(q.zero_point, np.int64))
        if zp.size == 1 and scale.size > 1:
            zp = np.repeat(zp, scale.size)
        s_off, z_off = fb.CreateNumpyVector(scale), fb.CreateNumpyVector(zp)
        Q = _mod("QuantizationParameters")
        Q.QuantizationParametersStart(fb)
        Q.QuantizationParametersAddScale(fb, s_off)
        Q.QuantizationParametersAddZeroPoint(fb, z_off)
        Q.QuantizationParametersAddQuantizedDimension(fb, q.axis)
        return Q.QuantizationParametersEnd(fb)

    def _index_vector(self, fb: Any, tfl: Any, values: np.ndarray) -> tuple[int, int]:
        """(SparseIndexVector union type, table offset) holding `values`."""
        table = INDEX_VECTOR_TYPES[np.dtype(values.dtype)]
        vec = fb.CreateNumpyVector(np.ascontiguousarray(values))
        mod = _mod(table)
        getattr(mod, f"{table}Start")(fb)
        getattr(mod, f"{table}AddValues")(fb, vec)
        return getattr(tfl.SparseIndexVector, table), getattr(mod, f"{table}End")(fb)

    def _dim_metadata(self, fb: Any, tfl: Any, dim: DimMetadata) -> int:
        seg = self._index_vector(fb, tfl, dim.segments) if dim.segments is not None else None
        idx = self._index_vector(fb, tfl, dim.indices) if dim.indices is not None else None
        D = _mod("DimensionMetadata")
        D.DimensionMetadataStart(fb)
        D.DimensionMetadataAddFormat(fb, 1 if dim.format == SPARSE_CSR else 0)
        D.DimensionMetadataAddDenseSize(fb, dim.dense_size)
        if seg is not None:
            D.DimensionMetadataAddArraySegmentsType(fb, seg[0])
            D.DimensionMetadataAddArraySegments(fb, seg[1])
        if idx is not None:
            D.DimensionMetadataAddArrayIndicesType(fb, idx[0])
            D.DimensionMetadataAddArrayIndices(fb, idx[1])
        return D.DimensionMetadataEnd(fb)

    def _sparsity(self, fb: Any, tfl: Any, sp: Sparsity) -> int:
        S = _mod("SparsityParameters")
        dims = [self._dim_metadata(fb, tfl, d) for d in sp.dims]
        dims_vec = self._offset_vector(fb, S, "SparsityParameters", "DimMetadata", dims)
        order = self._int_vector(fb, list(sp.traversal_order))
        block_map = self._int_vector(fb, list(sp.block_map)) if sp.block_map else None
        S.SparsityParametersStart(fb)
        S.SparsityParametersAddTraversalOrder(fb, order)
        if block_map is not None:
            S.SparsityParametersAddBlockMap(fb, block_map)
        S.SparsityParametersAddDimMetadata(fb, dims_vec)
        return S.SparsityParametersEnd(fb)

    def _tensor(self, fb: Any, tfl: Any, t: _TensorSpec, buffers: list) -> int:
        buffer_index = 0
        if t.data is not None:
            buffers.append(t.data)
            buffer_index = len(buffers) - 1
        name = fb.CreateString(t.name)
        shape = self._int_vector(fb, list(t.shape))
        sig = self._int_vector(fb, list(t.shape_signature)) if t.shape_signature else None
        quant = self._quant(fb, tfl, t.quant) if t.quant is not None else None
        sparsity = self._sparsity(fb, tfl, t.sparsity) if t.sparsity is not None else None
        T = _mod("Tensor")
        T.TensorStart(fb)
        T.TensorAddShape(fb, shape)
        if sig is not None:
            T.TensorAddShapeSignature(fb, sig)
        T.TensorAddType(fb, tflite_type(t.dtype))
        T.TensorAddBuffer(fb, buffer_index)
        T.TensorAddName(fb, name)
        if quant is not None:
            T.TensorAddQuantization(fb, quant)
        if t.is_variable:
            T.TensorAddIsVariable(fb, True)
        if sparsity is not None:
            T.TensorAddSparsity(fb, sparsity)
        return T.TensorEnd(fb)

    def _options(self, fb: Any, tfl: Any, o: _OpSpec) -> tuple[str, int, int]:
        """(the operator's options union field, options type, table offset)."""
        if o.op.startswith(CUSTOM_PREFIX):
            return "BuiltinOptions", 0, 0
        cls_name = _options_class(o.op)
        if cls_name is None:
            if o.options:
                raise ValueError(f"{o.op} takes no options, got {sorted(o.options)}")
            return "BuiltinOptions", 0, 0
        mod = importlib.import_module(f"tflite.{cls_name}")
        vectors = {  # lists holding a float (BUCKETIZE's boundaries) as float32, others int32
            k: self._int_vector(
                fb, v, np.float32 if any(isinstance(x, float) for x in v) else np.int32
            )
            for k, v in o.options.items()
            if isinstance(v, (list, tuple))
        }
        vectors.update(  # string fields (e.g. VAR_HANDLE's names): offsets made before the table
            (k, fb.CreateString(v))
            for k, v in o.options.items()
            if isinstance(v, str) and k not in ENUM_FIELDS and not k.endswith("type")
        )
        getattr(mod, f"{cls_name}Start")(fb)
        for key, value in o.options.items():
            add = getattr(mod, f"{cls_name}Add{_camel(key)}", None)
            if add is None:
                raise ValueError(f"{o.op}: {cls_name} has no field {key!r}")
            add(fb, vectors[key] if key in vectors else _enum_value(key, value))
        # Newer tables (REDUCE_WINDOW's, StableHLO's) live in the second options union.
        union = "BuiltinOptions" if hasattr(tfl.BuiltinOptions, cls_name) else "BuiltinOptions2"
        return union, getattr(getattr(tfl, union), cls_name), getattr(mod, f"{cls_name}End")(fb)

    def _operator(self, fb: Any, tfl: Any, o: _OpSpec, opcode_keys: list) -> int:
        union, kind, opts = self._options(fb, tfl, o)
        ins, outs = self._int_vector(fb, o.inputs), self._int_vector(fb, o.outputs)
        inter = self._int_vector(fb, o.intermediates) if o.intermediates else None
        custom = (
            fb.CreateNumpyVector(np.frombuffer(o.custom_options, np.uint8))
            if o.custom_options
            else None
        )
        Op = _mod("Operator")
        Op.OperatorStart(fb)
        Op.OperatorAddOpcodeIndex(fb, opcode_keys.index((o.op, o.version)))
        Op.OperatorAddInputs(fb, ins)
        Op.OperatorAddOutputs(fb, outs)
        if kind:
            getattr(Op, f"OperatorAdd{union}Type")(fb, kind)
            getattr(Op, f"OperatorAdd{union}")(fb, opts)
        if inter is not None:
            Op.OperatorAddIntermediates(fb, inter)
        if custom is not None:
            Op.OperatorAddCustomOptions(fb, custom)
            Op.OperatorAddCustomOptionsFormat(fb, tfl.CustomOptionsFormat.FLEXBUFFERS)
        return Op.OperatorEnd(fb)

    def _subgraph(
        self, fb: Any, tfl: Any, sg: SubgraphBuilder, opcode_keys: list, buffers: list
    ) -> int:
        tensors = [self._tensor(fb, tfl, t, buffers) for t in sg.tensors]
        ops = [self._operator(fb, tfl, o, opcode_keys) for o in sg.ops]
        t_vec = self._offset_vector(fb, _mod("SubGraph"), "SubGraph", "Tensors", tensors)
        o_vec = self._offset_vector(fb, _mod("SubGraph"), "SubGraph", "Operators", ops)
        i_vec, out_vec = self._int_vector(fb, sg.inputs), self._int_vector(fb, sg.outputs)
        name = fb.CreateString(sg.name)
        S = _mod("SubGraph")
        S.SubGraphStart(fb)
        S.SubGraphAddTensors(fb, t_vec)
        S.SubGraphAddOperators(fb, o_vec)
        S.SubGraphAddInputs(fb, i_vec)
        S.SubGraphAddOutputs(fb, out_vec)
        S.SubGraphAddName(fb, name)
        return S.SubGraphEnd(fb)

    def _signature(self, fb: Any, tfl: Any, key: str, si: int, inputs: dict, outputs: dict) -> int:
        def maps(entries: dict[str, int]) -> list[int]:
            offs = []
            for name, t in entries.items():
                n = fb.CreateString(name)
                _mod("TensorMap").TensorMapStart(fb)
                _mod("TensorMap").TensorMapAddName(fb, n)
                _mod("TensorMap").TensorMapAddTensorIndex(fb, t)
                offs.append(_mod("TensorMap").TensorMapEnd(fb))
            return offs

        in_vec = self._offset_vector(
            fb, _mod("SignatureDef"), "SignatureDef", "Inputs", maps(inputs)
        )
        out_vec = self._offset_vector(
            fb, _mod("SignatureDef"), "SignatureDef", "Outputs", maps(outputs)
        )
        k = fb.CreateString(key)
        S = _mod("SignatureDef")
        S.SignatureDefStart(fb)
        S.SignatureDefAddInputs(fb, in_vec)
        S.SignatureDefAddOutputs(fb, out_vec)
        S.SignatureDefAddSignatureKey(fb, k)
        S.SignatureDefAddSubgraphIndex(fb, si)
        return S.SignatureDefEnd(fb)
