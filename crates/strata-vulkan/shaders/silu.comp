#version 450
// x[i] = silu(x[i]) = x·σ(x) for i < n.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) buffer X { float x[]; };
void main() {
    const uint i = flat_index();
    if (i < p.n) {
        const float v = x[i];
        x[i] = v / (1.0 + exp(-v));
    }
}
