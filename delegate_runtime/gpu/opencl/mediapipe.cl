// MediaPipe's custom ops (mediapipe/util/tflite/operations/*.cc), float arithmetic.

// Convolution2DTransposeBias: each output element gathers its contributions, plus the bias.
// Weights OHWI [OC, KH, KW, IC].
__kernel void mp_transpose_conv_bias(__global const store_t* in, __global const weight_t* w,
                                     __global const float* bias, __global store_t* out,
                                     int4 in_shape, int4 out_shape, int kh, int kw, int sh,
                                     int sw, int pad_t, int pad_l) {
  int oc = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int OC = out_shape.w, OH = out_shape.y, OW = out_shape.z, C = in_shape.w;
  if (oc >= OC || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH;
  float acc = LDF32(bias, oc);
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
      for (int c = 0; c < C; ++c) acc += LDF(in, ib + c) * LDW(w, wb + c);
    }
  }
  ST(out, ((n * OH + y) * OW + x) * OC + oc, acc);
}

// MaxPoolingWithArgmax2D: the first maximum of each window (padding left out) clamped to
// [lo, hi], and its in-window position ky * kw + kx plus 0.1.
__kernel void mp_max_pool_argmax(__global const store_t* in, __global store_t* out,
                                 __global store_t* indices, int4 in_shape, int4 out_shape,
                                 int kh, int kw, int sh, int sw, int pad_t, int pad_l, float lo,
                                 float hi) {
  int c = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH;
  int y0 = y * sh - pad_t, x0 = x * sw - pad_l;
  float best = -FLT_MAX;
  int where = 0;
  for (int ky = max(0, -y0); ky < min(kh, in_shape.y - y0); ++ky) {
    for (int kx = max(0, -x0); kx < min(kw, in_shape.z - x0); ++kx) {
      float v = LDF(in, ((n * in_shape.y + y0 + ky) * in_shape.z + x0 + kx) * C + c);
      if (v > best) {
        best = v;
        where = ky * kw + kx;
      }
    }
  }
  int o = ((n * OH + y) * OW + x) * C + c;
  ST(out, o, clamp(best, lo, hi));
  ST(indices, o, (float)where + 0.1f);
}

// MaxUnpooling2D as a gather: each output element takes the last input (in input order)
// whose window covers it and whose index names its place in that window; else 0.
// NOTE: an index outside its own window (MaxPoolingWithArgmax2D makes none) is dropped,
// as in TFLite's GPU kernel; MediaPipe's CPU kernel writes it wherever it points.
__kernel void mp_max_unpool(__global const store_t* in, __global const store_t* indices,
                            __global store_t* out, int4 in_shape, int4 out_shape, int kh,
                            int kw, int sh, int sw, int pad_t, int pad_l) {
  int c = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH;
  float result = 0.0f;
  int chosen = -1;
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
      int i = ((n * in_shape.y + iy) * in_shape.z + ix) * C + c;
      float f = LDF(indices, i);
      if (!(fabs(f) < 2147483648.0f)) continue;  // NaN, inf or past int: lands nowhere
      int idx = (int)f;                           // truncates, as the C++ cast
      int order = iy * in_shape.z + ix;
      if (idx / kw == ky && idx % kw == kx && order > chosen) {
        chosen = order;
        result = LDF(in, i);
      }
    }
  }
  ST(out, ((n * OH + y) * OW + x) * C + c, result);
}

// TransformLandmarks: x' = m00 x + m01 y + m03 * scale, y' likewise; z copied.
__kernel void mp_transform_landmarks(__global const store_t* in, __global const store_t* m,
                                     __global store_t* out, int n, int dims, float scale) {
  int i = get_global_id(0);
  if (i >= n) return;
  float x = LDF(in, i * dims), y = LDF(in, i * dims + 1);
  ST(out, i * dims, LDF(m, 0) * x + LDF(m, 1) * y + LDF(m, 2) * 0.0f + LDF(m, 3) * scale);
  ST(out, i * dims + 1, LDF(m, 4) * x + LDF(m, 5) * y + LDF(m, 6) * 0.0f + LDF(m, 7) * scale);
  if (dims == 3) ST(out, i * dims + 2, LDF(in, i * dims + 2));
}

// TransformTensorBilinear (batch 1): the input read bilinearly at the matrix's image of each
// output pixel, 0 outside; `centres` applies v2's pixel-centre correction.
__kernel void mp_transform_tensor(__global const store_t* in, __global const store_t* m,
                                  __global store_t* out, int4 in_shape, int4 out_shape,
                                  int centres) {
  int c = get_global_id(0), x = get_global_id(1), y = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z, H = in_shape.y, W = in_shape.z;
  if (c >= C || x >= OW || y >= OH) return;
  float4 rx = (float4)(LDF(m, 0), LDF(m, 1), LDF(m, 2), LDF(m, 3));
  float4 ry = (float4)(LDF(m, 4), LDF(m, 5), LDF(m, 6), LDF(m, 7));
  if (centres) {
    rx.w += rx.x * 0.5f + rx.y * 0.5f - 0.5f;
    ry.w += ry.x * 0.5f + ry.y * 0.5f - 0.5f;
  }
  float4 p = (float4)((float)x, (float)y, 0.0f, 1.0f);
  float tx = rx.x * p.x + rx.y * p.y + rx.z * p.z + rx.w * p.w;
  float ty = ry.x * p.x + ry.y * p.y + ry.z * p.z + ry.w * p.w;
  float result = 0.0f;
  if (tx >= 0.0f && tx <= W - 1 && ty >= 0.0f && ty <= H - 1) {  // NaN fails too
    float fx = floor(tx), fy = floor(ty);
    int ix = (int)fx, iy = (int)fy;
    float rc = tx - fx, lc = ty - fy;
    float q11 = LDF(in, (iy * W + ix) * C + c);
    float q21 = ix + 1 < W ? LDF(in, (iy * W + ix + 1) * C + c) : 0.0f;
    float q12 = iy + 1 < H ? LDF(in, ((iy + 1) * W + ix) * C + c) : 0.0f;
    float q22 = ix + 1 < W && iy + 1 < H ? LDF(in, ((iy + 1) * W + ix + 1) * C + c) : 0.0f;
    float upper = (1.0f - rc) * q11 + rc * q21;
    float lower = (1.0f - rc) * q12 + rc * q22;
    result = lc * lower + (1.0f - lc) * upper;
  }
  ST(out, (y * OW + x) * C + c, result);
}

// 3x3 and 4x4 products in the kernel's order (row r, column c: sum over k from 0).
inline void mp_mat3_mul(const float* a, const float* b, float* r) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = 0.0f;
      for (int k = 0; k < 3; ++k) s += a[i * 3 + k] * b[k * 3 + j];
      r[i * 3 + j] = s;
    }
}

inline void mp_mat4_mul_into(float* t, const float* b) {
  float r[16];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      float s = 0.0f;
      for (int k = 0; k < 4; ++k) s += t[i * 4 + k] * b[k * 4 + j];
      r[i * 4 + j] = s;
    }
  for (int i = 0; i < 16; ++i) t[i] = r[i];
}

// Landmarks2TransformMatrix v2, one work item: rotation from two landmarks, the rotated
// bounding box of the subset, then shift * rotate * scale * shift.
__kernel void mp_landmarks_to_matrix_v2(__global const store_t* lm, __global store_t* out,
                                        __global const int* subset, int n_subset, int left,
                                        int right, float target, int out_h, int out_w,
                                        float scale_x, float scale_y) {
  if (get_global_id(0) != 0) return;
  float rot = target - atan2(LDF(lm, right * 3 + 1) - LDF(lm, left * 3 + 1),
                             LDF(lm, right * 3) - LDF(lm, left * 3));
  float c = cos(rot), s = sin(rot);
  float max_x = -FLT_MAX, max_y = -FLT_MAX, min_x = FLT_MAX, min_y = FLT_MAX;
  for (int i = 0; i < n_subset; ++i) {
    float x = LDF(lm, subset[i] * 3), y = LDF(lm, subset[i] * 3 + 1);
    float rx = c * x + (-s) * y + 0.0f, ry = s * x + c * y + 0.0f;
    max_x = fmax(max_x, rx);
    max_y = fmax(max_y, ry);
    min_x = fmin(min_x, rx);
    min_y = fmin(min_y, ry);
  }
  float cw = max_x - min_x, ch = max_y - min_y;
  float mx = (min_x + max_x) / 2, my = (min_y + max_y) / 2;
  float ci = cos(-rot), si = sin(-rot);
  float crop_x = ci * mx + (-si) * my, crop_y = si * mx + ci * my;
  float r = -rot, cr = cos(r), sr = sin(r);
  float sx = scale_x * cw / (float)out_w, sy = scale_y * ch / (float)out_h;
  float t[16] = {1, 0, 0, crop_x, 0, 1, 0, crop_y, 0, 0, 1, 0, 0, 0, 0, 1};
  float rm[16] = {cr, -sr, 0, 0, sr, cr, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  float sm[16] = {sx, 0, 0, 0, 0, sy, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  float sh[16] = {1, 0, 0, -(out_w / 2.0f), 0, 1, 0, -(out_h / 2.0f), 0, 0, 1, 0, 0, 0, 0, 1};
  mp_mat4_mul_into(t, rm);
  mp_mat4_mul_into(t, sm);
  mp_mat4_mul_into(t, sh);
  for (int i = 0; i < 16; ++i) ST(out, i, t[i]);
}

// Landmarks2TransformMatrix v1, one work item (the kernel's inverse transformation matrix).
__kernel void mp_landmarks_to_matrix_v1(__global const store_t* lm, __global store_t* out,
                                        __global const int* subset, int n_subset, int left,
                                        int right, int range, float bbox_mult, int in_h,
                                        int in_w, int out_h, int out_w) {
  if (get_global_id(0) != 0) return;
  float alpha = -atan((LDF(lm, right * 3 + 1) - LDF(lm, left * 3 + 1)) /
                      (LDF(lm, right * 3) - LDF(lm, left * 3)));
  float c = cos(alpha), s = sin(alpha);
  float max_x = -100000.0f, max_y = -100000.0f, min_x = 100000.0f, min_y = 100000.0f;
  for (int i = 0; i < n_subset; ++i) {
    float x = LDF(lm, subset[i] * 3), y = LDF(lm, subset[i] * 3 + 1);
    float rx = x * c - y * s, ry = x * s + y * c;
    max_x = fmax(max_x, rx);
    max_y = fmax(max_y, ry);
    min_x = fmin(min_x, rx);
    min_y = fmin(min_y, ry);
  }
  float rg = (float)range;
  float bw = (max_x - min_x) * bbox_mult, bh = (max_y - min_y) * bbox_mult;
  float mx = (max_x + min_x) / 2.0f, my = (max_y + min_y) / 2.0f;
  float cn = cos(-alpha), sn = sin(-alpha);
  float rmx = mx * cn - my * sn, rmy = mx * sn + my * cn;
  float hw = (in_w - 1.0f) / 2.0f, hh = (in_h - 1.0f) / 2.0f;
  float to_abs[9] = {hw, 0, hw, 0, hh, hh, 0, 0, 1};
  float rot[9] = {cn, -sn, rmx / rg * 2.0f - 1.0f, sn, cn, rmy / rg * 2.0f - 1.0f, 0, 0, 1};
  float scl[9] = {bw / rg, 0, 0, 0, bh / rg, 0, 0, 0, 1};
  float to_rel[9] = {2.0f / (out_w - 1.0f), 0, -1, 0, 2.0f / (out_h - 1.0f), -1, 0, 0, 1};
  float a[9], b[9], m[9];
  mp_mat3_mul(to_abs, rot, a);
  mp_mat3_mul(a, scl, b);
  mp_mat3_mul(b, to_rel, m);
  float res[16] = {m[0], m[1], 0, m[2], m[3], m[4], 0, m[5], m[6], m[7], m[8], 0, 0, 0, 0, 1};
  for (int i = 0; i < 16; ++i) ST(out, i, res[i]);
}
