#version 450
// RMS norm (Zhang & Sennrich 2019) of `n_pieces` pieces of n elements, one workgroup each
// (piece = workgroup x + y · number of x groups): out[e] = x[e] · (mean(x_piece²) + eps)^-½ ·
// w[e % w_len]. w_len = n: one weight per piece element (token rows, heads); w_len = a row:
// one weight per row element (a hyper-connection row normed per stream). The sum of squares
// is f32 here (the CPU's is f64). In place when x and out are the same buffer.
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params { uint n; uint w_len; uint n_pieces; float eps; } p;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer Out { float o[]; };

shared float red[WG];

void main() {
    const uint piece = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (piece >= p.n_pieces) {
        return; // uniform across the workgroup
    }
    const uint tid = gl_LocalInvocationID.x;
    const uint base = piece * p.n;
    float s = 0.0;
    for (uint i = tid; i < p.n; i += WG) {
        const float v = x[base + i];
        s += v * v;
    }
    red[tid] = s;
    barrier();
    for (uint h = WG / 2; h > 0; h >>= 1) {
        if (tid < h) {
            red[tid] += red[tid + h];
        }
        barrier();
    }
    const float scale = 1.0 / sqrt(red[0] / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += WG) {
        const uint e = base + i;
        o[e] = x[e] * scale * w[e % p.w_len];
    }
}
