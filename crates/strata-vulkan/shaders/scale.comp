#version 450
// x[i] *= s for i < n.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; float s; } p;
layout(std430, binding = 0) buffer X { float x[]; };
void main() {
    const uint i = flat_index();
    if (i < p.n) {
        x[i] *= p.s;
    }
}
