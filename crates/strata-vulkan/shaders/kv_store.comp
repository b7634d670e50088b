#version 450
// Appends a sequence's keys and values to its cache: cache[(pos0 + t)·row + i] =
// src[(row0 + t)·row + i] for t < n_t, i < row, for keys and values at once. With round ≠ 0
// the values are rounded through f16, as the host's f16 cache stores them (an f32 cache).
// With KV_F16 the cache is f16, two to a word (kv_cache.glsl): one invocation writes an
// element pair, n counts pairs and row is even (checked by the host).
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; uint row; uint row0; uint pos0; uint round_f16; } p;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
#ifdef KV_F16
layout(std430, binding = 2) writeonly buffer KC { uint kc[]; };
layout(std430, binding = 3) writeonly buffer VC { uint vc[]; };
#else
layout(std430, binding = 2) writeonly buffer KC { float kc[]; };
layout(std430, binding = 3) writeonly buffer VC { float vc[]; };

float store(float x) {
    return p.round_f16 != 0 ? unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x : x;
}
#endif

void main() {
    const uint e = flat_index();
    if (e >= p.n) {
        return;
    }
#ifdef KV_F16
    const uint t = (2 * e) / p.row;
    const uint i = (2 * e) % p.row;
    const uint src = (p.row0 + t) * p.row + i;
    const uint dst = ((p.pos0 + t) * p.row + i) / 2;
    kc[dst] = packHalf2x16(vec2(k[src], k[src + 1]));
    vc[dst] = packHalf2x16(vec2(v[src], v[src + 1]));
#else
    const uint t = e / p.row;
    const uint i = e % p.row;
    const uint src = (p.row0 + t) * p.row + i;
    const uint dst = (p.pos0 + t) * p.row + i;
    kc[dst] = store(k[src]);
    vc[dst] = store(v[src]);
#endif
}
