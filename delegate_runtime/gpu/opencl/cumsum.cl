// CUMSUM along one axis: in and out seen as [outer, len, inner], one item per line
// (outer x inner of them) walking its len elements, summing in float whatever the
// storage. exclusive: each output leaves its own element out; reverse: from the end.
__kernel void cumsum_axis(__global const store_t* in, __global store_t* out, int outer,
                          int len, int inner, int exclusive, int reverse) {
  int i = get_global_id(0);
  if (i >= outer * inner) return;
  int o = i / inner, r = i % inner;
  int step = reverse ? -inner : inner;
  int at = (o * len + (reverse ? len - 1 : 0)) * inner + r;
  float acc = 0.0f;
  for (int j = 0; j < len; ++j, at += step) {
    float v = LDF(in, at);
    if (exclusive) {
      ST(out, at, acc);
      acc += v;
    } else {
      acc += v;
      ST(out, at, acc);
    }
  }
}
