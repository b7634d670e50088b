#version 450
// The per-head gates of a Gated DeltaNet from its `ba` projection (`[T][2·nv]`, grouped per
// key head: its r = nv / nk value heads' β logits, then their α logits), as strata-engine's
// CPU backend: β = σ(b), log_decay = softplus(α + dt_bias)·a (softplus(x) = x above 20, as
// ggml), both `[T][nv]`. One invocation per (token, value head).
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; uint nv; uint r; } p;
layout(std430, binding = 0) readonly buffer BA { float ba[]; };
layout(std430, binding = 1) readonly buffer DT { float dt_bias[]; };
layout(std430, binding = 2) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer Beta { float beta[]; };
layout(std430, binding = 4) writeonly buffer LD { float log_decay[]; };

void main() {
    const uint e = flat_index();
    if (e >= p.n) {
        return;
    }
    const uint t = e / p.nv;
    const uint vh = e % p.nv;
    const uint base = t * 2 * p.nv + (vh / p.r) * 2 * p.r + vh % p.r;
    beta[e] = 1.0 / (1.0 + exp(-ba[base]));
    const float x = ba[base + p.r] + dt_bias[vh];
    const float sp = x > 20.0 ? x : log(1.0 + exp(x));
    log_decay[e] = sp * a[vh];
}
