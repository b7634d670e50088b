#version 450
// Hyper-connection collapse (qwen4exp), one invocation per output element of `[T][d]`:
// out[t][i] = (1/hc) · Σ_s σ(g[t][s][i]) · rn[t][s][i], the streams added in order, then
// scaled, as strata-engine's `ops::hyper::hc_collapse`. rn and g are `[T][hc·d]`.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; uint d; uint hc; } p;
layout(std430, binding = 0) readonly buffer Rn { float rn[]; };
layout(std430, binding = 1) readonly buffer Gt { float g[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

void main() {
    const uint i = flat_index();
    if (i >= p.n) {
        return;
    }
    const uint t = i / p.d;
    const uint c = i % p.d;
    const uint base = t * p.hc * p.d + c;
    float acc = 0.0;
    for (uint s = 0; s < p.hc; s++) {
        const uint j = base + s * p.d;
        acc += rn[j] / (1.0 + exp(-g[j]));
    }
    o[i] = acc * (1.0 / float(p.hc));
}
