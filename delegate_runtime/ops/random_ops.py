"""Random ops: RANDOM_STANDARD_NORMAL, RANDOM_UNIFORM, MULTINOMIAL.

TFLite draws from a Philox4x32-10 generator per op, seeded from the op's (seed, seed2)
when the interpreter is prepared (both 0: seeds from the OS, so no two runs agree) and
carried across invokes. The same generator and conversions here give LiteRT's numbers
for explicit seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from .alloc import check_alloc
from .registry import OpContext, register

#: Key in the interpreter's kernel state: id(operator) -> its _Philox.
GENERATORS = "random_generators"

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1
_MUL_A, _MUL_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_BUMP_A, _BUMP_B = 0x9E3779B9, 0xBB67AE85
#: Philox4x32-10: ten rounds, four uint32 per 128-bit counter.
ROUNDS = 10


@dataclass
class _Philox:
    """Philox4x32-10 as TensorFlow's PhiloxRandom: a 64-bit key and a 128-bit counter."""

    key: tuple[int, int]
    counter: int  #: counter words 0..3, word 0 least significant

    @classmethod
    def seeded(cls, seed: int, seed2: int) -> _Philox:
        """PhiloxRandom(seed_lo=seed, seed_hi=seed2): seed is the key, seed2 the counter's
        high 64 bits."""
        seed, seed2 = seed & _M64, seed2 & _M64
        return cls((seed & _M32, seed >> 32), seed2 << 64)

    def skip(self, blocks: int) -> None:
        """Advance the counter by `blocks` 128-bit outputs."""
        self.counter = (self.counter + blocks) & _M128

    def blocks(self, n: int) -> np.ndarray:
        """The next `n` outputs as uint32 [n, 4] (advancing the counter by n)."""
        lo, hi = np.uint64(self.counter & _M64), np.uint64(self.counter >> 64)
        step = np.arange(n, dtype=np.uint64)
        c_lo = lo + step  # wraps mod 2**64
        c_hi = hi + (c_lo < lo).astype(np.uint64)
        m32 = np.uint64(_M32)
        c = [c_lo & m32, c_lo >> np.uint64(32), c_hi & m32, c_hi >> np.uint64(32)]
        k0, k1 = self.key
        for r in range(ROUNDS):
            if r:
                k0, k1 = (k0 + _BUMP_A) & _M32, (k1 + _BUMP_B) & _M32
            p0, p1 = _MUL_A * c[0], _MUL_B * c[2]  # 32 x 32 bits: exact in uint64
            c = [
                (p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0),
                p1 & m32,
                (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
                p0 & m32,
            ]
        self.skip(n)
        return np.stack(c, axis=1).astype(np.uint32)

    def uint32s(self, count: int) -> np.ndarray:
        """The next `count` uint32 of whole outputs (the rest of the last one is dropped)."""
        return self.blocks(-(-count // 4)).reshape(-1)[:count]


def _fail(ctx: OpContext, message: str) -> ModelError:
    return ModelError(f"{ctx.op.describe()}: {message}")


def _generator(ctx: OpContext) -> _Philox:
    """This op's generator, seeded on its first run."""
    gens: dict[int, _Philox] = ctx.state.setdefault(GENERATORS, {})
    gen = gens.get(id(ctx.op))
    if gen is None:
        seed, seed2 = int(ctx.opt("seed", 0)), int(ctx.opt("seed2", 0))
        if seed == 0 and seed2 == 0:  # TFLite: non-deterministic seeds
            seed, seed2 = (int(s) for s in np.random.SeedSequence().generate_state(2, np.uint64))
        gen = gens[id(ctx.op)] = _Philox.seeded(seed, seed2)
    return gen


def _uint32_to_float(x: np.ndarray) -> np.ndarray:
    """[0, 1) floats from the low 23 bits of x (mantissa of a float in [1, 2), minus 1)."""
    bits = (x.astype(np.uint32) & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
    return bits.view(np.float32) - np.float32(1.0)


def _uint64_to_double(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """[0, 1) doubles from 52 bits: the low 20 of x0 above the 32 of x1."""
    man = ((x0.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | x1.astype(np.uint64)
    return (man | np.uint64(1023 << 52)).view(np.float64) - 1.0


# -- glibc's logf and sincosf ------------------------------------------------------------
# TFLite's Box-Muller calls logf and sincosf, which on Linux are glibc's (Arm's optimized
# routines): table and polynomial approximations, within an ulp of the true values but not
# always correctly rounded. They are reproduced here, in float64 as they compute, so that
# our normals are LiteRT's bit for bit (other libms give LiteRT other last bits). NOTE:
# glibc's FMA builds fuse a multiply-add here and there, which can move a float result
# only where the float64 value lies within a few float64 ulps of a float32 rounding
# boundary: none of 200,000 checked angles and logarithms did.

#: glibc's __logf_data: (1/c, log(c)) for 16 subintervals, ln2, log1p polynomial.
_LOGF_INVC = np.array(
    [
        float.fromhex(h)
        for h in (
            "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0",
            "0x1.3c995b0b80385p+0", "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0",
            "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0", "0x1.0953f419900a7p+0",
            "0x1p+0", "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1",
            "0x1.b2036576afce6p-1", "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1",
            "0x1.767dcf5534862p-1",
        )
    ]
)  # fmt: skip
_LOGF_LOGC = np.array(
    [
        float.fromhex(h)
        for h in (
            "-0x1.57bf7808caadep-2", "-0x1.2bef0a7c06ddbp-2", "-0x1.01eae7f513a67p-2",
            "-0x1.b31d8a68224e9p-3", "-0x1.6574f0ac07758p-3", "-0x1.1aa2bc79c81p-3",
            "-0x1.a4e76ce8c0e5ep-4", "-0x1.1973c5a611cccp-4", "-0x1.252f438e10c1ep-5",
            "0x0p+0", "0x1.aa5aa5df25984p-5", "0x1.c5e53aa362eb4p-4",
            "0x1.526e57720db08p-3", "0x1.bc2860d22477p-3", "0x1.1058bc8a07ee1p-2",
            "0x1.4043057b6ee09p-2",
        )
    ]
)  # fmt: skip
_LOGF_LN2 = float.fromhex("0x1.62e42fefa39efp-1")
_LOGF_A = [float.fromhex(h) for h in ("-0x1.00ea348b88334p-2", "0x1.5575b0be00b6ap-2", "-0x1.ffffef20a4123p-2")]  # fmt: skip
_LOGF_OFF = 0x3F330000

#: glibc's __sincosf_table[0]: 2/pi * 2^24, pi/2, cosine c0..c4, sine s1..s3.
_HPI_INV = float.fromhex("0x1.45F306DC9C883p+23")
_HPI = float.fromhex("0x1.921FB54442D18p0")
_COS_C = [float.fromhex(h) for h in ("0x1p0", "-0x1.ffffffd0c621cp-2", "0x1.55553e1068f19p-5", "-0x1.6c087e89a359dp-10", "0x1.99343027bf8c3p-16")]  # fmt: skip
_SIN_S = [float.fromhex(h) for h in ("-0x1.555545995a603p-3", "0x1.1107605230bc4p-7", "-0x1.994eb3774cf24p-13")]  # fmt: skip


def _logf(x: np.ndarray) -> np.ndarray:
    """glibc's logf of positive normal float32 x (1 gives 0)."""
    ix = x.astype(np.float32).view(np.uint32).astype(np.int64)
    tmp = (ix - _LOGF_OFF) & _M32
    i = (tmp >> 19) % 16
    k = np.where(tmp >= 1 << 31, tmp - (1 << 32), tmp) >> 23  # arithmetic shift of int32
    iz = (ix - (tmp & 0xFF800000)) & _M32
    z = iz.astype(np.uint32).view(np.float32).astype(np.float64)
    r = z * _LOGF_INVC[i] - 1.0
    y0 = _LOGF_LOGC[i] + k.astype(np.float64) * _LOGF_LN2
    r2 = r * r
    y = _LOGF_A[1] * r + _LOGF_A[2]
    y = _LOGF_A[0] * r2 + y
    y = y * r2 + (y0 + r)
    return np.where(ix == 0x3F800000, np.float32(0), y.astype(np.float32))


def _abstop12(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) >> np.uint32(20)) & np.uint32(0x7FF)


def _sincosf(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """glibc's sincosf of float32 y with |y| < 120 (Box-Muller's angles lie in [0, 2 pi))."""
    y = y.astype(np.float32)
    x = y.astype(np.float64)
    small = _abstop12(y) < _abstop12(np.float32(float.fromhex("0x1.921FB6p-1")))
    tiny = _abstop12(y) < _abstop12(np.float32(2.0**-12))
    n = np.where(small, 0, ((np.trunc(x * _HPI_INV).astype(np.int64) + 0x800000) >> 24))
    x = np.where(small, x, x - n * _HPI)
    x2 = x * x
    x = x * np.where((n & 3 == 1) | (n & 3 == 2), -1.0, 1.0)  # sign[n & 3]
    negate_cos = np.where(n & 2 != 0, -1.0, 1.0)  # __sincosf_table[1]
    c0, c1, c2, c3, c4 = (negate_cos * c for c in _COS_C)
    x4, x3 = x2 * x2, x2 * x
    cc2 = c3 + x2 * c4
    ss1 = _SIN_S[1] + x2 * _SIN_S[2]
    cc1 = c0 + x2 * c1
    x5, x6 = x3 * x2, x4 * x2
    s = x + x3 * _SIN_S[0]
    c = cc1 + x4 * c2
    sin_poly = (s + x5 * ss1).astype(np.float32)
    cos_poly = (c + x6 * cc2).astype(np.float32)
    odd = (n & 1) == 1
    sin_out = np.where(odd, cos_poly, sin_poly)
    cos_out = np.where(odd, sin_poly, cos_poly)
    return np.where(tiny, y, sin_out), np.where(tiny, np.float32(1), cos_out)


def _box_muller(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two standard normal floats per pair of uint32, as TensorFlow's BoxMullerFloat."""
    u1 = np.maximum(_uint32_to_float(x0), np.float32(1.0e-7))
    v1 = (2.0 * np.pi * _uint32_to_float(x1).astype(np.float64)).astype(np.float32)
    u2 = np.sqrt(np.float32(-2.0) * _logf(u1))
    sin, cos = _sincosf(v1)
    return sin * u2, cos * u2


def _output_shape(ctx: OpContext) -> tuple[int, ...]:
    if len(ctx.inputs) != 1 or len(ctx.out_tensors) != 1:
        raise _fail(ctx, "takes one shape input and gives one output")
    shape = ctx.inputs[0]
    if shape is None or shape.dtype != np.int32 or shape.ndim != 1:
        raise _fail(ctx, "the shape (input 0) must be a 1-D int32 tensor")
    if ctx.out_tensors[0].dtype != np.float32:
        raise _fail(ctx, f"output type {ctx.out_tensors[0].dtype} is not float32")
    dims = tuple(int(d) for d in shape)
    check_alloc(dims, np.float32, ctx.op.describe())
    return dims


@register("RANDOM_UNIFORM", versions=(1,))
def random_uniform(ctx: OpContext) -> np.ndarray:
    """float32 uniform in [0, 1) of the shape input 0 gives."""
    shape = _output_shape(ctx)
    n = int(np.prod(shape, dtype=np.int64))
    return _uint32_to_float(_generator(ctx).uint32s(n)).reshape(shape)


@register("RANDOM_STANDARD_NORMAL", versions=(1,))
def random_standard_normal(ctx: OpContext) -> np.ndarray:
    """float32 standard normal (Box-Muller) of the shape input 0 gives."""
    shape = _output_shape(ctx)
    n = int(np.prod(shape, dtype=np.int64))
    bits = _generator(ctx).uint32s(-(-n // 4) * 4)
    f0, f1 = _box_muller(bits[0::2], bits[1::2])
    return np.stack([f0, f1], axis=1).reshape(-1)[:n].reshape(shape)


@register("MULTINOMIAL", versions=(1,))
def multinomial(ctx: OpContext) -> np.ndarray:
    """num_samples (input 1) class indices per row of logits (input 0, [batch, classes]),
    each drawn with probability softmax(logits) over the finite logits."""
    if len(ctx.inputs) != 2 or len(ctx.out_tensors) != 1:
        raise _fail(ctx, "takes logits and num_samples and gives one output")
    logits, num = ctx.inputs[0], ctx.inputs[1]
    if logits.dtype != np.float32 or logits.ndim != 2:
        raise _fail(ctx, "the logits (input 0) must be a 2-D float32 tensor")
    if num.dtype != np.int32 or num.ndim != 0:
        raise _fail(ctx, "num_samples (input 1) must be an int32 scalar")
    out_dtype = ctx.out_tensors[0].dtype
    if out_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise _fail(ctx, f"output type {out_dtype} is neither int32 nor int64")
    batch, classes = logits.shape
    samples = int(num)
    if classes <= 0 or samples < 0:
        raise _fail(ctx, f"needs classes > 0 and num_samples >= 0, not {classes}, {samples}")
    check_alloc((batch, samples), out_dtype, ctx.op.describe())
    gen = _generator(ctx)
    draw = _Philox(gen.key, gen.counter)
    # TFLite skips a fixed stretch per invoke (TF's multinomial does), drawing from a copy
    gen.skip(batch * (-(-samples // 4) * 4) * 2 * 256)
    bits = draw.uint32s(2 * batch * samples).reshape(batch, samples, 2)
    uniform = _uint64_to_double(bits[..., 0], bits[..., 1])
    finite = np.isfinite(logits)
    out = np.empty((batch, samples), out_dtype)
    for b in range(batch):
        row = logits[b].astype(np.float64)
        top = float(row[finite[b]].max()) if finite[b].any() else float(np.finfo(np.float32).min)
        cdf = np.cumsum(np.where(finite[b], np.exp(np.where(finite[b], row, top) - top), 0.0))
        out[b] = np.searchsorted(cdf, uniform[b] * cdf[-1], side="right")
    return out
