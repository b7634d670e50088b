#version 450
// RoPE (Su et al. 2021) in place on x [T][row], row = heads × head_dim: one invocation per
// (token t, head, pair i < n_rot/2) rotates the pair by cs[t][2i] (cos) and cs[t][2i + 1]
// (sin). STYLE 0 (ggml NORM): pairs (2i, 2i + 1); 1 (NEOX): (i, i + n_rot/2). Dimensions
// past n_rot stay as they are.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n_t; uint row; uint head_dim; uint n_rot; uint style; } p;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer CS { float cs[]; };

void main() {
    const uint id = flat_index();
    const uint half_rot = p.n_rot / 2;
    const uint heads = p.row / p.head_dim;
    if (id >= p.n_t * heads * half_rot) {
        return;
    }
    const uint i = id % half_rot;
    const uint head = (id / half_rot) % heads;
    const uint t = id / (half_rot * heads);
    const float c = cs[t * p.n_rot + 2 * i];
    const float s = cs[t * p.n_rot + 2 * i + 1];
    const uint base = t * p.row + head * p.head_dim;
    const uint a = base + (p.style == 0 ? 2 * i : i);
    const uint b = base + (p.style == 0 ? 2 * i + 1 : i + half_rot);
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}
