// Strided 4-D copy: out[d] (dense, shape `shape`, at out_offset with out strides `os`)
// = in[in_offset + sum(d_k * is_k)]. Serves slice, strided slice, transpose, concat, pad.
__kernel void copy4d(__global const store_t* in, __global store_t* out, int4 shape, int4 is,
                     int in_offset, int4 os, int out_offset) {
  int i = get_global_id(0);
  int total = shape.x * shape.y * shape.z * shape.w;
  if (i >= total) return;
  int d3 = i % shape.w, r = i / shape.w;
  int d2 = r % shape.z; r /= shape.z;
  int d1 = r % shape.y, d0 = r / shape.y;
  ST(out, out_offset + d0 * os.x + d1 * os.y + d2 * os.z + d3 * os.w,
     LD(in, in_offset + d0 * is.x + d1 * is.y + d2 * is.z + d3 * is.w));
}

__kernel void fill(__global store_t* out, int n, float value) {
  int i = get_global_id(0);
  if (i < n) ST(out, i, value);
}


// Gather by a precomputed index map: out[i] = in[idx[i]], or 0 where idx[i] < 0 (padding).
// Serves any data movement that is not a 4-D strided copy (space/depth rearrangements).
__kernel void gather_index(__global const store_t* in, __global store_t* out,
                           __global const int* idx, int n) {
  int i = get_global_id(0);
  if (i >= n) return;
  int j = idx[i];
  ST(out, i, j < 0 ? (real)0 : LD(in, j));
}
