#version 450
// out[i][c] = scale · W[ids[i]][c]: rows of a weight table (token embeddings, PLE n-gram
// rows) dequantized from their ggml block layout (dequant.glsl, one TYPE_* per variant).
// One workgroup per output row (workgroup x + y · number of x groups); each invocation
// dequantizes 32-element chunks c, c + WG, …. The host checks every id against `rows`.
// The lattice i-quant variants also bind their grid and sign tables (binding 3, dequant.glsl).
layout(constant_id = 0) const uint WG = 32;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params {
    uint rows;      // table rows (ids are below this)
    uint cols;      // elements per row
    uint row_bytes; // bytes of one table row
    uint n_ids;     // output rows
    float scale;
} p;

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };

#include "dequant.glsl"

void main() {
    const uint i = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (i >= p.n_ids) {
        return;
    }
    const uint base = ids[i] * p.row_bytes;
    const uint chunks = (p.cols + 31) / 32;
    float v[32];
    for (uint c = gl_LocalInvocationID.x; c < chunks; c += WG) {
        dequant_chunk(base, c, v);
        const uint e0 = c * 32;
        const uint n = min(32, p.cols - e0);
        for (uint k = 0; k < n; k++) {
            o[i * p.cols + e0 + k] = p.scale * v[k];
        }
    }
}
