// devicefarm GPU delegate: OpenCL kernels. Tensors are NHWC, stored flat.
// Storage precision is chosen at build time:
//   (default)        float storage, float arithmetic
//   STORAGE_HALF     half storage; with HALF_ARITH (cl_khr_fp16) half arithmetic,
//                    else vload_half/vstore_half and float arithmetic.
// Reductions (conv, FC, pooling, mean, softmax) always accumulate in float.

#ifdef STORAGE_HALF
  #ifdef HALF_ARITH
    #pragma OPENCL EXTENSION cl_khr_fp16 : enable
    typedef half real;
  #else
    typedef float real;
  #endif
  typedef half store_t;
  #define LD(p, i) ((real)vload_half((i), (p)))
  #define ST(p, i, v) vstore_half((float)(v), (i), (p))
#else
  typedef float real;
  typedef float store_t;
  #define LD(p, i) ((p)[(i)])
  #define ST(p, i, v) ((p)[(i)] = (v))
#endif
#define LDF(p, i) ((float)LD(p, i))
// A value as storing it would leave it: a kernel that computes a tensor it never stores
// (fused work) rounds it as the launch it replaces would have, so fusing keeps results.
#ifdef STORAGE_HALF
inline float as_stored(float x) {
  ushort bits;
  vstore_half(x, 0, (__private half*)&bits);
  return vload_half(0, (__private const half*)&bits);
}
#else
#define as_stored(x) (x)
#endif
// float32 access, for the staging buffers at a partition's edges
#define LDF32(p, i) ((p)[(i)])
#define ST32(p, i, v) ((p)[(i)] = (v))
#define LD4F(p, i) vload4((i), (p))  // four floats, whatever the storage
// Four elements at p + 4 * i (16-byte aligned for float, 8-byte for half storage, so
// the aligned half forms load and store 4 halves at once).
#ifdef STORAGE_HALF
  #define LD4(p, i) vloada_half4((i), (p))
  #define ST4(p, i, v) vstorea_half4((v), (i), (p))
#else
  #define LD4(p, i) vload4((i), (p))
  #define ST4(p, i, v) vstore4((v), (i), (p))
#endif
// Weights (the filters of convolutions, depthwise, transposed and fully connected layers,
// always constants) are read through weight_t: float32 whatever the storage, so half
// storage rounds the activations alone (const_types.py uploads them so); HALF_WEIGHTS
// keeps them in the storage type where that loses nothing (every weight of the model a
// half value: const_types.weights_in_half).
#if defined(STORAGE_HALF) && defined(HALF_WEIGHTS)
  typedef store_t weight_t;
  #define LDW(p, i) LDF(p, i)
  #define LDW4(p, i) LD4(p, i)
#else
  typedef float weight_t;
  #define LDW(p, i) ((float)(p)[(i)])
  #define LDW4(p, i) vload4((i), (p))
#endif

// Each value of v[0..n) through `expr` (of v[i]); for the switches below, which take their
// uniform case once for all of a work item's values rather than once per value.
#define EACH(expr)                                                                       \
  for (int i = 0; i < n; ++i) v[i] = (expr);                                              \
  return

// Fused activations (TFLite's codes, ACT_* from codes.py).
inline void act_n(float* v, int n, int a) {
  switch (a) {
    case ACT_NONE: return;
    case ACT_RELU: EACH(fmax(v[i], 0.0f));
    case ACT_RELU_N1_TO_1: EACH(clamp(v[i], -1.0f, 1.0f));
    case ACT_RELU6: EACH(clamp(v[i], 0.0f, 6.0f));
    case ACT_TANH: EACH(tanh(v[i]));
    case ACT_SIGMOID: EACH(1.0f / (1.0f + exp(-v[i])));
    default: EACH(NAN);  // an unknown code poisons the result
  }
}
inline float act(float x, int a) {
  act_n(&x, 1, a);
  return x;
}

// ---- epilogue -----------------------------------------------------------------------------
// Kernels that produce a tensor apply, after their own result and fused activation, up to
// three elementwise steps of the ops fused into them (STEP_* codes, k.x; k.y a FROM_* code
// saying where the operand is: the scalar s.x, p[channel] or p[element]). QDQ snaps to the
// grid s.x (lo), s.y (hi), s.z (scale), SWISH_QDQ its sigmoid (a quantized model's
// LOGISTIC output) to that grid. o is the output element, c its channel.
inline float step_operand(int from, __global const store_t* p, float4 s, int o, int c) {
  switch (from) {
    case FROM_TENSOR: return LDF(p, o);
    case FROM_CHANNEL: return LDF(p, c);
    case FROM_SCALAR: return s.x;
    default: return NAN;
  }
}
#define OPERAND step_operand(k.y, p, s, o[i], c[i])
#define SNAP(w) (round((clamp((w), s.x, s.y) - s.x) / s.z) * s.z + s.x)
// One step for n values at once, o[i] and c[i] the element and channel of v[i].
inline void step_n(float* v, int n, int2 k, __global const store_t* p, float4 s,
                   const int* o, const int* c) {
  switch (k.x) {
    case STEP_NONE: return;
    case STEP_RELU: EACH(fmax(v[i], 0.0f));
    case STEP_RELU6: EACH(clamp(v[i], 0.0f, 6.0f));
    case STEP_RELU_N1_TO_1: EACH(clamp(v[i], -1.0f, 1.0f));
    case STEP_LOGISTIC: EACH(1.0f / (1.0f + exp(-v[i])));
    case STEP_TANH: EACH(tanh(v[i]));
    case STEP_HARD_SWISH: EACH(v[i] * clamp(v[i] + 3.0f, 0.0f, 6.0f) / 6.0f);
    case STEP_SWISH: EACH(v[i] / (1.0f + exp(-v[i])));
    case STEP_ADD: EACH(v[i] + OPERAND);
    case STEP_SUB: EACH(v[i] - OPERAND);
    case STEP_RSUB: EACH(OPERAND - v[i]);
    case STEP_MUL: EACH(v[i] * OPERAND);
    case STEP_PRELU: EACH(v[i] >= 0.0f ? v[i] : v[i] * OPERAND);
    case STEP_QDQ: EACH(SNAP(v[i]));
    // x * sigmoid(x), the sigmoid snapped to its own grid first
    case STEP_SWISH_QDQ: EACH(v[i] * SNAP(1.0f / (1.0f + exp(-v[i]))));
    default: EACH(NAN);  // an unknown code poisons the result
  }
}
#undef OPERAND
#undef SNAP
#undef EACH
inline float step(float v, int2 k, __global const store_t* p, float4 s, int o, int c) {
  step_n(&v, 1, k, p, s, &o, &c);
  return v;
}

// The parameters ending a producing kernel's signature, and its result through them.
#define EPILOGUE_PARAMS                                                                  \
  int a, int2 k0, __global const store_t* p0, float4 s0, int2 k1,                        \
      __global const store_t* p1, float4 s1, int2 k2, __global const store_t* p2, float4 s2
#define EPILOGUE(v, o, c)                                                                \
  step(step(step(act((v), a), k0, p0, s0, (o), (c)), k1, p1, s1, (o), (c)), k2, p2, s2, \
       (o), (c))
// The epilogue of n values v[i] of elements o[i], channels c[i], each switch taken once.
#define EPILOGUE_N(v, n, o, c)                                                           \
  act_n((v), (n), a);                                                                    \
  step_n((v), (n), k0, p0, s0, (o), (c));                                                \
  step_n((v), (n), k1, p1, s1, (o), (c));                                                \
  step_n((v), (n), k2, p2, s2, (o), (c))

// Boundary conversions between float32 host data and the storage type.
__kernel void to_storage(__global const float* in, __global store_t* out, int n) {
  int i = get_global_id(0);
  if (i < n) ST(out, i, in[i]);
}

__kernel void from_storage(__global const store_t* in, __global float* out, int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = LDF(in, i);
}

// Quantize-and-dequantize in place: clamp to [lo, hi] and snap to the scale grid.
__kernel void qdq(__global store_t* x, int n, float lo, float hi, float scale) {
  int i = get_global_id(0);
  if (i >= n) return;
  float v = clamp(LDF(x, i), lo, hi);
  ST(x, i, round((v - lo) / scale) * scale + lo);
}
