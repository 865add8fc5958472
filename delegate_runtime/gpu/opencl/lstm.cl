// Basic LSTM cell (TFLite's LstmCell) after its fully-connected layer: gates in the order
// input, candidate, forget, output. One work item per (batch, unit).
__kernel void lstm_basic_gates(__global const store_t* gates, __global const store_t* prev_c,
                               __global store_t* h_out, __global store_t* c_out, int batch,
                               int units) {
  int i = get_global_id(0);
  if (i >= batch * units) return;
  int b = i / units, u = i % units, g = b * 4 * units + u;
  float in_g = 1.0f / (1.0f + exp(-LDF(gates, g)));
  float cand = tanh(LDF(gates, g + units));
  float forget = 1.0f / (1.0f + exp(-LDF(gates, g + 2 * units)));
  float out_g = 1.0f / (1.0f + exp(-LDF(gates, g + 3 * units)));
  float c = in_g * cand + forget * LDF(prev_c, i);
  ST(c_out, i, c);
  ST(h_out, i, out_g * tanh(c));
}
