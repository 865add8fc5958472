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
    case BINARY_POW: o = pow(u, v); break;
    case BINARY_FLOOR_DIV: o = floor(u / v); break;
    case BINARY_FLOOR_MOD: {  // fmod's sign follows the divisor, as TFLite's FloorMod
      float m = fmod(u, v);
      o = (m != 0.0f && ((v < 0.0f) != (m < 0.0f))) ? m + v : m;
      break;
    }
    case BINARY_EQUAL: o = u == v ? 1.0f : 0.0f; break;
    case BINARY_NOT_EQUAL: o = u != v ? 1.0f : 0.0f; break;
    case BINARY_GREATER: o = u > v ? 1.0f : 0.0f; break;
    case BINARY_GREATER_EQUAL: o = u >= v ? 1.0f : 0.0f; break;
    case BINARY_LESS: o = u < v ? 1.0f : 0.0f; break;
    case BINARY_LESS_EQUAL: o = u <= v ? 1.0f : 0.0f; break;
    default: o = NAN; break;
  }
  // pixels oview.x values apart from channel oview.y: a concatenation's slot, or (C, 0)
  ST(out, (i / shape.w) * oview.x + oview.y + d3, EPILOGUE(o, i, d3));
}

// Unary ops: op is a UNARY_* code, p its parameter (LEAKY_RELU's alpha); an unknown code
// writes NaN. Transcendentals are computed in float whatever the storage.
__kernel void unary(__global const store_t* x, __global store_t* out, int n, int op, float p) {
  int i = get_global_id(0);
  if (i >= n) return;
  real v = LD(x, i);
  float f = (float)v;
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
    case UNARY_ABS: o = fabs(v); break;
    case UNARY_NEG: o = -v; break;
    case UNARY_SIN: o = (real)sin(f); break;
    case UNARY_COS: o = (real)cos(f); break;
    case UNARY_LOG: o = (real)log(f); break;
    case UNARY_FLOOR: o = floor(v); break;
    case UNARY_SIGN: o = (real)(f > 0.0f ? 1.0f : (f < 0.0f ? -1.0f : 0.0f)); break;
    case UNARY_SQUARE: o = (real)(f * f); break;
    case UNARY_ELU: o = (real)(f < 0.0f ? expm1(f) : f); break;
    case UNARY_GELU: o = (real)(0.5f * f * erfc(-f * 0.70710678118654752f)); break;
    case UNARY_GELU_TANH:
      o = (real)(0.5f * f * (1.0f + tanh(0.7978845608028654f * (f + 0.044715f * f * f * f))));
      break;
    case UNARY_RELU_0_TO_1: o = clamp(v, (real)0, (real)1); break;
    case UNARY_LEAKY_RELU: o = (real)(f > 0.0f ? f : p * f); break;
    case UNARY_TRUNC: o = trunc(v); break;
    case UNARY_NOT_ZERO: o = v != (real)0 ? (real)1 : (real)0; break;
    default: o = (real)NAN; break;
  }
  ST(out, i, o);
}

// x where cond else y (cond 0 or 1), each read with 4-D broadcast strides.
__kernel void select4d(__global const store_t* cond, __global const store_t* x,
                       __global const store_t* y, __global store_t* out, int4 shape, int4 cs,
                       int4 xs, int4 ys) {
  int i = get_global_id(0);
  int total = shape.x * shape.y * shape.z * shape.w;
  if (i >= total) return;
  int d3 = i % shape.w, r = i / shape.w;
  int d2 = r % shape.z; r /= shape.z;
  int d1 = r % shape.y, d0 = r / shape.y;
  float c = LDF(cond, d0 * cs.x + d1 * cs.y + d2 * cs.z + d3 * cs.w);
  int4 s = c != 0.0f ? xs : ys;
  ST(out, i, LDF(c != 0.0f ? x : y, d0 * s.x + d1 * s.y + d2 * s.z + d3 * s.w));
}
