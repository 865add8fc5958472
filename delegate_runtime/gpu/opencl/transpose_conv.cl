// Transposed convolution: one work item per output element gathers its contributions.
// Weights OHWI [OC, KH, KW, IC].
__kernel void transpose_conv2d(__global const store_t* in, __global const weight_t* w,
                               __global const float* bias, __global store_t* out,
                               int4 in_shape, int4 out_shape, int kh, int kw, int sh, int sw,
                               int pad_t, int pad_l, EPILOGUE_PARAMS) {
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
  int o = ((n * OH + y) * OW + x) * OC + oc;
  ST(out, o, EPILOGUE(acc, o, oc));
}
