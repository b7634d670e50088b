#version 450
// Multiplicative gates, x[i] *= f(g[i]) for i < n. MODE 0: f = silu (the output gate of a
// Gated DeltaNet, strata-engine's `mul_silu_in_place`); MODE 1: f = σ (gated attention's
// output gate, the CPU backend's `mul_sigmoid`).
#include "elementwise.glsl"
layout(constant_id = 1) const uint MODE = 0;
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gt { float g[]; };

void main() {
    const uint i = flat_index();
    if (i >= p.n) {
        return;
    }
    const float v = g[i];
    x[i] *= MODE == 0 ? v / (1.0 + exp(-v)) : 1.0 / (1.0 + exp(-v));
}
