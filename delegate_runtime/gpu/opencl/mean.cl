// Mean over the inner axes: in seen as [outer, inner, rest]; out [outer, rest], through the
// epilogue (channel: the output index modulo `channels`, the output's last axis).
__kernel void mean_axis(__global const store_t* in, __global store_t* out, int outer,
                        int inner, int rest, int channels, EPILOGUE_PARAMS) {
  int r = get_global_id(0), o = get_global_id(1);
  if (r >= rest || o >= outer) return;
  float acc = 0.0f;
  for (int i = 0; i < inner; ++i) acc += LDF(in, (o * inner + i) * rest + r);
  int at = o * rest + r;
  ST(out, at, EPILOGUE(acc / inner, at, at % channels));
}

// The same with work groups of 32 outputs x MEAN_ROWS rows, for large inner (a
// squeeze-excite over a big feature map): group (i, s, o) sums slice s of inner for outputs
// 32i..32i+31 of outer row o, its rows of items taking interleaved elements and adding
// their sums in local memory. Each group writes its sum to P; the last group of an output
// block to finish (counted per block with an atomic) adds them all, so no second launch is
// needed. One slice takes the same path: PoCL 3.1 miscompiled an early `return` for it
// before the barriers (items past `rest` then stored past `out`; tests/ops/test_gpu_mean.py).
#define MEAN_ROWS 8
__kernel __attribute__((reqd_work_group_size(32, MEAN_ROWS, 1)))
void mean_axis_wide(__global const store_t* in, __global store_t* out, int outer, int inner,
                    int rest, int channels, int per_slice, __global float* P,
                    __global int* counters, EPILOGUE_PARAMS) {
  __local float sums[MEAN_ROWS][32];
  __local int last;
  int lx = get_local_id(0), ly = get_local_id(1);
  int r = get_group_id(0) * 32 + lx, s = get_group_id(1), o = get_group_id(2);
  int slices = get_num_groups(1);
  int end = min(inner, (s + 1) * per_slice);
  float acc = 0.0f;
  if (r < rest)
    for (int i = s * per_slice + ly; i < end; i += MEAN_ROWS)
      acc += LDF(in, (o * inner + i) * rest + r);
  sums[ly][lx] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (ly == 0)
    for (int j = 1; j < MEAN_ROWS; ++j) acc += sums[j][lx];
  if (ly == 0 && r < rest) P[(o * slices + s) * rest + r] = acc;
  mem_fence(CLK_GLOBAL_MEM_FENCE);  // our partials are visible before we count ourselves
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  int block = o * get_num_groups(0) + get_group_id(0);
  if (lx == 0 && ly == 0) last = atomic_inc(&counters[block]) == slices - 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!last || ly != 0 || r >= rest) return;
  volatile __global const float* VP = P;  // bypass non-coherent caches for others' writes
  float total = 0.0f;
  for (int j = 0; j < slices; ++j) total += VP[(o * slices + j) * rest + r];
  int at = o * rest + r;
  ST(out, at, EPILOGUE(total / inner, at, at % channels));
  if (lx == 0) counters[block] = 0;  // ready for the next run
}
