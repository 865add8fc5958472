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
