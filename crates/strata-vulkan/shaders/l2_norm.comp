#version 450
// L2 norm of `n_pieces` heads of n elements in place, one workgroup each (head = workgroup
// x + y · number of x groups): x[e] = x[e] / √(Σx² + eps), computed as strata-engine's
// `l2_norm_heads_in_place` (llama.cpp's `build_gdn_l2_norm`): an RMS norm with eps / n, then
// a scale by 1/√n. The sum of squares is f32 here (the CPU's is f64).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params { uint n; uint n_pieces; float eps; } p;
layout(std430, binding = 0) buffer X { float x[]; };

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
    const float n = float(p.n);
    const float scale = 1.0 / sqrt(red[0] / n + p.eps / n);
    const float inv_sqrt_n = 1.0 / sqrt(n);
    for (uint i = tid; i < p.n; i += WG) {
        const uint e = base + i;
        x[e] = (x[e] * scale) * inv_sqrt_n;
    }
}
