// SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD over any axes of a 4-D tensor, accumulated in
// float whatever the storage (a long sum in half would stop growing at 2048). `shape` is
// the output's 4-D shape (the input's with the reduced axes 1), `box` the extents reduced
// (1 on kept axes), `is` the input's strides; op a REDUCE_* code (an unknown code writes
// NaN). MAX and MIN start from TFLite's lowest()/max(), not infinities.
inline float reduce_init(int op) {
  switch (op) {
    case REDUCE_SUM: return 0.0f;
    case REDUCE_MAX: return -MAXFLOAT;
    case REDUCE_MIN: return MAXFLOAT;
    case REDUCE_PROD: return 1.0f;
    default: return NAN;
  }
}

inline float reduce_step(int op, float acc, float v) {
  switch (op) {
    case REDUCE_SUM: return acc + v;
    case REDUCE_MAX: return v > acc ? v : acc;
    case REDUCE_MIN: return v < acc ? v : acc;
    case REDUCE_PROD: return acc * v;
    default: return NAN;
  }
}

// One item per output element.
__kernel void reduce4d(__global const store_t* in, __global store_t* out, int4 shape,
                       int4 box, int4 is, int op) {
  int i = get_global_id(0);
  int total = shape.x * shape.y * shape.z * shape.w;
  if (i >= total) return;
  int d3 = i % shape.w, r = i / shape.w;
  int d2 = r % shape.z; r /= shape.z;
  int d1 = r % shape.y, d0 = r / shape.y;
  int base = d0 * is.x + d1 * is.y + d2 * is.z + d3 * is.w;
  float acc = reduce_init(op);
  for (int a = 0; a < box.x; ++a)
    for (int b = 0; b < box.y; ++b)
      for (int c = 0; c < box.z; ++c) {
        int at = base + a * is.x + b * is.y + c * is.z;
        for (int e = 0; e < box.w; ++e) acc = reduce_step(op, acc, LDF(in, at + e * is.w));
      }
  ST(out, i, acc);
}

// The same for long reductions: one work group of 256 items per output element, item l
// taking elements l, l + 256, ... of the box (in its row-major order: neighbours read
// neighbours where the last axis is reduced), the items' results combined in local memory.
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void reduce4d_wide(__global const store_t* in, __global store_t* out, int4 shape,
                   int4 box, int4 is, int op) {
  __local float part[256];
  int i = get_group_id(0), l = get_local_id(0);
  int d3 = i % shape.w, r = i / shape.w;
  int d2 = r % shape.z; r /= shape.z;
  int d1 = r % shape.y, d0 = r / shape.y;
  int base = d0 * is.x + d1 * is.y + d2 * is.z + d3 * is.w;
  int count = box.x * box.y * box.z * box.w;
  float acc = reduce_init(op);
  for (int j = l; j < count; j += 256) {
    int e = j % box.w, q = j / box.w;
    int c = q % box.z; q /= box.z;
    int b = q % box.y, a = q / box.y;
    acc = reduce_step(op, acc, LDF(in, base + a * is.x + b * is.y + c * is.z + e * is.w));
  }
  part[l] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = 128; s > 0; s >>= 1) {
    if (l < s) part[l] = reduce_step(op, part[l], part[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) ST(out, i, part[0]);
}
