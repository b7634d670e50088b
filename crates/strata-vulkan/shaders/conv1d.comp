#version 450
// Causal depthwise convolution of one sequence's rows with its taps `dil` rows apart,
// continuing its history (strata-engine's `dilated_causal_conv1d`; dil = 1: `causal_conv1d`,
// ggml's `ssm_conv`). `in` = the `keep = (K − 1)·dil` saved rows of `state` followed by the
// sequence's n_t rows of x (rows row0.., C channels each):
//   out[row0 + t][c] = Σ_{i<K} in[t + i·dil][c] · w[c][i]   (summed over i in order)
// Invocations n_t·C … (n_t + keep)·C − 1 write the new history, the last `keep` rows of
// `in`, to state_out (a buffer of its own: the old history is still being read).
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; uint c; uint k; uint dil; uint n_t; uint row0; } p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer S { float state[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };
layout(std430, binding = 4) writeonly buffer SO { float state_out[]; };

// Row r of `in`, channel ch.
float at(uint r, uint ch, uint keep) {
    return r < keep ? state[r * p.c + ch] : x[(p.row0 + r - keep) * p.c + ch];
}

void main() {
    const uint e = flat_index();
    if (e >= p.n) {
        return;
    }
    const uint keep = (p.k - 1) * p.dil;
    const uint t = e / p.c;
    const uint ch = e % p.c;
    if (t < p.n_t) {
        float acc = 0.0;
        for (uint i = 0; i < p.k; i++) {
            acc += at(t + i * p.dil, ch, keep) * w[ch * p.k + i];
        }
        o[(p.row0 + t) * p.c + ch] = acc;
    } else {
        const uint r = t - p.n_t; // row r of the new history = row n_t + r of `in`
        state_out[r * p.c + ch] = at(p.n_t + r, ch, keep);
    }
}
