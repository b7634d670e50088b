#version 450
// a[i] += b[i] for i < n.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; } p;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
void main() {
    const uint i = flat_index();
    if (i < p.n) {
        a[i] += b[i];
    }
}
