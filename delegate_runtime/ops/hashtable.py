"""Hash-table resources: HASHTABLE, HASHTABLE_FIND, HASHTABLE_IMPORT, HASHTABLE_SIZE.

A table is a resource of the interpreter, named by its op's `table_id` and shared by all
subgraphs (what `tf.lookup.StaticHashTable` becomes, filled by a CALL_ONCE init
subgraph). TFLite's tables map int64 to string or string to int64, are filled once (later
imports do nothing; a repeated key keeps its first value) and answer a default otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError
from ..strings import STRING_DTYPE, as_strings, strings_array
from .registry import OpContext, register

#: Key in the interpreter's kernel state: table id -> _Table.
HASHTABLES = "hashtables"
#: TensorType codes of the two (key, value) pairs TFLite's tables hold.
INT64, STRING = 4, 5
_PAIRS = ((INT64, STRING), (STRING, INT64))
_TYPE_NAMES = {INT64: "int64", STRING: "string"}
_DTYPES = {INT64: np.dtype(np.int64), STRING: STRING_DTYPE}


@dataclass
class _Table:
    key_type: int
    value_type: int
    #: None until the first import
    items: dict[Any, Any] | None = None

    def describe(self) -> str:
        return f"{_TYPE_NAMES[self.key_type]} -> {_TYPE_NAMES[self.value_type]}"


def _fail(ctx: OpContext, message: str) -> ModelError:
    return ModelError(f"{ctx.op.describe()}: {message}")


def _type_code(dtype: np.dtype) -> int | None:
    return next((code for code, dt in _DTYPES.items() if dt == dtype), None)


def _values(ctx: OpContext, i: int) -> np.ndarray:
    """Input `i` as an array of Python keys/values (bytes for strings, int for int64)."""
    tensor = ctx.in_tensors[i]
    if tensor is not None and tensor.dtype == STRING_DTYPE:
        return as_strings(ctx.inputs[i], tensor.shape, ctx.op.describe())
    return np.asarray(ctx.inputs[i])


def _table(ctx: OpContext, key_i: int, value_i: int | None, output: bool) -> _Table:
    """The table input 0 names, after TFLite's checks of the handle and of the key and
    value tensors' types (value: input `value_i`, or output 0 when `output`)."""
    handle = ctx.inputs[0]
    if handle is None or handle.shape != (1,):
        shape = None if handle is None else list(handle.shape)
        raise _fail(ctx, f"the table handle (input 0) must have shape [1], not {shape}")
    tid = int(handle[0])
    table = ctx.state.get(HASHTABLES, {}).get(tid)
    if table is None:
        raise _fail(ctx, f"hash table {tid} was never created (no HASHTABLE op ran for it)")
    key_type = _type_code(ctx.in_tensors[key_i].dtype)
    value_dtype = ctx.out_tensors[0].dtype if output else ctx.in_tensors[value_i].dtype
    value_type = _type_code(value_dtype)
    if (key_type, value_type) not in _PAIRS:
        raise _fail(ctx, "keys and values must be int64 -> string or string -> int64")
    if (key_type, value_type) != (table.key_type, table.value_type):
        raise _fail(
            ctx,
            f"hash table {tid} maps {table.describe()}, not "
            f"{_TYPE_NAMES[key_type]} -> {_TYPE_NAMES[value_type]}",
        )
    return table


@register("HASHTABLE", versions=(1,))
def hashtable(ctx: OpContext) -> np.ndarray:
    """The handle [1] (int32 `table_id`) of the table `table_id`, created empty on first
    use with its key_dtype -> value_dtype."""
    key_type, value_type = int(ctx.opt("key_dtype", 0)), int(ctx.opt("value_dtype", 0))
    if (key_type, value_type) not in _PAIRS:
        raise _fail(ctx, "key_dtype -> value_dtype must be int64 -> string or string -> int64")
    if ctx.inputs:
        raise _fail(ctx, "takes no inputs")
    tid = int(ctx.opt("table_id", 0))
    tables: dict[int, _Table] = ctx.state.setdefault(HASHTABLES, {})
    tables.setdefault(tid, _Table(key_type, value_type))
    return np.array([tid], np.int32)


@register("HASHTABLE_IMPORT", versions=(1,))
def hashtable_import(ctx: OpContext) -> list[np.ndarray]:
    """Fill the table (input 0) with keys (input 1) -> values (input 2), same shape; only
    the first import fills it, and a repeated key keeps its first value."""
    if len(ctx.inputs) != 3 or ctx.out_tensors:
        raise _fail(ctx, "takes a table handle, keys and values, and gives nothing")
    table = _table(ctx, 1, 2, output=False)
    keys, values = _values(ctx, 1), _values(ctx, 2)
    if keys.shape != values.shape:
        raise _fail(ctx, f"keys {list(keys.shape)} and values {list(values.shape)} differ")
    if table.items is None:
        items: dict[Any, Any] = {}
        for k, v in zip(keys.reshape(-1).tolist(), values.reshape(-1).tolist(), strict=True):
            items.setdefault(k, v)
        table.items = items
    return []


@register("HASHTABLE_FIND", versions=(1,))
def hashtable_find(ctx: OpContext) -> np.ndarray:
    """The table's value of each key (input 1), or the first element of the default
    (input 2) where the table lacks the key; the keys' shape."""
    if len(ctx.inputs) != 3 or len(ctx.out_tensors) != 1:
        raise _fail(ctx, "takes a table handle, keys and a default, and gives one output")
    if ctx.in_tensors[2].dtype != ctx.out_tensors[0].dtype:
        raise _fail(ctx, "the default value (input 2) must have the output's type")
    table = _table(ctx, 1, None, output=True)
    if table.items is None:
        raise _fail(ctx, "the hash table must be imported (initialized) before a find")
    keys, default = _values(ctx, 1), _values(ctx, 2).reshape(-1)
    if default.size == 0:
        raise _fail(ctx, "the default value (input 2) is empty")
    fallback = default.tolist()[0]
    found = [table.items.get(k, fallback) for k in keys.reshape(-1).tolist()]
    if table.value_type == STRING:
        return strings_array(found, keys.shape)
    return np.array(found, np.int64).reshape(keys.shape)


@register("HASHTABLE_SIZE", versions=(1,))
def hashtable_size(ctx: OpContext) -> np.ndarray:
    """The number of keys in the table (input 0), int64 [1] (0 before the import)."""
    if len(ctx.inputs) != 1 or ctx.out_tensors[0].dtype != np.int64:
        raise _fail(ctx, "takes a table handle and gives an int64 size")
    handle = ctx.inputs[0]
    if handle is None or handle.shape != (1,):
        raise _fail(ctx, "the table handle (input 0) must have shape [1]")
    table = ctx.state.get(HASHTABLES, {}).get(int(handle[0]))
    if table is None:
        raise _fail(ctx, f"hash table {int(handle[0])} was never created")
    return np.array([len(table.items or {})], np.int64)
