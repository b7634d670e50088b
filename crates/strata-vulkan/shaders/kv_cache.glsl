// The KV cache bindings of the attention kernels (1: keys, 2: values), each
// [position][n_kv_head · head_dim]: f32, or with KV_F16 f16 two to a 32-bit word (element i in
// word i / 2, the low half when i is even: packHalf2x16's order, a little-endian f16 array).
// k_at(i) and v_at(i) read element i as f32.
#ifdef KV_F16
layout(std430, binding = 1) readonly buffer K { uint kc[]; };
layout(std430, binding = 2) readonly buffer V { uint vc[]; };
float k_at(uint i) { return unpackHalf2x16(kc[i >> 1])[i & 1u]; }
float v_at(uint i) { return unpackHalf2x16(vc[i >> 1])[i & 1u]; }
#else
layout(std430, binding = 1) readonly buffer K { float kc[]; };
layout(std430, binding = 2) readonly buffer V { float vc[]; };
float k_at(uint i) { return kc[i]; }
float v_at(uint i) { return vc[i]; }
#endif
