// Squeeze-and-excite in one launch: the mean of x [1, inner, C] over its `inner` pixels,
// then two 1x1 convolutions on that one pixel (C -> R through w1, R -> N through w2, the
// weights [K, N]), each result through its node's epilogue (prefixes m, f, g: the MEAN's,
// the first and the second convolution's, with what they absorbed). Every work group sums
// a slice of the pixels for 32 channels, as mean_axis_wide does, and writes its sums to P;
// the last group of the whole launch to finish (one atomic counter) adds them and computes
// both convolutions, so the mean and the hidden vector never leave local memory (rounded
// to the storage precision all the same: as_stored). That one group reads every weight:
// its items load four weights each per load, four loads in flight (se_gemv).
// squeeze_excite_dw also computes x itself, a depthwise convolution (prefix d: its
// epilogue), and stores it for x's other reader: one launch instead of two.
#define SE_ROWS 8
#define SE_THREADS (32 * SE_ROWS)
#define SE_MAX 2048  // the most channels (C, R and N) this kernel takes

// Four weights of row k from column j of W [K, N] (zeros past N): one vector load where N
// is a multiple of 4.
inline float4 se_row4(__global const weight_t* W, int k, int j, int N) {
  if (N % 4 == 0) return LDW4(W, (k * N + j) / 4);
  int i = k * N + j;
  return (float4)(LDW(W, i), j + 1 < N ? LDW(W, i + 1) : 0.0f, j + 2 < N ? LDW(W, i + 2) : 0.0f,
                  j + 3 < N ? LDW(W, i + 3) : 0.0f);
}

// y[0..N) = x[0..K) times W [K, N], all the work group's items: for a block of n column
// quads, `reps` items share each quad's K terms, four weight rows in flight per item, and
// sum their parts in local memory. Ends with a barrier: y is ready for every item.
inline void se_gemv(__local const float* x, __global const weight_t* W, int K, int N,
                    __local float4* part, __local float* y, int t) {
  int quads = (N + 3) / 4;
  for (int qb = 0; qb < quads; qb += SE_THREADS) {
    int n = min(quads - qb, SE_THREADS), reps = SE_THREADS / n, j = 4 * (qb + t % n);
    int q = t / n;
    float4 s0 = (float4)(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int k = q;
    if (q < reps) {
      for (; k + 3 * reps < K; k += 4 * reps) {
        s0 += x[k] * se_row4(W, k, j, N);
        s1 += x[k + reps] * se_row4(W, k + reps, j, N);
        s2 += x[k + 2 * reps] * se_row4(W, k + 2 * reps, j, N);
        s3 += x[k + 3 * reps] * se_row4(W, k + 3 * reps, j, N);
      }
      for (; k < K; k += reps) s0 += x[k] * se_row4(W, k, j, N);
    }
    part[t] = (s0 + s1) + (s2 + s3);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < n) {
      float4 total = (float4)(0.0f);
      for (int r = 0; r < reps; ++r) total += part[r * n + t];
      int jt = 4 * (qb + t);
      y[jt] = total.x;
      if (jt + 1 < N) y[jt + 1] = total.y;
      if (jt + 2 < N) y[jt + 2] = total.z;
      if (jt + 3 < N) y[jt + 3] = total.w;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

#define EPILOGUE_PARAMS_AS(x)                                                              \
  int x##a, int2 x##k0, __global const store_t* x##p0, float4 x##s0, int2 x##k1,            \
      __global const store_t* x##p1, float4 x##s1, int2 x##k2, __global const store_t* x##p2, \
      float4 x##s2
#define EPILOGUE_ARGS_AS(x) x##a, x##k0, x##p0, x##s0, x##k1, x##p1, x##s1, x##k2, x##p2, x##s2
#define EPILOGUE_AS(x, v, o, c)                                                            \
  step(step(step(act((v), x##a), x##k0, x##p0, x##s0, (o), (c)), x##k1, x##p1, x##s1, (o),  \
            (c)),                                                                          \
       x##k2, x##p2, x##s2, (o), (c))

// The end of the first stage: the group's rows add their sums of channel r, which go to
// P; returns whether this group is the launch's last to get there (it then finishes).
inline bool se_last_group(float acc, __local float* sums, __local int* last, int r, int C,
                          __global float* P, __global int* counters) {
  int lx = get_local_id(0), ly = get_local_id(1), s = get_group_id(1);
  sums[ly * 32 + lx] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (ly == 0)
    for (int j = 1; j < SE_ROWS; ++j) acc += sums[j * 32 + lx];
  if (ly == 0 && r < C) P[s * C + r] = acc;
  mem_fence(CLK_GLOBAL_MEM_FENCE);  // our partials are visible before we count ourselves
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  int groups = get_num_groups(0) * get_num_groups(1);
  if (lx == 0 && ly == 0) *last = atomic_inc(&counters[0]) == groups - 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  return *last;
}

// The last group: the means from P's `slices` partial sums of each channel, both
// convolutions, the gate stored.
inline void se_finish(__global const float* P, int slices, int inner, int C,
                      __global const weight_t* w1, __global const float* b1, int R,
                      __global const weight_t* w2, __global const float* b2, int N,
                      __global store_t* out, __global int* counters, __local float* v,
                      __local float* h, __local float* y, __local float4* part,
                      EPILOGUE_PARAMS_AS(m), EPILOGUE_PARAMS_AS(f), EPILOGUE_PARAMS_AS(g)) {
  int t = get_local_id(1) * 32 + get_local_id(0);
  volatile __global const float* VP = P;  // bypass non-coherent caches for others' writes
  // the mean: for a block of n channels, `reps` items share each one's slices, eight
  // loads in flight
  for (int cb = 0; cb < C; cb += SE_THREADS) {
    int n = min(C - cb, SE_THREADS), reps = SE_THREADS / n, c = cb + t % n, q = t / n;
    float4 s0 = (float4)(0.0f), s1 = s0;
    int j = q;
    if (q < reps) {
      for (; j + 7 * reps < slices; j += 8 * reps) {
        s0 += (float4)(VP[j * C + c], VP[(j + reps) * C + c], VP[(j + 2 * reps) * C + c],
                       VP[(j + 3 * reps) * C + c]);
        s1 += (float4)(VP[(j + 4 * reps) * C + c], VP[(j + 5 * reps) * C + c],
                       VP[(j + 6 * reps) * C + c], VP[(j + 7 * reps) * C + c]);
      }
      for (; j < slices; j += reps) s0.x += VP[j * C + c];
    }
    s0 += s1;
    part[t] = (float4)((s0.x + s0.y) + (s0.z + s0.w), 0.0f, 0.0f, 0.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < n) {
      float total = 0.0f;
      for (int k = 0; k < reps; ++k) total += part[k * n + t].x;
      v[c] = as_stored(EPILOGUE_AS(m, total / inner, c, c));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  se_gemv(v, w1, C, R, part, y, t);  // first convolution
  for (int j = t; j < R; j += SE_THREADS)
    h[j] = as_stored(EPILOGUE_AS(f, y[j] + LDF32(b1, j), j, j));
  barrier(CLK_LOCAL_MEM_FENCE);
  se_gemv(h, w2, R, N, part, y, t);  // second convolution: the gate
  for (int c = t; c < N; c += SE_THREADS)
    ST(out, c, EPILOGUE_AS(g, y[c] + LDF32(b2, c), c, c));
  if (t == 0) counters[0] = 0;  // ready for the next run
}

#define SE_LOCALS                                              \
  __local float sums[SE_ROWS * 32];                            \
  __local float v[SE_MAX], h[SE_MAX], y[SE_MAX];               \
  __local float4 part[SE_THREADS];                             \
  __local int last;                                            \
  int lx = get_local_id(0), ly = get_local_id(1);              \
  int r = get_group_id(0) * 32 + lx, s = get_group_id(1);      \
  int end = min(inner, (s + 1) * per_slice);                   \
  float acc = 0.0f
#define SE_FINISH                                                                          \
  if (!se_last_group(acc, sums, &last, r, C, P, counters)) return;                        \
  se_finish(P, get_num_groups(1), inner, C, w1, b1, R, w2, b2, N, out, counters, v, h, y,  \
            part, EPILOGUE_ARGS_AS(m), EPILOGUE_ARGS_AS(f), EPILOGUE_ARGS_AS(g))

__kernel __attribute__((reqd_work_group_size(32, SE_ROWS, 1)))
void squeeze_excite(__global const store_t* in, __global store_t* out, int inner, int C,
                    int per_slice, __global float* P, __global int* counters,
                    __global const weight_t* w1, __global const float* b1, int R,
                    __global const weight_t* w2, __global const float* b2, int N,
                    EPILOGUE_PARAMS_AS(m), EPILOGUE_PARAMS_AS(f), EPILOGUE_PARAMS_AS(g)) {
  SE_LOCALS;
  if (r < C)
    for (int i = s * per_slice + ly; i < end; i += SE_ROWS) acc += LDF(in, i * C + r);
  SE_FINISH;
}

// Both depthwise kernels' parameters: the depthwise input dx, weights dw, bias db, shapes
// din and dout, geometry dgeo (as depthwise_at's) and epilogue d, then x, then
// squeeze_excite's own after its input.
#define SE_DW_PARAMS                                                                        \
  __global const store_t *dx, __global const weight_t *dw, __global const float *db,       \
      int4 din, int4 dout, int8 dgeo, __global store_t *x, EPILOGUE_PARAMS_AS(d),            \
      __global store_t *out, int inner, int C, int per_slice, __global float *P,             \
      __global int *counters, __global const weight_t *w1, __global const float *b1, int R, \
      __global const weight_t *w2, __global const float *b2, int N, EPILOGUE_PARAMS_AS(m),  \
      EPILOGUE_PARAMS_AS(f), EPILOGUE_PARAMS_AS(g)

// x computed here: pixel i, channel r of a depthwise convolution of `dx` (weights dw, bias
// db, shapes din and dout, geometry dgeo as depthwise_at's) through its epilogue, stored
// in x and summed as stored.
__kernel __attribute__((reqd_work_group_size(32, SE_ROWS, 1)))
void squeeze_excite_dw(SE_DW_PARAMS) {
  SE_LOCALS;
  if (r < C)
    for (int i = s * per_slice + ly; i < end; i += SE_ROWS) {
      int o = i * C + r;
      float value = EPILOGUE_AS(d, depthwise_sum(dx, dw, db, din, dout, dgeo, i, r, NO_CLAMP), o, r);
      ST(x, o, value);
      acc += as_stored(value);
    }
  SE_FINISH;
}

// The same for C % 4 == 0, four channels per item: the group's items are 8 channel quads
// x 32 rows of pixels; the rows' sums meet in local memory, and the first row of items
// goes on as squeeze_excite_dw's does with each channel's sum.
__kernel __attribute__((reqd_work_group_size(32, SE_ROWS, 1)))
void squeeze_excite_dw4(SE_DW_PARAMS) {
  SE_LOCALS;
  __local float4 quads[SE_THREADS];
  int t = ly * 32 + lx, q = t % 8, row = t / 8, c4 = get_group_id(0) * 8 + q, c = 4 * c4;
  float4 sum = (float4)(0.0f);
  if (c < C)
    for (int i = s * per_slice + row; i < end; i += SE_THREADS / 8) {
      float4 v = depthwise_sum4(dx, dw, db, din, dout, dgeo, i, c4, NO_CLAMP);
      int o = i * C + c;
      v = (float4)(EPILOGUE_AS(d, v.x, o, c), EPILOGUE_AS(d, v.y, o + 1, c + 1),
                   EPILOGUE_AS(d, v.z, o + 2, c + 2), EPILOGUE_AS(d, v.w, o + 3, c + 3));
      ST4(x, o / 4, v);
      sum += (float4)(as_stored(v.x), as_stored(v.y), as_stored(v.z), as_stored(v.w));
    }
  quads[t] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (ly == 0) {  // channel r's sum over the rows: lane lx is quad lx / 4's part lx % 4
    __local const float* lanes = (__local const float*)quads;
    for (int j = 0; j < SE_THREADS / 8; ++j) acc += lanes[4 * (j * 8 + lx / 4) + lx % 4];
  }
  SE_FINISH;
}
#undef SE_LOCALS
#undef SE_FINISH
#undef SE_DW_PARAMS
