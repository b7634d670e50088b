#version 450
// The gated delta rule (Yang, Kautz & Hatamizadeh 2024) over one sequence's n_t rows
// (rows row0..), continuing its state: strata-engine's `delta_rule_recurrent`. One invocation
// per (value head h, value dimension j): column j of the head's state S (`[d_k][d_v]`
// row-major, S[i][j] at state[(h·dk + i)·dv + j]) evolves on its own, token by token:
//   S ← exp(log_decay)·S;  δ_j = β·(v_j − Σ_i S[i][j]·k_i);  S[i][j] += k_i·δ_j;
//   o_j = (Σ_i S[i][j]·q_i) · scale      (every sum over i in order, as the CPU)
// Value head h reads key head h / (nv / nk) (grouped) or h % nk (tiled).
#include "elementwise.glsl"
layout(push_constant) uniform Params {
    uint n; uint nv; uint nk; uint dk; uint dv; uint n_t; uint row0; uint tiled; float scale;
} p;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer G { float log_decay[]; };
layout(std430, binding = 4) readonly buffer B { float beta[]; };
layout(std430, binding = 5) buffer S { float state[]; };
layout(std430, binding = 6) writeonly buffer O { float o[]; };

void main() {
    const uint e = flat_index();
    if (e >= p.n) {
        return;
    }
    const uint h = e / p.dv;
    const uint j = e % p.dv;
    const uint kh = p.tiled != 0 ? h % p.nk : h / (p.nv / p.nk);
    const uint s0 = h * p.dk * p.dv + j;
    for (uint t = 0; t < p.n_t; t++) {
        const uint row = p.row0 + t;
        const uint qk = (row * p.nk + kh) * p.dk;
        const uint gi = row * p.nv + h;
        const float decay = exp(log_decay[gi]);
        float sk = 0.0;
        for (uint i = 0; i < p.dk; i++) {
            const float s = state[s0 + i * p.dv] * decay;
            state[s0 + i * p.dv] = s;
            sk += s * k[qk + i];
        }
        const uint vi = gi * p.dv + j;
        const float delta = (v[vi] - sk) * beta[gi];
        float sq = 0.0;
        for (uint i = 0; i < p.dk; i++) {
            const float s = state[s0 + i * p.dv] + k[qk + i] * delta;
            state[s0 + i * p.dv] = s;
            sq += s * q[qk + i];
        }
        o[vi] = sq * p.scale;
    }
}
