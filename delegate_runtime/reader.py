"""Read untrusted `.tflite` bytes into the project's graph objects.

The flatbuffer is touched only here: every table is converted at once into `graph`
objects, with each index, length and offset checked against the file before use, so a
malformed file raises `ModelError` and never a crash, a hang or a huge allocation.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from typing import Any

import numpy as np

from .dtypes import TFLITE_TO_NUMPY, TYPE_NAMES
from .errors import ModelError
from .graph import Model, Operator, Quantization, Signature, Subgraph, Tensor
from .limits import DEFAULT_LIMITS, Limits
from .sparsity import FORMAT_CODES, INDEX_VECTOR_TYPES, SPARSE_CSR, DimMetadata, Sparsity, densify

#: Schema versions this reader understands (TFLite writes 3).
SUPPORTED_SCHEMA_VERSIONS = (3,)
TFLITE_FILE_IDENTIFIER = b"TFL3"
#: Handle types, held as TFLite holds them: RESOURCE (13) is an int32 resource id.
HANDLE_TYPES = {13: np.dtype(np.int32)}


def _builtin_names() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


def _options_names(enum_cls: Any) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_")}


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


#: Bytes each element of a vector of tables takes at least (its offset).
_TABLE = 4


class _LazyTables:
    """A vector of tables read on first use: a hostile length costs nothing by itself."""

    def __init__(self, get: Any, n: int):
        self.get, self.n = get, n
        self.cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        if i not in self.cache:
            self.cache[i] = self.get(i)
        return self.cache[i]


class _Reader:
    def __init__(self, buf: bytes, limits: Limits):
        import tflite

        self.tflite = tflite
        self.buf = buf
        self.limits = limits
        self.builtin_names = _builtin_names()
        self.total_elements = 0
        self.total_bytes = 0

    # -- bounds ---------------------------------------------------------------

    def length(self, n: int, what: str, element_bytes: int = 1) -> int:
        """A vector length, checked: each element takes `element_bytes` of the file."""
        if n < 0 or n * element_bytes > len(self.buf):
            raise ModelError(f"{what}: vector length {n} exceeds the file ({len(self.buf)} bytes)")
        return n

    def index(self, i: int, n: int, what: str, optional: bool = False) -> int:
        if optional and i == -1:
            return -1
        if not 0 <= i < n:
            raise ModelError(f"{what}: index {i} out of range [0, {n})")
        return i

    def vector(self, obj: Any, name: str, what: str) -> np.ndarray:
        """Numpy copy of a scalar vector field, length-checked."""
        n = self.length(getattr(obj, f"{name}Length")(), what)
        if n == 0:
            return np.zeros(0)
        arr = getattr(obj, f"{name}AsNumpy")()
        if not isinstance(arr, np.ndarray) or arr.size != n:
            raise ModelError(f"{what}: vector {name} is truncated")
        return np.array(arr)

    # -- model ----------------------------------------------------------------

    def model(self) -> Model:
        if len(self.buf) < 8:
            raise ModelError(f"file is {len(self.buf)} bytes: too small to be a .tflite model")
        if len(self.buf) > self.limits.max_file_bytes:
            raise ModelError(
                f"file is {len(self.buf)} bytes, over the {self.limits.max_file_bytes} cap"
            )
        if self.buf[4:8] != TFLITE_FILE_IDENTIFIER:
            raise ModelError(
                f"not a .tflite model: file identifier {self.buf[4:8]!r}, expected {TFLITE_FILE_IDENTIFIER!r}"
            )
        m = self.tflite.Model.GetRootAs(self.buf, 0)
        version = m.Version()
        if version not in SUPPORTED_SCHEMA_VERSIONS:
            raise ModelError(f"schema version {version} is not supported (expected 3)")
        opcodes = self.opcodes(m)
        buffers = _LazyTables(m.Buffers, self.length(m.BuffersLength(), "buffers", _TABLE))
        n_sub = self.length(m.SubgraphsLength(), "subgraphs", _TABLE)
        if n_sub == 0:
            raise ModelError("model has no subgraphs")
        if n_sub > self.limits.max_subgraphs:
            raise ModelError(
                f"model has {n_sub} subgraphs, over the {self.limits.max_subgraphs} cap"
            )
        subgraphs = [self.subgraph(m.Subgraphs(i), i, opcodes, buffers) for i in range(n_sub)]
        signatures = self.signatures(m, subgraphs)
        desc = m.Description()
        return Model(
            subgraphs=subgraphs,
            signatures=signatures,
            version=version,
            description=desc.decode("utf-8", "replace") if desc else "",
        )

    def opcodes(self, m: Any) -> list[tuple[str, int, int]]:
        out = []
        for i in range(self.length(m.OperatorCodesLength(), "operator codes", _TABLE)):
            oc = m.OperatorCodes(i)
            # The builtin code moved from an int8 field to an int32 one; take the larger.
            code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
            version = int(oc.Version())
            if code == self.tflite.BuiltinOperator.CUSTOM:
                custom = oc.CustomCode()
                name = "CUSTOM:" + (custom.decode("utf-8", "replace") if custom else "?")
            else:
                name = self.builtin_names.get(code, f"UNKNOWN_BUILTIN_{code}")
            out.append((name, code, version))
        return out

    def subgraph(self, sg: Any, si: int, opcodes: list, buffers: _LazyTables) -> Subgraph:
        where = f"subgraph {si}"
        n_t = self.length(sg.TensorsLength(), f"{where} tensors", _TABLE)
        tensors = [self.tensor(sg.Tensors(i), i, si, buffers) for i in range(n_t)]
        n_op = self.length(sg.OperatorsLength(), f"{where} operators", _TABLE)
        operators = [self.operator(sg.Operators(i), i, si, opcodes, n_t) for i in range(n_op)]
        inputs = tuple(
            self.index(int(i), n_t, f"{where} input")
            for i in self.vector(sg, "Inputs", f"{where} inputs")
        )
        outputs = tuple(
            self.index(int(i), n_t, f"{where} output")
            for i in self.vector(sg, "Outputs", f"{where} outputs")
        )
        _empty_tensors_as_constants(tensors, operators, inputs)
        name = sg.Name()
        return Subgraph(
            name=name.decode("utf-8", "replace") if name else f"subgraph_{si}",
            tensors=tensors,
            operators=operators,
            inputs=inputs,
            outputs=outputs,
        )

    def tensor(self, t: Any, ti: int, si: int, buffers: _LazyTables) -> Tensor:
        raw_name = t.Name()
        name = raw_name.decode("utf-8", "replace") if raw_name else f"tensor_{ti}"
        where = f"subgraph {si} tensor {ti} '{name}'"
        shape = tuple(int(d) for d in self.vector(t, "Shape", where))
        if len(shape) > self.limits.max_rank:
            raise ModelError(
                f"{where}: rank {len(shape)} exceeds the cap of {self.limits.max_rank}"
            )
        if any(d < 0 for d in shape):
            raise ModelError(f"{where}: negative dimension in shape {list(shape)}")
        sig = None
        if not t.ShapeSignatureIsNone():
            sig = tuple(int(d) for d in self.vector(t, "ShapeSignature", where))
        ttype = int(t.Type())
        dtype = TFLITE_TO_NUMPY.get(ttype, HANDLE_TYPES.get(ttype))
        if dtype is None:
            raise ModelError(
                f"{where}: tensor type {TYPE_NAMES.get(ttype, ttype)} is not supported"
            )
        elements = int(np.prod(shape, dtype=np.float64)) if shape else 1
        if elements > self.limits.max_tensor_elements:
            raise ModelError(
                f"{where}: {elements} elements exceed the cap of {self.limits.max_tensor_elements}"
            )
        self.total_elements += elements
        if self.total_elements > self.limits.max_total_elements:
            raise ModelError(
                f"{where}: tensors total over {self.limits.max_total_elements} elements (the cap)"
            )
        nbytes = elements * np.dtype(dtype).itemsize
        if nbytes > self.limits.max_tensor_bytes:
            raise ModelError(
                f"{where}: {nbytes} bytes ({list(shape)} {dtype}) exceed the cap of "
                f"{self.limits.max_tensor_bytes} bytes per tensor"
            )
        self.total_bytes += nbytes
        if self.total_bytes > self.limits.max_total_bytes:
            raise ModelError(
                f"{where}: tensors total over {self.limits.max_total_bytes} bytes (the cap)"
            )
        quant = self.quantization(t.Quantization(), where, shape)
        bi = self.index(int(t.Buffer()), max(len(buffers), 1), f"{where} buffer")
        raw = self.buffer_bytes(buffers[bi] if buffers else None, bi, where)
        # TFLite reads the sparsity of constants only (a runtime tensor's is ignored).
        sparsity = self.sparsity(t.Sparsity(), where) if raw is not None else None
        if sparsity is None:
            data = self.buffer_data(raw, bi, where, shape, dtype)
        else:
            data, sparsity = self.sparse_data(raw, bi, where, shape, dtype, sparsity)
        return Tensor(
            index=ti,
            name=name,
            shape=shape,
            dtype=dtype,
            shape_signature=sig,
            quantization=quant,
            data=data,
            is_variable=bool(t.IsVariable()),
            sparsity=sparsity,
        )

    def quantization(self, q: Any, where: str, shape: tuple[int, ...]) -> Quantization | None:
        if q is None:
            return None
        scale = self.vector(q, "Scale", f"{where} quantization").astype(np.float32)
        if scale.size == 0:
            return None
        zp = self.vector(q, "ZeroPoint", f"{where} quantization").astype(np.int64)
        if zp.size == 0:
            zp = np.zeros(scale.size, np.int64)
        if zp.size != scale.size:
            raise ModelError(f"{where}: {scale.size} scales but {zp.size} zero points")
        if not np.all(np.isfinite(scale)) or np.any(scale < 0):
            raise ModelError(f"{where}: quantization scale must be finite and non-negative")
        axis = int(q.QuantizedDimension())
        if scale.size > 1 and (not 0 <= axis < len(shape) or shape[axis] != scale.size):
            raise ModelError(
                f"{where}: {scale.size} per-channel scales do not match dimension {axis} "
                f"of shape {list(shape)}"
            )
        return Quantization(scale=scale, zero_point=zp, axis=axis)

    def sparsity(self, sp: Any, where: str) -> Sparsity | None:
        """The SparsityParameters as stored; checked against the tensor by `sparse_data`."""
        if sp is None:
            return None
        what = f"{where} sparsity"
        if sp.TraversalOrderIsNone() or sp.DimMetadataIsNone():
            raise ModelError(f"{what}: traversal order or dimension metadata is missing")
        order = tuple(int(v) for v in self.vector(sp, "TraversalOrder", what))
        block_map = tuple(int(v) for v in self.vector(sp, "BlockMap", what))
        n = self.length(sp.DimMetadataLength(), f"{what} dimension metadata", _TABLE)
        dims = tuple(self.dim_metadata(sp.DimMetadata(i), f"{what} level {i}") for i in range(n))
        return Sparsity(order, block_map, dims)

    def dim_metadata(self, dm: Any, what: str) -> DimMetadata:
        code = int(dm.Format())
        if code not in FORMAT_CODES:
            raise ModelError(f"{what}: unknown dimension format {code}")
        fmt = FORMAT_CODES[code]
        if fmt != SPARSE_CSR:
            return DimMetadata(fmt, dense_size=int(dm.DenseSize()))
        segments = self.index_vector(dm.ArraySegmentsType(), dm.ArraySegments(), f"{what} segments")
        indices = self.index_vector(dm.ArrayIndicesType(), dm.ArrayIndices(), f"{what} indices")
        return DimMetadata(fmt, int(dm.DenseSize()), segments, indices)

    def index_vector(self, kind: int, table: Any, what: str) -> np.ndarray | None:
        """A SparseIndexVector union member's values (None when absent)."""
        names = {
            getattr(self.tflite.SparseIndexVector, n): (n, t) for t, n in INDEX_VECTOR_TYPES.items()
        }
        if table is None or int(kind) not in names:
            return None
        name, dtype = names[int(kind)]
        obj = getattr(self.tflite, name)()
        obj.Init(table.Bytes, table.Pos)
        return self.vector(obj, "Values", what).astype(dtype)

    def sparse_data(
        self,
        raw: memoryview,
        bi: int,
        where: str,
        shape: tuple[int, ...],
        dtype: np.dtype,
        sp: Sparsity,
    ) -> tuple[np.ndarray, Sparsity]:
        """The dense constant that a sparse buffer describes, and its checked sparsity."""
        if dtype == np.dtype(object) or len(raw) % dtype.itemsize:
            raise ModelError(
                f"{where}: sparse buffer {bi} of {len(raw)} bytes is no whole number of "
                f"{dtype.name} values"
            )
        values = np.frombuffer(raw, dtype)
        sp = Sparsity(sp.traversal_order, sp.block_map, sp.dims, num_values=values.size)
        dense = densify(values, shape, sp, where)
        dense.flags.writeable = False
        return dense, sp

    def buffer_bytes(self, b: Any, bi: int, where: str) -> memoryview | None:
        """A buffer's bytes, bounds-checked; None when it holds none."""
        if b is None or bi == 0:
            return None
        offset, size = int(b.Offset()), int(b.Size())
        if offset > 1:  # large models keep data outside the flatbuffer, at a file offset
            if offset + size > len(self.buf):
                raise ModelError(
                    f"{where}: buffer {bi} at offset {offset} + {size} bytes runs past the end "
                    f"of the file ({len(self.buf)} bytes)"
                )
            raw = memoryview(self.buf)[offset : offset + size]
        else:
            n = self.length(b.DataLength(), f"{where} buffer {bi}")
            if n == 0:
                return None
            start = b._tab.Vector(b._tab.Offset(4))
            if start + n > len(self.buf):
                raise ModelError(f"{where}: buffer {bi} data runs past the end of the file")
            raw = memoryview(self.buf)[start : start + n]
        return raw if len(raw) else None

    def buffer_data(
        self, raw: memoryview | None, bi: int, where: str, shape: tuple[int, ...], dtype: np.dtype
    ) -> np.ndarray | None:
        """A dense constant's array, its size checked against the shape."""
        if raw is None:
            return None
        if dtype == np.dtype(object):
            return np.frombuffer(raw, np.uint8)  # STRING tensors keep their raw encoding
        expected = (int(np.prod(shape, dtype=np.int64)) if shape else 1) * dtype.itemsize
        if len(raw) != expected:
            raise ModelError(
                f"{where}: buffer {bi} holds {len(raw)} bytes but shape {list(shape)} of "
                f"{dtype.name} needs {expected}"
            )
        arr = np.frombuffer(raw, dtype).reshape(shape)
        if not arr.flags.aligned:
            arr = arr.copy()  # unaligned constants: copy once so kernels get fast access
            arr.flags.writeable = False
        return arr

    def operator(self, op: Any, oi: int, si: int, opcodes: list, n_t: int) -> Operator:
        where = f"subgraph {si} operator #{oi}"
        ci = self.index(int(op.OpcodeIndex()), len(opcodes), f"{where} opcode")
        name, code, version = opcodes[ci]
        where = f"{where} ({name})"
        inputs = tuple(
            self.index(int(i), n_t, f"{where} input", optional=True)
            for i in self.vector(op, "Inputs", where)
        )
        outputs = tuple(
            self.index(int(i), n_t, f"{where} output") for i in self.vector(op, "Outputs", where)
        )
        inter = tuple(
            self.index(int(i), n_t, f"{where} intermediate")
            for i in self.vector(op, "Intermediates", where)
        )
        return Operator(
            index=oi,
            op=name,
            code=code,
            version=version,
            inputs=inputs,
            outputs=outputs,
            options=self.options(op, where) | self.custom_options(op, where),
            intermediates=inter,
        )

    def custom_options(self, op: Any, where: str) -> dict[str, Any]:
        """{"custom_options": raw bytes} when the operator carries custom options."""
        if op.CustomOptionsIsNone():
            return {}
        n = self.length(op.CustomOptionsLength(), f"{where} custom options")
        if n == 0:
            return {}
        start = op._tab.Vector(op._tab.Offset(14))
        if start + n > len(self.buf):
            raise ModelError(f"{where}: custom options run past the end of the file")
        return {"custom_options": bytes(self.buf[start : start + n])}

    def options(self, op: Any, where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for union_enum, type_fn, table_fn in (
            (self.tflite.BuiltinOptions, op.BuiltinOptionsType, op.BuiltinOptions),
            (
                getattr(self.tflite, "BuiltinOptions2", None),
                _maybe(op, "BuiltinOptions2Type"),
                _maybe(op, "BuiltinOptions2"),
            ),
        ):
            if union_enum is None or type_fn is None:
                continue
            kind = int(type_fn())
            if kind == 0:
                continue
            cls_name = _options_names(union_enum).get(kind)
            cls = getattr(self.tflite, cls_name, None) if cls_name else None
            table = table_fn()
            if cls is None or table is None:
                raise ModelError(f"{where}: options of unknown type {kind}")
            obj = cls()
            obj.Init(table.Bytes, table.Pos)
            out.update(self.table_fields(obj, where))
        return out

    def table_fields(self, obj: Any, where: str) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for attr in dir(type(obj)):
            if (
                attr.startswith("_")
                or attr in ("Init", "GetRootAs")
                or attr.startswith("GetRootAs")
            ):
                continue
            if attr.endswith(("AsNumpy", "Length", "IsNone")) or "BufferHasIdentifier" in attr:
                continue
            fn = getattr(obj, attr)
            if not callable(fn):
                continue
            if hasattr(obj, f"{attr}Length"):
                # ints stay ints, floats (BUCKETIZE's boundaries) floats
                fields[_snake(attr)] = self.vector(obj, attr, where).tolist()
                continue
            try:
                value = fn()
            except TypeError:
                continue  # a sub-table accessor that needs arguments
            if isinstance(value, (int, float, bool)):
                fields[_snake(attr)] = value
            elif isinstance(value, bytes):
                fields[_snake(attr)] = value.decode("utf-8", "replace")
        return fields

    def signatures(self, m: Any, subgraphs: list[Subgraph]) -> list[Signature]:
        out = []
        for i in range(self.length(m.SignatureDefsLength(), "signatures", _TABLE)):
            s = m.SignatureDefs(i)
            key = s.SignatureKey()
            key = key.decode("utf-8", "replace") if key else f"signature_{i}"
            si = self.index(int(s.SubgraphIndex()), len(subgraphs), f"signature '{key}' subgraph")
            n_t = len(subgraphs[si].tensors)
            maps = []
            for kind in ("Inputs", "Outputs"):
                entries = {}
                n = self.length(
                    getattr(s, f"{kind}Length")(), f"signature '{key}' {kind.lower()}", _TABLE
                )
                for j in range(n):
                    tm = getattr(s, kind)(j)
                    nm = tm.Name()
                    entries[nm.decode("utf-8", "replace") if nm else f"{kind.lower()}_{j}"] = (
                        self.index(int(tm.TensorIndex()), n_t, f"signature '{key}' {kind.lower()}")
                    )
                maps.append(entries)
            out.append(Signature(key=key, subgraph_index=si, inputs=maps[0], outputs=maps[1]))
        return out


def _maybe(obj: Any, attr: str) -> Any:
    return getattr(obj, attr, None)


def _empty_tensors_as_constants(
    tensors: list[Tensor], operators: list[Operator], inputs: tuple[int, ...]
) -> None:
    """A tensor of zero elements that nothing produces (a converter's empty RESHAPE shape:
    an empty buffer, like every runtime tensor's) is an empty constant, as TFLite reads it."""
    produced = {t for op in operators for t in op.outputs} | set(inputs)
    for t in tensors:
        if (
            t.data is None
            and not t.is_variable
            and t.index not in produced
            and len(t.shape) > 0
            and 0 in t.shape
            and t.dtype != np.dtype(object)
        ):
            empty = np.zeros(t.shape, t.dtype)
            empty.flags.writeable = False
            t.data = empty


def read_model(data: bytes, limits: Limits = DEFAULT_LIMITS, validate: bool = True) -> Model:
    """Parse and validate `.tflite` bytes. Raises ModelError on anything malformed."""
    from .validate import validate_model

    data = bytes(data)
    try:
        model = _Reader(data, limits).model()
    except ModelError:
        raise
    except RecursionError as exc:
        raise ModelError("malformed flatbuffer: nesting too deep") from exc
    except struct.error as exc:  # the flatbuffers runtime read outside the bytes
        raise ModelError(
            f"truncated or malformed flatbuffer: an offset points outside its {len(data)} bytes"
        ) from exc
    except Exception as exc:  # the flatbuffers runtime raises struct/index/unicode errors
        raise ModelError(f"malformed flatbuffer: {type(exc).__name__}: {exc}") from exc
    model.sha256 = hashlib.sha256(data).hexdigest()
    model.size_bytes = len(data)
    if validate:
        validate_model(model, limits)
    return model


def load_model(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> Model:
    """Read, convert and validate a `.tflite` file."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise ModelError(f"cannot read model {path}: {exc.strerror or exc}") from exc
    if size > limits.max_file_bytes:
        raise ModelError(f"{path}: {size} bytes, over the {limits.max_file_bytes} cap")
    with open(path, "rb") as fh:
        return read_model(fh.read(), limits)
