// Shared by the element-wise kernels: workgroup size WG (specialization constant 0) and the
// flat index of an invocation over a grid of up to 65535 × 65535 workgroups (the host splits
// large element counts into x and y; see kernels.rs `grid`).
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

uint flat_index() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
}
