#version 450
// Attention of one (head, query row) per workgroup over a list of cached positions (QSA's
// kept tokens, qwen4exp), with the online softmax of attention.comp. idx holds, for query t
// of this sequence, idx[2t] = the offset in idx of its positions and idx[2t + 1] = their
// count; a query with none is left as it is (a dense query, written by attention.comp).
// The cache is f32 or f16 (KV_F16, kv_cache.glsl). With round_q != 0 (the host cache holds f16
// values) the queries are rounded to f16 first, as strata-engine's sparse path does
// (`ops/attention/listed.rs`, the dense kernel's arithmetic) and attention.comp does.
layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params {
    uint n_t;
    uint row0;
    uint n_head;
    uint n_kv_head;
    uint head_dim;
    float scale;
    uint round_q;
} p;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
#include "kv_cache.glsl"
layout(std430, binding = 3) buffer O { float o[]; };
layout(std430, binding = 4) readonly buffer Idx { uint idx[]; };

const uint MAX_HD = 256;
const uint PER = MAX_HD / 32;
shared float qs[MAX_HD];
shared float sc[WG];

void main() {
    const uint h = gl_WorkGroupID.x;
    const uint t = gl_WorkGroupID.y;
    if (h >= p.n_head || t >= p.n_t) {
        return; // uniform across the workgroup
    }
    const uint off = idx[2 * t];
    const uint cnt = idx[2 * t + 1];
    if (cnt == 0) {
        return; // uniform across the workgroup
    }
    const uint tid = gl_LocalInvocationID.x;
    const uint hd = p.head_dim;
    const uint kv_row = p.n_kv_head * hd;
    const uint kv_off = (h / (p.n_head / p.n_kv_head)) * hd;
    const uint qo = (p.row0 + t) * p.n_head * hd + h * hd;
    for (uint i = tid; i < hd; i += WG) {
        const float x = q[qo + i];
        qs[i] = p.round_q != 0 ? unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x : x;
    }
    barrier();
    float acc[PER];
    for (uint r = 0; r < PER; r++) {
        acc[r] = 0.0;
    }
    float m = -1.0 / 0.0;
    float l = 0.0;
    for (uint c = 0; c < cnt; c += WG) {
        const uint j = c + tid;
        float s = -1.0 / 0.0;
        if (j < cnt) {
            const uint kb = idx[off + j] * kv_row + kv_off;
            float d = 0.0;
            for (uint i = 0; i < hd; i++) {
                d += qs[i] * k_at(kb + i);
            }
            s = d * p.scale;
        }
        sc[tid] = s;
        barrier();
        const uint n = min(WG, cnt - c);
        float cm = m;
        for (uint i = 0; i < n; i++) {
            cm = max(cm, sc[i]);
        }
        const float corr = exp(m - cm);
        l *= corr;
        for (uint r = 0; r < PER; r++) {
            acc[r] *= corr;
        }
        for (uint i = 0; i < n; i++) {
            const float w = exp(sc[i] - cm);
            l += w;
            const uint vb = idx[off + c + i] * kv_row + kv_off;
            for (uint r = 0; r < PER; r++) {
                const uint d = tid + r * WG;
                if (d < hd) {
                    acc[r] += w * v_at(vb + d);
                }
            }
        }
        m = cm;
        barrier();
    }
    for (uint r = 0; r < PER; r++) {
        const uint d = tid + r * WG;
        if (d < hd) {
            o[qo + d] = acc[r] / l;
        }
    }
}
