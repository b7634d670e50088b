#version 450
// Hyper-connection combine (qwen4exp), one invocation per element of r `[T][hc·d]`:
// r[t][s][i] += 2·σ(inj[t][s] / hc) · y[t][i], as strata-engine's `ops::hyper::hc_expand_add`.
#include "elementwise.glsl"
layout(push_constant) uniform Params { uint n; uint d; uint hc; } p;
layout(std430, binding = 0) buffer R { float r[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer Inj { float inj[]; };

void main() {
    const uint i = flat_index();
    if (i >= p.n) {
        return;
    }
    const uint ts = i / p.d; // t·hc + s
    const uint t = ts / p.hc;
    const float w = 2.0 / (1.0 + exp(-(inj[ts] / float(p.hc))));
    r[i] += w * y[t * p.d + i % p.d];
}
