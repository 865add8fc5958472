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

// Fused activations (TFLite codes): 0 none, 1 relu, 2 relu_n1_to_1, 3 relu6, 4 tanh, 6 sigmoid.
inline float act(float x, int a) {
  switch (a) {
    case 1: return fmax(x, 0.0f);
    case 2: return clamp(x, -1.0f, 1.0f);
    case 3: return clamp(x, 0.0f, 6.0f);
    case 4: return tanh(x);
    case 6: return 1.0f / (1.0f + exp(-x));
    default: return x;
  }
}

// ---- convolution ------------------------------------------------------------------------
// @CONV2D_DIRECT@

// GEMM kernels, generated from gemm.cl.in (one per tile size):
// @GEMM_KERNELS@

// Basic LSTM cell (TFLite's LstmCell) after its fully-connected layer: gates in the order
// input, candidate, forget, output. One work item per (batch, unit).
__kernel void lstm_basic_gates(__global const store_t* gates, __global const store_t* prev_c,
                               __global store_t* h_out, __global store_t* c_out, int batch,
                               int units) {
  int i = get_global_id(0);
  if (i >= batch * units) return;
  int b = i / units, u = i % units, g = b * 4 * units + u;
  float in_g = 1.0f / (1.0f + exp(-LDF(gates, g)));
  float cand = tanh(LDF(gates, g + units));
  float forget = 1.0f / (1.0f + exp(-LDF(gates, g + 2 * units)));
  float out_g = 1.0f / (1.0f + exp(-LDF(gates, g + 3 * units)));
  float c = in_g * cand + forget * LDF(prev_c, i);
  ST(c_out, i, c);
  ST(h_out, i, out_g * tanh(c));
}

// Boundary conversions between float32 host data and the storage type.
__kernel void to_storage(__global const float* in, __global store_t* out, int n) {
  int i = get_global_id(0);
  if (i < n) ST(out, i, in[i]);
}

__kernel void from_storage(__global const store_t* in, __global float* out, int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = LDF(in, i);
}

// Depthwise convolution, one work item per output element. Weights [1, KH, KW, OC].
__kernel void depthwise_conv2d(__global const store_t* in, __global const store_t* w,
                               __global const store_t* bias, __global store_t* out,
                               int4 in_shape, int4 out_shape, int kh, int kw, int sh, int sw,
                               int dh, int dw, int pad_t, int pad_l, int mult, int a) {
  int oc = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int OC = out_shape.w, OH = out_shape.y, OW = out_shape.z, C = in_shape.w;
  if (oc >= OC || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH, ic = oc / mult;
  float acc = LDF(bias, oc);
  for (int ky = 0; ky < kh; ++ky) {
    int iy = y * sh - pad_t + ky * dh;
    if (iy < 0 || iy >= in_shape.y) continue;
    for (int kx = 0; kx < kw; ++kx) {
      int ix = x * sw - pad_l + kx * dw;
      if (ix < 0 || ix >= in_shape.z) continue;
      acc += LDF(in, ((n * in_shape.y + iy) * in_shape.z + ix) * C + ic) *
             LDF(w, (ky * kw + kx) * OC + oc);
    }
  }
  ST(out, ((n * OH + y) * OW + x) * OC + oc, act(acc, a));
}

// Depthwise 3x3, 4 channels per work item (C % 4 == 0, multiplier 1).
__kernel void depthwise3x3_c4(__global const store_t* in, __global const store_t* w,
                              __global const store_t* bias, __global store_t* out,
                              int4 in_shape, int4 out_shape, int sh, int sw,
                              int pad_t, int pad_l, int a) {
  int c4 = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c4 * 4 >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH, c = c4 * 4;
#ifdef STORAGE_HALF
  float4 acc = vloada_half4(0, bias + c);
#else
  float4 acc = vload4(0, bias + c);
#endif
  for (int ky = 0; ky < 3; ++ky) {
    int iy = y * sh - pad_t + ky;
    if (iy < 0 || iy >= in_shape.y) continue;
    for (int kx = 0; kx < 3; ++kx) {
      int ix = x * sw - pad_l + kx;
      if (ix < 0 || ix >= in_shape.z) continue;
      int ib = ((n * in_shape.y + iy) * in_shape.z + ix) * C + c;
      int wb = (ky * 3 + kx) * C + c;
#ifdef STORAGE_HALF
      acc += vloada_half4(0, in + ib) * vloada_half4(0, w + wb);
#else
      acc += vload4(0, in + ib) * vload4(0, w + wb);
#endif
    }
  }
  float4 r = (float4)(act(acc.x, a), act(acc.y, a), act(acc.z, a), act(acc.w, a));
  int ob = ((n * OH + y) * OW + x) * C + c;
#ifdef STORAGE_HALF
  vstorea_half4(r, 0, out + ob);
#else
  vstore4(r, 0, out + ob);
#endif
}

// @DEPTHWISE3X3@

// Transposed convolution: one work item per output element gathers its contributions.
// Weights OHWI [OC, KH, KW, IC].
__kernel void transpose_conv2d(__global const store_t* in, __global const store_t* w,
                               __global const store_t* bias, __global store_t* out,
                               int4 in_shape, int4 out_shape, int kh, int kw, int sh, int sw,
                               int pad_t, int pad_l, int a) {
  int oc = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int OC = out_shape.w, OH = out_shape.y, OW = out_shape.z, C = in_shape.w;
  if (oc >= OC || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH;
  float acc = LDF(bias, oc);
  for (int ky = 0; ky < kh; ++ky) {
    int ty = y + pad_t - ky;
    if (ty < 0 || ty % sh) continue;
    int iy = ty / sh;
    if (iy >= in_shape.y) continue;
    for (int kx = 0; kx < kw; ++kx) {
      int tx = x + pad_l - kx;
      if (tx < 0 || tx % sw) continue;
      int ix = tx / sw;
      if (ix >= in_shape.z) continue;
      int ib = ((n * in_shape.y + iy) * in_shape.z + ix) * C;
      int wb = ((oc * kh + ky) * kw + kx) * C;
      for (int c = 0; c < C; ++c) acc += LDF(in, ib + c) * LDF(w, wb + c);
    }
  }
  ST(out, ((n * OH + y) * OW + x) * OC + oc, act(acc, a));
}

// ---- pooling and reductions ------------------------------------------------------------
// kind 0: average (counting only inside the input), 1: max.
__kernel void pool2d(__global const store_t* in, __global store_t* out, int4 in_shape,
                     int4 out_shape, int kh, int kw, int sh, int sw, int pad_t, int pad_l,
                     int kind, int a) {
  int c = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH;
  float acc = kind ? -INFINITY : 0.0f;
  int count = 0;
  for (int ky = 0; ky < kh; ++ky) {
    int iy = y * sh - pad_t + ky;
    if (iy < 0 || iy >= in_shape.y) continue;
    for (int kx = 0; kx < kw; ++kx) {
      int ix = x * sw - pad_l + kx;
      if (ix < 0 || ix >= in_shape.z) continue;
      float v = LDF(in, ((n * in_shape.y + iy) * in_shape.z + ix) * C + c);
      acc = kind ? fmax(acc, v) : acc + v;
      ++count;
    }
  }
  if (!kind) acc = count ? acc / count : 0.0f;
  ST(out, ((n * OH + y) * OW + x) * C + c, act(acc, a));
}

// Mean over the inner axes: in seen as [outer, inner, rest]; out [outer, rest].
__kernel void mean_axis(__global const store_t* in, __global store_t* out, int outer,
                        int inner, int rest) {
  int r = get_global_id(0), o = get_global_id(1);
  if (r >= rest || o >= outer) return;
  float acc = 0.0f;
  for (int i = 0; i < inner; ++i) acc += LDF(in, (o * inner + i) * rest + r);
  ST(out, o * rest + r, acc / inner);
}

// @SOFTMAX_ROWS@

// ---- element-wise -----------------------------------------------------------------------
// Binary ops with 4-D broadcasting: strides are 0 on broadcast dimensions.
// op: 0 add, 1 sub, 2 mul, 3 div, 4 max, 5 min, 6 squared difference, 7 prelu, 8 and.
__kernel void binary4d(__global const store_t* x, __global const store_t* y,
                       __global store_t* out, int4 shape, int4 xs, int4 ys, int op, int a) {
  int i = get_global_id(0);
  int total = shape.x * shape.y * shape.z * shape.w;
  if (i >= total) return;
  int d3 = i % shape.w, r = i / shape.w;
  int d2 = r % shape.z; r /= shape.z;
  int d1 = r % shape.y, d0 = r / shape.y;
  float u = LDF(x, d0 * xs.x + d1 * xs.y + d2 * xs.z + d3 * xs.w);
  float v = LDF(y, d0 * ys.x + d1 * ys.y + d2 * ys.z + d3 * ys.w);
  float o;
  switch (op) {
    case 0: o = u + v; break;
    case 1: o = u - v; break;
    case 2: o = u * v; break;
    case 3: o = u / v; break;
    case 4: o = fmax(u, v); break;
    case 5: o = fmin(u, v); break;
    case 6: o = (u - v) * (u - v); break;
    case 7: o = u >= 0.0f ? u : u * v; break;
    default: o = (u != 0.0f && v != 0.0f) ? 1.0f : 0.0f; break;
  }
  ST(out, i, act(o, a));
}

// Unary ops: 0 relu, 1 relu6, 2 relu_n1_to_1, 3 logistic, 4 tanh, 5 exp, 6 hard_swish,
// 7 rsqrt, 8 sqrt, 9 copy.
__kernel void unary(__global const store_t* x, __global store_t* out, int n, int op) {
  int i = get_global_id(0);
  if (i >= n) return;
  real v = LD(x, i);
  real o;
  switch (op) {
    case 0: o = fmax(v, (real)0); break;
    case 1: o = clamp(v, (real)0, (real)6); break;
    case 2: o = clamp(v, (real)-1, (real)1); break;
    case 3: o = (real)(1.0f / (1.0f + exp(-(float)v))); break;
    case 4: o = (real)tanh((float)v); break;
    case 5: o = (real)exp((float)v); break;
    case 6: o = v * clamp(v + (real)3, (real)0, (real)6) / (real)6; break;
    case 7: o = (real)rsqrt((float)v); break;
    case 8: o = (real)sqrt((float)v); break;
    default: o = v; break;
  }
  ST(out, i, o);
}

// Quantize-and-dequantize in place: clamp to [lo, hi] and snap to the scale grid.
__kernel void qdq(__global store_t* x, int n, float lo, float hi, float scale) {
  int i = get_global_id(0);
  if (i >= n) return;
  float v = clamp(LDF(x, i), lo, hi);
  ST(x, i, round((v - lo) / scale) * scale + lo);
}

// ---- data movement ----------------------------------------------------------------------
// Strided 4-D copy: out[d] (dense, shape `shape`, at out_offset with out strides `os`)
// = in[in_offset + sum(d_k * is_k)]. Serves slice, strided slice, transpose, concat, pad.
__kernel void copy4d(__global const store_t* in, __global store_t* out, int4 shape, int4 is,
                     int in_offset, int4 os, int out_offset) {
  int i = get_global_id(0);
  int total = shape.x * shape.y * shape.z * shape.w;
  if (i >= total) return;
  int d3 = i % shape.w, r = i / shape.w;
  int d2 = r % shape.z; r /= shape.z;
  int d1 = r % shape.y, d0 = r / shape.y;
  ST(out, out_offset + d0 * os.x + d1 * os.y + d2 * os.z + d3 * os.w,
     LD(in, in_offset + d0 * is.x + d1 * is.y + d2 * is.z + d3 * is.w));
}

__kernel void fill(__global store_t* out, int n, float value) {
  int i = get_global_id(0);
  if (i < n) ST(out, i, value);
}

// Bilinear resize, NHWC. mode bit 0: align_corners, bit 1: half_pixel_centers.
__kernel void resize_bilinear(__global const store_t* in, __global store_t* out,
                              int4 in_shape, int4 out_shape, float scale_y, float scale_x,
                              int mode) {
  int c = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH, H = in_shape.y, W = in_shape.z;
  float half_px = (mode & 2) ? 0.5f : 0.0f;
  float fy = ((float)y + half_px) * scale_y - half_px;
  float fx = ((float)x + half_px) * scale_x - half_px;
  int y0 = max((int)floor(fy), 0), x0 = max((int)floor(fx), 0);
  int y1 = min((int)ceil(fy), H - 1), x1 = min((int)ceil(fx), W - 1);
  float wy = fy - floor(fy), wx = fx - floor(fx);
  if (fy < 0.0f) wy = 0.0f;
  if (fx < 0.0f) wx = 0.0f;
  y0 = min(y0, H - 1); x0 = min(x0, W - 1);
  int b = n * H;
  float tl = LDF(in, ((b + y0) * W + x0) * C + c), tr = LDF(in, ((b + y0) * W + x1) * C + c);
  float bl = LDF(in, ((b + y1) * W + x0) * C + c), br = LDF(in, ((b + y1) * W + x1) * C + c);
  float top = tl + (tr - tl) * wx, bot = bl + (br - bl) * wx;
  ST(out, ((n * OH + y) * OW + x) * C + c, top + (bot - top) * wy);
}

// Nearest-neighbour resize, NHWC, TFLite's rounding rules.
__kernel void resize_nearest(__global const store_t* in, __global store_t* out,
                             int4 in_shape, int4 out_shape, float scale_y, float scale_x,
                             int mode) {
  int c = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH, H = in_shape.y, W = in_shape.z;
  float off = (mode & 2) ? 0.5f : 0.0f;
  float fy = ((float)y + off) * scale_y, fx = ((float)x + off) * scale_x;
  int iy = (mode & 1) ? (int)round(fy) : (int)floor(fy);
  int ix = (mode & 1) ? (int)round(fx) : (int)floor(fx);
  iy = min(max(iy, 0), H - 1);
  ix = min(max(ix, 0), W - 1);
  ST(out, ((n * OH + y) * OW + x) * C + c, LD(in, ((n * H + iy) * W + ix) * C + c));
}

// Gather by a precomputed index map: out[i] = in[idx[i]], or 0 where idx[i] < 0 (padding).
// Serves any data movement that is not a 4-D strided copy (space/depth rearrangements).
__kernel void gather_index(__global const store_t* in, __global store_t* out,
                           __global const int* idx, int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  int j = idx[i];
  ST(out, i, j < 0 ? (real)0 : LD(in, j));
}
