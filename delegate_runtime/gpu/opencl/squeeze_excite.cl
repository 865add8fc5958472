// Squeeze-and-excite in one launch: the mean of x [1, inner, C] over its `inner` pixels,
// then two 1x1 convolutions on that one pixel (C -> R through w1, R -> N through w2, the
// weights [K, N]), each result through its node's epilogue (prefixes m, f, g: the MEAN's,
// the first and the second convolution's, with what they absorbed). Every work group sums
// a slice of the pixels for 32 channels, as mean_axis_wide does, and writes its sums to P;
// the last group of the whole launch to finish (one atomic counter) adds them and computes
// both convolutions, so the mean and the hidden vector never leave local memory (rounded
// to the storage precision all the same: as_stored).
#define SE_ROWS 8
#define SE_THREADS (32 * SE_ROWS)
#define SE_MAX 2048  // the most channels (C, R and N) this kernel takes
#define SE_OUT (SE_MAX / SE_THREADS)  // second-convolution outputs per item

#define EPILOGUE_PARAMS_AS(x)                                                              \
  int x##a, int2 x##k0, __global const store_t* x##p0, float4 x##s0, int2 x##k1,            \
      __global const store_t* x##p1, float4 x##s1, int2 x##k2, __global const store_t* x##p2, \
      float4 x##s2
#define EPILOGUE_AS(x, v, o, c)                                                            \
  step(step(step(act((v), x##a), x##k0, x##p0, x##s0, (o), (c)), x##k1, x##p1, x##s1, (o),  \
            (c)),                                                                          \
       x##k2, x##p2, x##s2, (o), (c))

__kernel __attribute__((reqd_work_group_size(32, SE_ROWS, 1)))
void squeeze_excite(__global const store_t* in, __global store_t* out, int inner, int C,
                    int per_slice, __global float* P, __global int* counters,
                    __global const store_t* w1, __global const store_t* b1, int R,
                    __global const store_t* w2, __global const store_t* b2, int N,
                    EPILOGUE_PARAMS_AS(m), EPILOGUE_PARAMS_AS(f), EPILOGUE_PARAMS_AS(g)) {
  __local float sums[SE_ROWS][32];
  __local float v[SE_MAX], h[SE_MAX], part[SE_THREADS];
  __local int last;
  int lx = get_local_id(0), ly = get_local_id(1), t = ly * 32 + lx;
  int r = get_group_id(0) * 32 + lx, s = get_group_id(1), slices = get_num_groups(1);
  int end = min(inner, (s + 1) * per_slice);
  float acc = 0.0f;
  if (r < C)
    for (int i = s * per_slice + ly; i < end; i += SE_ROWS) acc += LDF(in, i * C + r);
  sums[ly][lx] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (ly == 0)
    for (int j = 1; j < SE_ROWS; ++j) acc += sums[j][lx];
  if (ly == 0 && r < C) P[s * C + r] = acc;
  mem_fence(CLK_GLOBAL_MEM_FENCE);  // our partials are visible before we count ourselves
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  int groups = get_num_groups(0) * slices;
  if (t == 0) last = atomic_inc(&counters[0]) == groups - 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!last) return;
  volatile __global const float* VP = P;  // bypass non-coherent caches for others' writes
  // the mean: the 8 rows of items share each channel's slices
  for (int cb = 0; cb < C; cb += 32) {
    int c = cb + lx;
    float total = 0.0f;
    if (c < C)
      for (int j = ly; j < slices; j += SE_ROWS) total += VP[j * C + c];
    sums[ly][lx] = total;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (ly == 0 && c < C) {
      for (int j = 1; j < SE_ROWS; ++j) total += sums[j][lx];
      v[c] = as_stored(EPILOGUE_AS(m, total / inner, c, c));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  // first convolution: for a block of n outputs, `reps` items share each one's C terms
  for (int jb = 0; jb < R; jb += SE_THREADS) {
    int n = min(R - jb, SE_THREADS), reps = SE_THREADS / n, j = jb + t % n, q = t / n;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int c = q;
    if (q < reps) {
      for (; c + 3 * reps < C; c += 4 * reps) {  // four loads in flight
        s0 += v[c] * LDF(w1, c * R + j);
        s1 += v[c + reps] * LDF(w1, (c + reps) * R + j);
        s2 += v[c + 2 * reps] * LDF(w1, (c + 2 * reps) * R + j);
        s3 += v[c + 3 * reps] * LDF(w1, (c + 3 * reps) * R + j);
      }
      for (; c < C; c += reps) s0 += v[c] * LDF(w1, c * R + j);
    }
    part[t] = (s0 + s1) + (s2 + s3);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < n) {
      float total = LDF(b1, jb + t);
      for (int k = 0; k < reps; ++k) total += part[k * n + t];
      h[jb + t] = as_stored(EPILOGUE_AS(f, total, jb + t, jb + t));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  // second convolution: each item SE_OUT outputs at a stride, their loads side by side
  float out_acc[SE_OUT];
  for (int o = 0; o < SE_OUT; ++o) out_acc[o] = 0.0f;
  for (int k = 0; k < R; ++k) {
    float hk = h[k];
    for (int o = 0; o < SE_OUT; ++o) {
      int c = t + o * SE_THREADS;
      if (c < N) out_acc[o] += hk * LDF(w2, k * N + c);
    }
  }
  for (int o = 0; o < SE_OUT; ++o) {
    int c = t + o * SE_THREADS;
    if (c < N) ST(out, c, EPILOGUE_AS(g, out_acc[o] + LDF(b2, c), c, c));
  }
  if (t == 0) counters[0] = 0;  // ready for the next run
}
