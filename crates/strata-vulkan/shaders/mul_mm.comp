#version 450
// y[t][row] = Σ_c x[t][c] · W[w_row0 + row][c], tiled for prefill (after ggml-vulkan's mul_mm):
// one workgroup per BM × BN tile of y (BM weight rows × BN tokens; row tile = workgroup x +
// z · number of x groups, token tile = workgroup y). Over K in steps of BK = 32 (one
// dequant_chunk), every invocation dequantizes one weight row's chunk into shared memory and
// loads its share of the BN × BK tile of x, then accumulates a TM × TN register block of y
// (rows rg + 8i, tokens tg + 8j) from the two shared tiles in f32. Each weight chunk is thus
// dequantized once per BN tokens instead of once per 8 (mul_mat_vec). Sum order: each
// chunk's dot in element order with fused multiply-adds from 0, then the chunks' dots in
// chunk order — mul_mat_vec's order (chunk_dot.glsl), so both kernels give the same bits.
// Push constants and bindings are mul_mat_vec's: w_row0 and t_off address a row range of W
// (one expert of a 3-D expert tensor) and a run of x and y rows, y_stride and y_off the
// columns of y (a row range of a split matrix). Ragged edges: rows past `rows` dequantize as
// zeros, tokens past `n_t` and columns past `cols` load zeros, and neither is written.
// No subgroup operations: any subgroup size works. Shared memory: (BM + BN)·(BK + 1) floats
// = 12 672 bytes, under the 16 KiB every Vulkan device offers.

#extension GL_EXT_control_flow_attributes : require

#define BM 64 // weight rows of a tile = invocations (each dequantizes one row)
#define BN 32 // tokens of a tile
#define BK 32 // K step: one 32-element chunk of dequant.glsl
#define TM 8  // rows of an invocation's register block, BM / TM apart
#define TN 4  // tokens of an invocation's register block, BN / TN apart
#define WG 64 // invocations: (BM / TM) · (BN / TN)
#define PAD (BK + 1) // shared row stride: consecutive rows fall in different banks

layout(local_size_x = WG) in;

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

shared float ws[BM * PAD]; // ws[r][k]: weight row r0 + r, element c·BK + k
shared float xs[BN * PAD]; // xs[t][k]: token t0 + t, element c·BK + k

void main() {
    const uint r0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * BM;
    if (r0 >= p.rows) {
        return; // uniform across the workgroup
    }
    const uint t0 = gl_WorkGroupID.y * BN;
    const uint tid = gl_LocalInvocationID.x;
    const uint rg = tid % (BM / TM), tg = tid / (BM / TM);
    const uint chunks = (p.cols + BK - 1) / BK;
    // The row this invocation dequantizes each step.
    const bool row_in = r0 + tid < p.rows;
    const uint base = (p.w_row0 + r0 + tid) * p.row_bytes;

    precise float acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM * TN; i++) {
        acc[i] = 0.0;
    }
    float v[32];
    for (uint c = 0; c < chunks; c++) {
        if (row_in) {
            dequant_chunk(base, c, v);
        } else {
            [[unroll]] for (uint k = 0; k < BK; k++) {
                v[k] = 0.0;
            }
        }
        [[unroll]] for (uint k = 0; k < BK; k++) {
            ws[tid * PAD + k] = v[k];
        }
        [[unroll]] for (uint j = 0; j < BN * BK / WG; j++) {
            const uint i = tid + j * WG;
            const uint t = i / BK, k = i % BK;
            const uint e = c * BK + k;
            xs[t * PAD + k] =
                t0 + t < p.n_t && e < p.cols ? x[(p.t_off + t0 + t) * p.cols + e] : 0.0;
        }
        barrier();
        // This chunk's dots (chunk_dot.glsl's order), then added to the sums in chunk order.
        precise float dot[TM * TN];
        [[unroll]] for (uint i = 0; i < TM * TN; i++) {
            dot[i] = 0.0;
        }
        for (uint k = 0; k < BK; k++) {
            float a[TM], b[TN];
            [[unroll]] for (uint i = 0; i < TM; i++) {
                a[i] = ws[(rg + i * (BM / TM)) * PAD + k];
            }
            [[unroll]] for (uint j = 0; j < TN; j++) {
                b[j] = xs[(tg + j * (BN / TN)) * PAD + k];
            }
            [[unroll]] for (uint i = 0; i < TM; i++) {
                [[unroll]] for (uint j = 0; j < TN; j++) {
                    dot[i * TN + j] = fma(a[i], b[j], dot[i * TN + j]);
                }
            }
        }
        [[unroll]] for (uint i = 0; i < TM * TN; i++) {
            acc[i] += dot[i];
        }
        barrier();
    }

    [[unroll]] for (uint i = 0; i < TM; i++) {
        const uint row = r0 + rg + i * (BM / TM);
        [[unroll]] for (uint j = 0; j < TN; j++) {
            const uint t = t0 + tg + j * (BN / TN);
            if (row < p.rows && t < p.n_t) {
                y[(p.t_off + t) * p.y_stride + p.y_off + row] = acc[i * TN + j];
            }
        }
    }
}
