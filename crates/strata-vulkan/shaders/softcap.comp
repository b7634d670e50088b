#version 450
// Gemma's logit soft cap: x[i] = cap · tanh(x[i] / cap) for i < n.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; float cap; } p;
layout(std430, binding = 0) buffer X { float x[]; };
void main() {
    const uint i = flat_index();
    if (i < p.n) {
        x[i] = tanh(x[i] / p.cap) * p.cap;
    }
}
