// kind POOL_AVERAGE (counting only inside the input) or POOL_MAX; an unknown kind writes NaN.
__kernel void pool2d(__global const store_t* in, __global store_t* out, int4 in_shape,
                     int4 out_shape, int kh, int kw, int sh, int sw, int pad_t, int pad_l,
                     int kind, int2 oview, EPILOGUE_PARAMS) {
  int c = get_global_id(0), x = get_global_id(1), ny = get_global_id(2);
  int C = out_shape.w, OH = out_shape.y, OW = out_shape.z;
  if (c >= C || x >= OW || ny >= out_shape.x * OH) return;
  int n = ny / OH, y = ny % OH;
  // pixels oview.x values apart from channel oview.y: a concatenation's slot, or (C, 0)
  int at = ((n * OH + y) * OW + x) * oview.x + oview.y + c;
  if (kind != POOL_AVERAGE && kind != POOL_MAX) {
    ST(out, at, NAN);
    return;
  }
  bool is_max = kind == POOL_MAX;
  float acc = is_max ? -INFINITY : 0.0f;
  int count = 0;
  // each window clipped to the input (as LiteRT), so a huge filter costs only the input
  long y0 = (long)y * sh - pad_t, x0 = (long)x * sw - pad_l;
  int ky0 = (int)clamp(-y0, 0L, (long)kh), ky1 = (int)clamp(in_shape.y - y0, 0L, (long)kh);
  int kx0 = (int)clamp(-x0, 0L, (long)kw), kx1 = (int)clamp(in_shape.z - x0, 0L, (long)kw);
  for (int ky = ky0; ky < ky1; ++ky) {
    int iy = (int)(y0 + ky);
    for (int kx = kx0; kx < kx1; ++kx) {
      int ix = (int)(x0 + kx);
      float v = LDF(in, ((n * in_shape.y + iy) * in_shape.z + ix) * C + c);
      acc = is_max ? fmax(acc, v) : acc + v;
      ++count;
    }
  }
  if (!is_max) acc = count ? acc / count : 0.0f;
  int o = ((n * OH + y) * OW + x) * C + c;
  ST(out, at, EPILOGUE(acc, o, c));
}
