// BATCH_MATMUL: out[b0, b1, m, n] = sum over k of x[b0, b1, m, k] * y[b0, b1, k, n], in
// float whatever the storage. `shape` is the output's (B0, B1, M, N); x is read through
// xs = (b0, b1, m, k) strides and y through ys = (b0, b1, k, n): 0 on a broadcast batch
// axis, an adjoint's matrix strides swapped. One item per output element.
__kernel void batch_matmul4d(__global const store_t* x, __global const store_t* y,
                             __global store_t* out, int4 shape, int4 xs, int4 ys, int k) {
  int i = get_global_id(0);
  int total = shape.x * shape.y * shape.z * shape.w;
  if (i >= total) return;
  int n = i % shape.w, r = i / shape.w;
  int m = r % shape.z; r /= shape.z;
  int b1 = r % shape.y, b0 = r / shape.y;
  int xa = b0 * xs.x + b1 * xs.y + m * xs.z;
  int ya = b0 * ys.x + b1 * ys.y + n * ys.w;
  float acc = 0.0f;
  for (int j = 0; j < k; ++j) acc += LDF(x, xa + j * xs.w) * LDF(y, ya + j * ys.z);
  ST(out, i, acc);
}
