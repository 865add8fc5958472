// One depthwise convolution output, computed where a kernel reads it: the 1x1 GEMM that
// absorbed the depthwise convolution before it (gemm.cl.in's depthwise variants) loads its
// input through these instead of from a stored tensor. Multiplier 1; weights [1, KH, KW, C];
// `geo` = (KH, KW, stride h, stride w, dilation h, dilation w, pad top, pad left); `dout`
// the depthwise output's NHWC shape, `pixel` a flat index into its N*OH*OW pixels. The
// result passes the depthwise node's fused activation `act`, then one operand-free step
// (`k`, `s`: its quantize-and-dequantize in a quantized model), rounded as storing it would.
// Each input value is clamped to `iclamp` as it is loaded: a RELU before the depthwise
// convolution, elided (fusions/relu_into_readers.py); (-inf, inf) for none.

#define NO_CLAMP ((float2)(-INFINITY, INFINITY))

// The sum alone, bias included, before any activation (squeeze_excite_dw applies the
// node's whole epilogue to it).
inline float depthwise_sum(__global const store_t* in, __global const weight_t* w,
                           __global const float* bias, int4 din, int4 dout, int8 geo,
                           int pixel, int c, float2 iclamp) {
  int plane = dout.y * dout.z, r = pixel % plane, n = pixel / plane;
  int y = r / dout.z, x = r % dout.z, C = din.w;
  float acc = LDF32(bias, c);
  for (int ky = 0; ky < geo.s0; ++ky) {
    int iy = y * geo.s2 - geo.s6 + ky * geo.s4;
    if (iy < 0 || iy >= din.y) continue;
    for (int kx = 0; kx < geo.s1; ++kx) {
      int ix = x * geo.s3 - geo.s7 + kx * geo.s5;
      if (ix < 0 || ix >= din.z) continue;
      float v = clamp(LDF(in, ((n * din.y + iy) * din.z + ix) * C + c), iclamp.x, iclamp.y);
      acc += v * LDW(w, (ky * geo.s1 + kx) * C + c);
    }
  }
  return acc;
}

inline float depthwise_at(__global const store_t* in, __global const weight_t* w,
                          __global const float* bias, int4 din, int4 dout, int8 geo,
                          int pixel, int c, int act_code, int2 k, float4 s, float2 iclamp) {
  float acc = depthwise_sum(in, w, bias, din, dout, geo, pixel, c, iclamp);
  return as_stored(step(act(acc, act_code), k, in, s, 0, c));
}

// Four channels 4 * c4 .. 4 * c4 + 3 (C % 4 == 0): the sums, then through the epilogue.
inline float4 depthwise_sum4(__global const store_t* in, __global const weight_t* w,
                             __global const float* bias, int4 din, int4 dout, int8 geo,
                             int pixel, int c4, float2 iclamp) {
  int plane = dout.y * dout.z, r = pixel % plane, n = pixel / plane;
  int y = r / dout.z, x = r % dout.z, C4 = din.w / 4;
  float4 acc = LD4F(bias, c4);
  for (int ky = 0; ky < geo.s0; ++ky) {
    int iy = y * geo.s2 - geo.s6 + ky * geo.s4;
    if (iy < 0 || iy >= din.y) continue;
    for (int kx = 0; kx < geo.s1; ++kx) {
      int ix = x * geo.s3 - geo.s7 + kx * geo.s5;
      if (ix < 0 || ix >= din.z) continue;
      float4 v = clamp(LD4(in, ((n * din.y + iy) * din.z + ix) * C4 + c4), iclamp.x, iclamp.y);
      acc = fma(v, LDW4(w, (ky * geo.s1 + kx) * C4 + c4), acc);
    }
  }
  return acc;
}

inline float4 depthwise_at4(__global const store_t* in, __global const weight_t* w,
                            __global const float* bias, int4 din, int4 dout, int8 geo,
                            int pixel, int c4, int act_code, int2 k, float4 s,
                            float2 iclamp) {
  float4 acc = depthwise_sum4(in, w, bias, din, dout, geo, pixel, c4, iclamp);
  int c = 4 * c4;
  return (float4)(as_stored(step(act(acc.x, act_code), k, in, s, 0, c)),
                  as_stored(step(act(acc.y, act_code), k, in, s, 0, c + 1)),
                  as_stored(step(act(acc.z, act_code), k, in, s, 0, c + 2)),
                  as_stored(step(act(acc.w, act_code), k, in, s, 0, c + 3)));
}
