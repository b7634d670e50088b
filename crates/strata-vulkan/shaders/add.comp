#version 450
// a[i] += b[i % period] for i < n: an element-wise add (period = n) or a row added to every
// row of a [T][period] buffer (a bias).
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; uint period; } p;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
void main() {
    const uint i = flat_index();
    if (i < p.n) {
        a[i] += b[i % p.period];
    }
}
