// Binary ops with 4-D broadcasting: strides are 0 on broadcast dimensions.
// op: a BINARY_* code; an unknown code writes NaN.
__kernel void binary4d(__global const store_t* x, __global const store_t* y,
                       __global store_t* out, int4 shape, int4 xs, int4 ys, int op,
                       int2 oview, EPILOGUE_PARAMS) {
  int i = get_global_id(0);
  int total = shape.x * shape.y * shape.z * shape.w;
  if (i >= total) return;
  int d3 = i % shape.w, r = i / shape.w;
  int d2 = r % shape.z; r /= shape.z;
  int d1 = r % shape.y, d0 = r / shape.y;
  float u = LDF(x, d0 * xs.x + d1 * xs.y + d2 * xs.z + d3 * xs.w);
  float v = LDF(y, d0 * ys.x + d1 * ys.y + d2 * ys.z + d3 * ys.w);
  float o;
  switch (op) {
    case BINARY_ADD: o = u + v; break;
    case BINARY_SUB: o = u - v; break;
    case BINARY_MUL: o = u * v; break;
    case BINARY_DIV: o = u / v; break;
    case BINARY_MAXIMUM: o = fmax(u, v); break;
    case BINARY_MINIMUM: o = fmin(u, v); break;
    case BINARY_SQUARED_DIFFERENCE: o = (u - v) * (u - v); break;
    case BINARY_PRELU: o = u >= 0.0f ? u : u * v; break;
    case BINARY_LOGICAL_AND: o = (u != 0.0f && v != 0.0f) ? 1.0f : 0.0f; break;
    default: o = NAN; break;
  }
  // pixels oview.x values apart from channel oview.y: a concatenation's slot, or (C, 0)
  ST(out, (i / shape.w) * oview.x + oview.y + d3, EPILOGUE(o, i, d3));
}

// Unary ops: op is a UNARY_* code; an unknown code writes NaN.
__kernel void unary(__global const store_t* x, __global store_t* out, int n, int op) {
  int i = get_global_id(0);
  if (i >= n) return;
  real v = LD(x, i);
  real o;
  switch (op) {
    case UNARY_RELU: o = fmax(v, (real)0); break;
    case UNARY_RELU6: o = clamp(v, (real)0, (real)6); break;
    case UNARY_RELU_N1_TO_1: o = clamp(v, (real)-1, (real)1); break;
    case UNARY_LOGISTIC: o = (real)(1.0f / (1.0f + exp(-(float)v))); break;
    case UNARY_TANH: o = (real)tanh((float)v); break;
    case UNARY_EXP: o = (real)exp((float)v); break;
    case UNARY_HARD_SWISH: o = v * clamp(v + (real)3, (real)0, (real)6) / (real)6; break;
    case UNARY_RSQRT: o = (real)rsqrt((float)v); break;
    case UNARY_SQRT: o = (real)sqrt((float)v); break;
    case UNARY_COPY: o = v; break;
    default: o = (real)NAN; break;
  }
  ST(out, i, o);
}
