#version 450
// Causal attention of one (head, query row) per workgroup over its sequence's cached keys and
// values, with an online softmax (Milakov & Gimelshein 2018): the keys are taken WG at a time,
// each invocation scores one key of the chunk (q·k · scale), then every invocation folds the
// chunk into the running maximum and sum (all of them, redundantly, from shared memory) and
// into the output dimensions it owns (d = tid, tid + WG, …). GQA: query head h reads key/value
// head h / (n_head / n_kv_head). A sliding window keeps keys at positions > pos − window.
// The cache is [position][n_kv_head · head_dim], f32 or f16 (KV_F16, kv_cache.glsl); q and out are the run's [T][n_head ·
// head_dim] buffers, this sequence's rows starting at row0. With round_q ≠ 0 the queries are
// rounded to f16 first, as the CPU does over an f16 cache (llama.cpp's flash attention).
layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params {
    uint n_t;
    uint row0;
    uint pos0;
    uint n_head;
    uint n_kv_head;
    uint head_dim;
    float scale;
    uint window;
    uint round_q;
} p;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
#include "kv_cache.glsl"
layout(std430, binding = 3) writeonly buffer O { float o[]; };

// head_dim ≤ MAX_HD (checked by the host); WG ≥ 32, so an invocation owns ≤ 8 dimensions.
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
    const uint pos = p.pos0 + t;
    const uint end = pos + 1;
    const uint lo = (p.window > 0 && end > p.window) ? end - p.window : 0;
    float acc[PER];
    for (uint r = 0; r < PER; r++) {
        acc[r] = 0.0;
    }
    float m = -1.0 / 0.0;
    float l = 0.0;
    for (uint c = lo; c < end; c += WG) {
        const uint j = c + tid;
        float s = -1.0 / 0.0;
        if (j < end) {
            const uint kb = j * kv_row + kv_off;
            float d = 0.0;
            for (uint i = 0; i < hd; i++) {
                d += qs[i] * k_at(kb + i);
            }
            s = d * p.scale;
        }
        sc[tid] = s;
        barrier();
        const uint n = min(WG, end - c);
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
            const uint vb = (c + i) * kv_row + kv_off;
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
