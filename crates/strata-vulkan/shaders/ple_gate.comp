#version 450
// PLE gate (qwen4exp), one workgroup per (stream s, row t): the score σₛ = key[t][s] ·
// qry[t][s] / √d reduced in shared memory, then out[t][s][i] = σ(sign(σₛ)·√max(|σₛ|, 1e-6))
// · val[t][i], as strata-engine's `ops::ple::ple_gate` (sign(0) = 0). key, qry, out:
// `[T][hc·d]`; val: `[T][d]`.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params { uint n_t; uint d; uint hc; } p;
layout(std430, binding = 0) readonly buffer Key { float key[]; };
layout(std430, binding = 1) readonly buffer Qry { float qry[]; };
layout(std430, binding = 2) readonly buffer Val { float val[]; };
layout(std430, binding = 3) writeonly buffer Out { float o[]; };

shared float part[WG];

void main() {
    const uint s = gl_WorkGroupID.x;
    const uint t = gl_WorkGroupID.y;
    if (s >= p.hc || t >= p.n_t) {
        return; // uniform across the workgroup
    }
    const uint tid = gl_LocalInvocationID.x;
    const uint base = (t * p.hc + s) * p.d;
    float acc = 0.0;
    for (uint i = tid; i < p.d; i += WG) {
        acc += key[base + i] * qry[base + i];
    }
    part[tid] = acc;
    barrier();
    for (uint w = WG / 2; w > 0; w /= 2) {
        if (tid < w) {
            part[tid] += part[tid + w];
        }
        barrier();
    }
    const float score = part[0] * (1.0 / sqrt(float(p.d)));
    const float sgn = score == 0.0 ? 0.0 : sign(score);
    const float gate = 1.0 / (1.0 + exp(-(sgn * sqrt(max(abs(score), 1e-6)))));
    for (uint i = tid; i < p.d; i += WG) {
        o[base + i] = gate * val[t * p.d + i];
    }
}
