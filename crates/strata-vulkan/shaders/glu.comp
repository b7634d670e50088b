#version 450
// gate[i] = act(gate[i]) · up[i] for i < n. ACT 0: SwiGLU, silu(g) = g·σ(g) (Shazeer 2020).
// ACT 1: GeGLU with tanh-GELU at the f16-rounded g, rounded to f16, 0 below -10 and g above
// 10 (ggml-cpu's table form, as strata-engine's `geglu_tanh`).
#include "elementwise.glsl"
layout(constant_id = 1) const uint ACT = 0;
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };

float to_f16(float v) {
    return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x;
}

void main() {
    const uint i = flat_index();
    if (i >= p.n) {
        return;
    }
    const float g = gate[i];
    float a;
    if (ACT == 0) {
        a = g / (1.0 + exp(-g));
    } else if (g <= -10.0) {
        a = 0.0;
    } else if (g >= 10.0) {
        a = g;
    } else {
        const float h = to_f16(g);
        a = to_f16(0.5 * h * (1.0 + tanh(0.7978846 * h * (1.0 + 0.044715 * h * h))));
    }
    gate[i] = a * up[i];
}
