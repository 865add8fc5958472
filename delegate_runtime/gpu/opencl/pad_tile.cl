// Padding with a constant, mirror padding and tiling of tensors up to 4-D (seen as 4-D,
// leading dimensions 1). Each work item writes one output element.

// The input coordinate an output coordinate `d` reads along a dimension of `size`, padded
// by `before` in front; -1 where it lies in the padding.
inline int pad_inside(int d, int before, int size) {
  int s = d - before;
  return (s >= 0 && s < size) ? s : -1;
}

// Constant padding (PADV2): out = in where inside it, else value[0].
__kernel void pad_constant4d(__global const store_t* in, __global store_t* out,
                             __global const store_t* value, int4 in_shape, int4 out_shape,
                             int4 before) {
  int i = get_global_id(0);
  int total = out_shape.x * out_shape.y * out_shape.z * out_shape.w;
  if (i >= total) return;
  int d3 = i % out_shape.w, r = i / out_shape.w;
  int d2 = r % out_shape.z; r /= out_shape.z;
  int d1 = r % out_shape.y, d0 = r / out_shape.y;
  int s0 = pad_inside(d0, before.x, in_shape.x), s1 = pad_inside(d1, before.y, in_shape.y);
  int s2 = pad_inside(d2, before.z, in_shape.z), s3 = pad_inside(d3, before.w, in_shape.w);
  if (s0 < 0 || s1 < 0 || s2 < 0 || s3 < 0) {
    ST(out, i, LD(value, 0));
    return;
  }
  ST(out, i, LD(in, ((s0 * in_shape.y + s1) * in_shape.z + s2) * in_shape.w + s3));
}

// The input coordinate an output coordinate `d` mirrors along a dimension of `size`,
// padded by `before` in front: about the edge (REFLECT, edge 0) or with the edge element
// repeated (SYMMETRIC, edge 1). Paddings are at most size - 1 + edge, so one mirror does.
inline int mirror_source(int d, int before, int size, int edge) {
  int s = d - before;
  if (s < 0) s = -s - edge;
  if (s >= size) s = 2 * size - 2 - s + edge;
  return s;
}

// Mirror padding (MIRROR_PAD): `edge` 0 for REFLECT, 1 for SYMMETRIC.
__kernel void mirror_pad4d(__global const store_t* in, __global store_t* out, int4 in_shape,
                           int4 out_shape, int4 before, int edge) {
  int i = get_global_id(0);
  int total = out_shape.x * out_shape.y * out_shape.z * out_shape.w;
  if (i >= total) return;
  int d3 = i % out_shape.w, r = i / out_shape.w;
  int d2 = r % out_shape.z; r /= out_shape.z;
  int d1 = r % out_shape.y, d0 = r / out_shape.y;
  int s0 = mirror_source(d0, before.x, in_shape.x, edge);
  int s1 = mirror_source(d1, before.y, in_shape.y, edge);
  int s2 = mirror_source(d2, before.z, in_shape.z, edge);
  int s3 = mirror_source(d3, before.w, in_shape.w, edge);
  ST(out, i, LD(in, ((s0 * in_shape.y + s1) * in_shape.z + s2) * in_shape.w + s3));
}

// Tiling (TILE): out[d] = in[d mod in_shape], dimension by dimension.
__kernel void tile4d(__global const store_t* in, __global store_t* out, int4 in_shape,
                     int4 out_shape) {
  int i = get_global_id(0);
  int total = out_shape.x * out_shape.y * out_shape.z * out_shape.w;
  if (i >= total) return;
  int d3 = i % out_shape.w, r = i / out_shape.w;
  int d2 = r % out_shape.z; r /= out_shape.z;
  int d1 = r % out_shape.y, d0 = r / out_shape.y;
  int s = (((d0 % in_shape.x) * in_shape.y + d1 % in_shape.y) * in_shape.z + d2 % in_shape.z)
          * in_shape.w + d3 % in_shape.w;
  ST(out, i, LD(in, s));
}
