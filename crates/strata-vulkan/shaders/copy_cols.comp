#version 450
// Copies a block of columns between row-major buffers: for rows r < n / w and columns c < w,
// dst[r·dst_stride + dst_off + c] = src[r·src_stride + src_off + c]. `split` (a piece of
// every repeat of a row) and `concat` (a part into its columns) are one dispatch each.
#include "elementwise.glsl"
layout(push_constant) uniform Params {
    uint n; uint w; uint src_stride; uint src_off; uint dst_stride; uint dst_off;
} p;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };

void main() {
    const uint e = flat_index();
    if (e >= p.n) {
        return;
    }
    const uint r = e / p.w;
    const uint c = e % p.w;
    dst[r * p.dst_stride + p.dst_off + c] = src[r * p.src_stride + p.src_off + c];
}
