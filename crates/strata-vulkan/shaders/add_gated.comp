#version 450
// out[t][i] += y[t][i] · σ(g[t]) for every element of `[T][d]` (one gate logit per row: the
// shared expert of Qwen2-MoE / Qwen3-Next), as the CPU backend's `add_gated`.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; uint d; } p;
layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer Gt { float g[]; };

void main() {
    const uint i = flat_index();
    if (i >= p.n) {
        return;
    }
    const float gate = 1.0 / (1.0 + exp(-g[i / p.d]));
    o[i] += y[i] * gate;
}
