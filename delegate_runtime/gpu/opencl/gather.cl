// GATHER along one axis: params seen as [outer, axis, inner], the output as
// [outer, n, inner] (n indices); out[o, j, k] = params[o, idx[j], k]. An index outside
// [0, axis) is clamped into it (TFLite's kernels refuse such an index; the GPU reads
// inside the tensor whatever it is given).
__kernel void gather_axis(__global const store_t* params, __global const int* idx,
                          __global store_t* out, int axis, int n, int inner, int total) {
  int i = get_global_id(0);
  if (i >= total) return;
  int k = i % inner, r = i / inner;
  int j = r % n, o = r / n;
  int s = clamp(idx[j], 0, axis - 1);
  ST(out, i, LD(params, (o * axis + s) * inner + k));
}

// GATHER with runtime indices: int32 values held in the storage type (exact integers).
__kernel void gather_axis_rt(__global const store_t* params, __global const store_t* idx,
                             __global store_t* out, int axis, int n, int inner, int total) {
  int i = get_global_id(0);
  if (i >= total) return;
  int k = i % inner, r = i / inner;
  int j = r % n, o = r / n;
  int s = clamp((int)rint(LDF(idx, j)), 0, axis - 1);
  ST(out, i, LD(params, (o * axis + s) * inner + k));
}

// ONE_HOT: indices seen as [outer, inner], the output as [outer, depth, inner] (the new
// axis between them); out[o, j, k] = on where idx[o, k] == j, else off (an index outside
// [0, depth) gives off everywhere). Indices are int32 values held in the storage type.
__kernel void one_hot(__global const store_t* idx, __global store_t* out, int depth,
                      int inner, int total, float on, float off) {
  int i = get_global_id(0);
  if (i >= total) return;
  int k = i % inner, r = i / inner;
  int j = r % depth, o = r / depth;
  int hot = (int)rint(LDF(idx, o * inner + k));
  ST(out, i, hot == j ? on : off);
}
