#version 450
// y[t][row] = Σ_c x[t][c] · W[w_row0 + row][c] for up to MAX_T tokens: one workgroup per
// weight row (row = workgroup x + z · number of x groups), one workgroup column (y) per MAX_T
// tokens. w_row0 and t_off address a row range of W (one expert of a 3-D expert tensor) and
// a run of x and y rows (the tokens routed to it), so an expert needs no copy of its own.
// W is read in its ggml block layout from a word buffer (see dequant.glsl, one TYPE_* macro
// per variant). Each invocation dequantizes 32-element chunks of the row (chunk c, c + WG,
// …), dots them with every token's x, and the workgroup sums the partials: subgroupAdd then
// shared memory across subgroups (USE_SUBGROUP), or a shared-memory tree otherwise.
// The lattice i-quant variants also bind their grid and sign tables (binding 3, dequant.glsl).

#extension GL_EXT_control_flow_attributes : require
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

// Workgroup size: a power of two, a multiple of the device's subgroup size.
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

// Per invocation (tree) or per subgroup (subgroupAdd) partial sums of every token.
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

    float acc[MAX_T];
    [[unroll]] for (uint t = 0; t < MAX_T; t++) {
        acc[t] = 0.0;
    }
    float v[32];
    for (uint c = tid; c < chunks; c += WG) {
        dequant_chunk(base, c, v);
        const uint e0 = c * 32;
        const uint n = min(32, p.cols - e0);
        for (uint t = 0; t < nt; t++) {
            const uint xo = (p.t_off + t0 + t) * p.cols + e0;
            float s = 0.0;
            for (uint i = 0; i < n; i++) {
                s += v[i] * x[xo + i];
            }
            acc[t] += s;
        }
    }

#ifdef USE_SUBGROUP
    [[unroll]] for (uint t = 0; t < MAX_T; t++) {
        acc[t] = subgroupAdd(acc[t]);
    }
    if (subgroupElect()) {
        [[unroll]] for (uint t = 0; t < MAX_T; t++) {
            partial[gl_SubgroupID * MAX_T + t] = acc[t];
        }
    }
    barrier();
    if (tid == 0) {
        for (uint t = 0; t < nt; t++) {
            float s = 0.0;
            for (uint g = 0; g < gl_NumSubgroups; g++) {
                s += partial[g * MAX_T + t];
            }
            y[(p.t_off + t0 + t) * p.y_stride + p.y_off + row] = s;
        }
    }
#else
    [[unroll]] for (uint t = 0; t < MAX_T; t++) {
        partial[tid * MAX_T + t] = acc[t];
    }
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s) {
            [[unroll]] for (uint t = 0; t < MAX_T; t++) {
                partial[tid * MAX_T + t] += partial[(tid + s) * MAX_T + t];
            }
        }
        barrier();
    }
    if (tid == 0) {
        for (uint t = 0; t < nt; t++) {
            y[(p.t_off + t0 + t) * p.y_stride + p.y_off + row] = partial[t];
        }
    }
#endif
}
