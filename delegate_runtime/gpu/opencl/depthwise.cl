// Depthwise convolution (the general kernel and the 3x3 one of 4 channels per item).
// More 3x3 variants come from depthwise3x3.cl.in.

// Depthwise convolution, one work item per output element. Weights [1, KH, KW, OC]. Each
// input value is clamped to `iclamp` as it is loaded (a RELU before it that fusion elided;
// (-inf, inf) otherwise).
__kernel void depthwise_conv2d(__global const store_t* in, __global const weight_t* w,
                               __global const float* bias, __global store_t* out,
                               int4 in_shape, int4 out_shape, int kh, int kw, int sh, int sw,
                               int dh, int dw, int pad_t, int pad_l, int mult, float2 iclamp,
                               EPILOGUE_PARAMS) {
  int oc = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int OC = out_shape.w, OH = out_shape.y, OW = out_shape.z, C = in_shape.w;
  if (oc >= OC || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH, ic = oc / mult;
  float acc = LDF32(bias, oc);
  for (int ky = 0; ky < kh; ++ky) {
    int iy = y * sh - pad_t + ky * dh;
    if (iy < 0 || iy >= in_shape.y) continue;
    for (int kx = 0; kx < kw; ++kx) {
      int ix = x * sw - pad_l + kx * dw;
      if (ix < 0 || ix >= in_shape.z) continue;
      float v = LDF(in, ((n * in_shape.y + iy) * in_shape.z + ix) * C + ic);
      v = v < iclamp.x ? iclamp.x : v > iclamp.y ? iclamp.y : v;  // (-inf, inf): v, NaN too
      acc += v * LDW(w, (ky * kw + kx) * OC + oc);
    }
  }
  int o = ((n * OH + y) * OW + x) * OC + oc;
  ST(out, o, EPILOGUE(acc, o, oc));
}

// Depthwise 3x3, 4 channels per work item (C % 4 == 0, multiplier 1).
__kernel void depthwise3x3_c4(__global const store_t* in, __global const weight_t* w,
                              __global const float* bias, __global store_t* out,
                              int4 in_shape, int4 out_shape, int sh, int sw,
                              int pad_t, int pad_l, EPILOGUE_PARAMS) {
  int c4 = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c4 * 4 >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH, c = c4 * 4;
  float4 acc = vload4(0, bias + c);
  for (int ky = 0; ky < 3; ++ky) {
    int iy = y * sh - pad_t + ky;
    if (iy < 0 || iy >= in_shape.y) continue;
    for (int kx = 0; kx < 3; ++kx) {
      int ix = x * sw - pad_l + kx;
      if (ix < 0 || ix >= in_shape.z) continue;
      int ib = ((n * in_shape.y + iy) * in_shape.z + ix) * C + c;
      int wb = (ky * 3 + kx) * C + c;
      acc += LD4(in, ib / 4) * LDW4(w, wb / 4);
    }
  }
  int ob = ((n * OH + y) * OW + x) * C + c;
  float4 r = (float4)(EPILOGUE(acc.x, ob, c), EPILOGUE(acc.y, ob + 1, c + 1),
                      EPILOGUE(acc.z, ob + 2, c + 2), EPILOGUE(acc.w, ob + 3, c + 3));
#ifdef STORAGE_HALF
  vstorea_half4(r, 0, out + ob);
#else
  vstore4(r, 0, out + ob);
#endif
}
