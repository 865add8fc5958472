"""Hashing ops of text models: LSH_PROJECTION, SKIP_GRAM, HASHTABLE_LOOKUP."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..strings import STRING_DTYPE, as_strings, encode, strings_array
from .alloc import check_alloc
from .registry import OpContext, register

# -- FarmHash Fingerprint64 -------------------------------------------------------------
# TFLite's LSH_PROJECTION hashes with farmhash's Fingerprint64 (its "na" 64-bit hash),
# written here on Python ints, each step reduced to 64 bits.

_M64 = (1 << 64) - 1
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F


def _u64(b: bytes, i: int) -> int:
    return int.from_bytes(b[i : i + 8], "little")


def _u32(b: bytes, i: int) -> int:
    return int.from_bytes(b[i : i + 4], "little")


def _rot(v: int, s: int) -> int:
    return v if s == 0 else ((v >> s) | (v << (64 - s))) & _M64


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _len16(u: int, v: int, mul: int) -> int:
    a = _shift_mix(((u ^ v) * mul) & _M64)
    b = _shift_mix(((v ^ a) * mul) & _M64)
    return (b * mul) & _M64


def _len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = _K2 + n * 2
        a = (_u64(s, 0) + _K2) & _M64
        b = _u64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M64
        d = ((_rot(a, 25) + b) * mul) & _M64
        return _len16(c, d, mul)
    if n >= 4:
        mul = _K2 + n * 2
        return _len16((n + (_u32(s, 0) << 3)) & _M64, _u32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
    return _K2


def _len17to32(s: bytes) -> int:
    n = len(s)
    mul = _K2 + n * 2
    a = (_u64(s, 0) * _K1) & _M64
    b = _u64(s, 8)
    c = (_u64(s, n - 8) * mul) & _M64
    d = (_u64(s, n - 16) * _K2) & _M64
    return _len16(
        (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
        (a + _rot((b + _K2) & _M64, 18) + c) & _M64,
        mul,
    )


def _len33to64(s: bytes) -> int:
    n = len(s)
    mul = _K2 + n * 2
    a = (_u64(s, 0) * _K2) & _M64
    b = _u64(s, 8)
    c = (_u64(s, n - 8) * mul) & _M64
    d = (_u64(s, n - 16) * _K2) & _M64
    y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
    z = _len16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    e = (_u64(s, 16) * mul) & _M64
    f = _u64(s, 24)
    g = ((y + _u64(s, n - 32)) * mul) & _M64
    h = ((z + _u64(s, n - 24)) * mul) & _M64
    return _len16(
        (_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
        (e + _rot((f + a) & _M64, 18) + g) & _M64,
        mul,
    )


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    """Two 64-bit mixes of s[i:i+32] with seeds a, b."""
    w, x, y, z = _u64(s, i), _u64(s, i + 8), _u64(s, i + 16), _u64(s, i + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def fingerprint64(s: bytes) -> int:
    """FarmHash Fingerprint64 of `s`, an unsigned 64-bit int."""
    n = len(s)
    if n <= 16:
        return _len0to16(s)
    if n <= 32:
        return _len17to32(s)
    if n <= 64:
        return _len33to64(s)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_shift_mix((y * _K2 + 113) & _M64) * _K2) & _M64
    v0 = v1 = w0 = w1 = 0
    x = (x * _K2 + _u64(s, 0)) & _M64
    last64 = n - 64
    for i in range(0, ((n - 1) // 64) * 64, 64):
        x = (_rot((x + y + v0 + _u64(s, i + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v1 + _u64(s, i + 48)) & _M64, 42) * _K1) & _M64
        x ^= w1
        y = (y + v0 + _u64(s, i + 40)) & _M64
        z = (_rot((z + w0) & _M64, 33) * _K1) & _M64
        v0, v1 = _weak32(s, i, (v1 * _K1) & _M64, (x + w0) & _M64)
        w0, w1 = _weak32(s, i + 32, (z + w1) & _M64, (y + _u64(s, i + 16)) & _M64)
        z, x = x, z
    mul = _K1 + ((z & 0xFF) << 1)
    i = last64
    w0 = (w0 + ((n - 1) & 63)) & _M64
    v0 = (v0 + w0) & _M64
    w0 = (w0 + v0) & _M64
    x = (_rot((x + y + v0 + _u64(s, i + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v1 + _u64(s, i + 48)) & _M64, 42) * mul) & _M64
    x ^= (w1 * 9) & _M64
    y = (y + v0 * 9 + _u64(s, i + 40)) & _M64
    z = (_rot((z + w0) & _M64, 33) * mul) & _M64
    v0, v1 = _weak32(s, i, (v1 * mul) & _M64, (x + w0) & _M64)
    w0, w1 = _weak32(s, i + 32, (z + w1) & _M64, (y + _u64(s, i + 16)) & _M64)
    z, x = x, z
    return _len16(
        (_len16(v0, w0, mul) + _shift_mix(y) * _K0 + z) & _M64,
        (_len16(v1, w1, mul) + x) & _M64,
        mul,
    )


# -- kernels ----------------------------------------------------------------------------

#: LSHProjectionType codes.
LSH_SPARSE, LSH_DENSE = 1, 2
#: What Python's str.isspace() and C's isspace() (C locale) agree on, as bytes.
_C_SPACE = frozenset(b" \t\n\v\f\r")


def _fail(ctx: OpContext, message: str) -> ModelError:
    return ModelError(f"{ctx.op.describe()}: {message}")


def _strings(ctx: OpContext, i: int) -> np.ndarray:
    """Input `i` of a STRING tensor as an object array of bytes."""
    tensor = ctx.in_tensors[i]
    if tensor is None or tensor.dtype != STRING_DTYPE:
        raise _fail(ctx, f"input {i} must be a STRING tensor")
    return as_strings(ctx.inputs[i], tensor.shape, ctx.op.describe())


def _is_string(ctx: OpContext, i: int) -> bool:
    tensor = ctx.in_tensors[i] if i < len(ctx.in_tensors) else None
    return tensor is not None and tensor.dtype == STRING_DTYPE


@register("LSH_PROJECTION", versions=(1,))
def lsh_projection(ctx: OpContext) -> np.ndarray:
    """Locality-sensitive hash of input 1's rows (weighted by input 2): for each seed of
    input 0 [num_hash, num_bits], the sign of the weighted sum of Fingerprint64(seed
    bytes + row bytes). SPARSE: one int32 per hash function, its bits packed, plus
    i << num_bits; DENSE: the bits themselves."""
    hashes = ctx.inputs[0]
    x = _strings(ctx, 1) if _is_string(ctx, 1) else ctx.inputs[1]
    weight = ctx.input(2)
    kind = int(ctx.opt("type", 0))
    if hashes is None or hashes.ndim != 2 or hashes.dtype != np.float32:
        raise _fail(ctx, "the hash seeds (input 0) must be a 2-D float32 tensor")
    num_hash, num_bits = hashes.shape
    if num_bits > 32:
        raise _fail(ctx, f"{num_bits} bits per hash function, at most 32 are supported")
    if x is None or x.ndim < 1:
        raise _fail(ctx, "the input (input 1) must have rank 1 or more")
    rows = x.shape[0]
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != rows):
        raise _fail(ctx, f"weight shape {list(weight.shape)} must be [{rows}]")
    if kind not in (LSH_SPARSE, LSH_DENSE):
        raise _fail(ctx, f"projection type {kind} is neither SPARSE (1) nor DENSE (2)")
    if rows == 0:
        raise _fail(ctx, "the input has no rows to hash")
    # TFLite hashes input->bytes / rows bytes per row: a STRING tensor's encoding, cut evenly
    raw = encode(x) if _is_string(ctx, 1) else np.ascontiguousarray(x).tobytes()
    step = len(raw) // rows
    items = [raw[r * step : (r + 1) * step] for r in range(rows)]
    weights = None if weight is None else [float(w) for w in weight.astype(np.float32)]
    seeds = hashes.astype("<f4")
    bits = np.empty((num_hash, num_bits), np.int64)
    for idx, seed in np.ndenumerate(seeds):
        bits[idx] = _sign_bit(seed.tobytes(), items, weights)
    if kind == LSH_DENSE:
        return bits.reshape(-1).astype(np.int32)
    out = np.empty(num_hash, np.int64)
    for i in range(num_hash):
        signature = 0
        for b in bits[i]:
            signature = ((signature << 1) | int(b)) & 0xFFFFFFFF
        # NOTE: at 32 bits TFLite's `1 << num_bits` overflows; x86 masks the count to 0.
        out[i] = signature + i * (1 << (num_bits & 31))
    # int32 arithmetic wraps, as TFLite's does
    return (out & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _sign_bit(seed: bytes, items: list[bytes], weights: list[float] | None) -> int:
    score = 0.0
    for r, item in enumerate(items):
        h = fingerprint64(seed + item)
        value = float(h - (1 << 64) if h >= 1 << 63 else h)  # as int64, then double
        score += value if weights is None else weights[r] * value
    return 1 if score > 0 else 0


def _words(text: bytes) -> list[bytes]:
    """Whitespace-separated words as TFLite's SKIP_GRAM splits them (its quirks kept: a
    leading space stays part of the first word when no later space follows it, and such
    a first word is dropped when one does)."""
    words, start = [], 0
    for i in range(1, len(text)):
        if text[i] in _C_SPACE:
            if i > start and text[start] not in _C_SPACE:
                words.append(text[start:i])
            start = i + 1
    if len(text) > start:
        words.append(text[start:])
    return words


@register("SKIP_GRAM", versions=(1,))
def skip_gram(ctx: OpContext) -> np.ndarray:
    """The skip-grams of the first string's words: ngram_size words (every size up to it
    with include_all_ngrams) in order, at most max_skip_size words skipped between
    neighbours, joined by spaces; in TFLite's order."""
    if len(ctx.inputs) != 1 or ctx.out_tensors[0].dtype != STRING_DTYPE:
        raise _fail(ctx, "takes one STRING input and gives one STRING output")
    strings = _strings(ctx, 0)
    if strings.size == 0:
        raise _fail(ctx, "the input holds no string")
    words = _words(strings.reshape(-1)[0])
    n = int(ctx.opt("ngram_size", 0))
    max_skip = int(ctx.opt("max_skip_size", 0))
    include_all = bool(ctx.opt("include_all_ngrams", False))
    grams: list[bytes] = []
    if n <= 0 or len(words) < n:
        return strings_array(grams)
    stack = [0] * n
    depth = 1
    while depth >= 0:
        if (
            depth < n
            and stack[depth] + 1 < len(words)
            and (depth == 0 or stack[depth] - stack[depth - 1] <= max_skip)
        ):
            stack[depth] += 1
            depth += 1
            if depth < n:
                stack[depth] = stack[depth - 1]
            continue
        if depth > 0 and (depth <= n if include_all else depth == n):
            if len(grams) % 4096 == 0:
                check_alloc((len(grams) + 4096,), np.int32, f"{ctx.op.describe()}: n-grams")
            grams.append(b" ".join(words[k] for k in stack[:depth]))
        depth -= 1
    return strings_array(grams)


@register("HASHTABLE_LOOKUP", versions=(1,))
def hashtable_lookup(ctx: OpContext) -> list[np.ndarray]:
    """Rows of input 2 whose key (input 1, sorted int32) equals each lookup (input 0),
    zeros (empty strings) where none does; and uint8 hits (1 found, 0 missing)."""
    lookups, keys, values = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    if lookups.ndim != 1 or lookups.dtype != np.int32:
        raise _fail(ctx, "the lookups (input 0) must be a 1-D int32 tensor")
    if keys.ndim != 1 or keys.dtype != np.int32:
        raise _fail(ctx, "the keys (input 1) must be a 1-D int32 tensor")
    is_string = _is_string(ctx, 2)
    if is_string:
        values = _strings(ctx, 2)
    if values.ndim < 1 or values.shape[0] != keys.shape[0]:
        raise _fail(ctx, f"values shape {list(values.shape)} must have {keys.shape[0]} rows")
    if is_string and values.ndim != 1:
        raise _fail(ctx, "string values must be a 1-D tensor")
    if len(ctx.out_tensors) != 2 or ctx.out_tensors[1].dtype != np.uint8:
        raise _fail(ctx, "gives two outputs, the values and uint8 hits")
    if ctx.out_tensors[0].dtype != ctx.in_tensors[2].dtype:
        raise _fail(ctx, "the output must have the values' type")
    found = [_bsearch(int(k), keys) for k in lookups]
    hits = np.array([i >= 0 for i in found], np.uint8)
    if is_string:
        return [strings_array(values[i] if i >= 0 else b"" for i in found), hits]
    check_alloc((len(found), *values.shape[1:]), values.dtype, ctx.op.describe())
    out = np.zeros((len(found), *values.shape[1:]), values.dtype)
    for row, i in enumerate(found):
        if i >= 0:
            out[row] = values[i]
    return [out, hits]


def _bsearch(key: int, keys: np.ndarray) -> int:
    """The index C's bsearch finds for `key` in `keys` (midpoint (lo + hi) // 2), or -1;
    like TFLite, it assumes the keys are sorted, and unsorted ones give what its gives.
    NOTE: TFLite's comparator subtracts int32s, but LiteRT's build compares exactly."""
    lo, hi = 0, len(keys)
    while lo < hi:
        mid = (lo + hi) // 2
        k = int(keys[mid])
        if key == k:
            return mid
        if key < k:
            hi = mid
        else:
            lo = mid + 1
    return -1
