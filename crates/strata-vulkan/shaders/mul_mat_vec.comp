#version 450
// y[t][row] = Σ_c x[t][c] · W[w_row0 + row][c] for up to MAX_T tokens: one workgroup per
// weight row (row = workgroup x + z · number of x groups), one workgroup column (y) per MAX_T
// tokens. w_row0 and t_off address a row range of W (one expert of a 3-D expert tensor) and
// a run of x and y rows (the tokens routed to it), so an expert needs no copy of its own.
// W is read in its ggml block layout from a word buffer (see dequant.glsl, one TYPE_* macro
// per variant). The lattice i-quant variants also bind their grid and sign tables (binding
// 3, dequant.glsl).
// Sum order (chunk_dot.glsl): each 32-element chunk's dot in element order, then the chunks'
// dots in chunk order, exactly as mul_mm.comp sums, so a token's output has the same bits
// whichever kernel computes it (prefill chunks of any size give the same logits). In rounds
// of WG chunks, invocation i dots chunk (round·WG + i) with every token into shared memory,
// then invocation t adds token t's dots of the round in chunk order.

#extension GL_EXT_control_flow_attributes : require

// Workgroup size: a power of two, at least MAX_T.
layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;

#define MAX_T 8

layout(push_constant) uniform Params {
    uint rows;      // weight rows = y columns
    uint cols;      // weight columns = x columns
    uint row_bytes; // bytes of one weight row
    uint n_t;       // tokens in x and y
    uint y_stride;  // y columns (= rows, or more when W is one row range of a larger matrix)
    uint y_off;     // y column of weight row 0
    uint w_row0;    // first weight row used
    uint t_off;     // x and y row of token 0
} p;

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

#include "dequant.glsl"

#include "chunk_dot.glsl"

// partial[i][t]: the dot of chunk round·WG + i with token t.
shared float partial[WG * MAX_T];

void main() {
    const uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    const uint t0 = gl_WorkGroupID.y * MAX_T;
    if (row >= p.rows) {
        return; // uniform across the workgroup
    }
    const uint nt = min(MAX_T, p.n_t - t0);
    const uint tid = gl_LocalInvocationID.x;
    const uint base = (p.w_row0 + row) * p.row_bytes;
    const uint chunks = (p.cols + 31) / 32;

    precise float sum = 0.0; // token t0 + tid's, in invocations tid < nt
    float v[32];
    for (uint c0 = 0; c0 < chunks; c0 += WG) {
        const uint c = c0 + tid;
        if (c < chunks) {
            dequant_chunk(base, c, v);
            for (uint t = 0; t < nt; t++) {
                partial[tid * MAX_T + t] = chunk_dot(v, (p.t_off + t0 + t) * p.cols, c * 32);
            }
        }
        barrier();
        if (tid < nt) {
            const uint n = min(WG, chunks - c0);
            for (uint i = 0; i < n; i++) {
                sum += partial[i * MAX_T + tid];
            }
        }
        if (c0 + WG < chunks) {
            barrier(); // the next round overwrites partial (uniform: every invocation agrees)
        }
    }
    if (tid < nt) {
        y[(p.t_off + t0 + tid) * p.y_stride + p.y_off + row] = sum;
    }
}
