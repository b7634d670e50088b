// The dot of one 32-element weight chunk with one token's activations, in the order that
// mul_mat_vec.comp and mul_mm.comp share: element 0 to 31, each a fused multiply-add into
// a running sum from 0, the activations past the row's end read as 0 (only float rows end
// inside a chunk). `precise` keeps every driver from reordering or splitting the fused ops.

// v: the chunk's weights (dequant_chunk); xo: index of the token's row in x; e0: the chunk's
// first element.
float chunk_dot(float v[32], uint xo, uint e0) {
    precise float s = 0.0;
    for (uint i = 0; i < 32; i++) {
        s = fma(v[i], e0 + i < p.cols ? x[xo + e0 + i] : 0.0, s);
    }
    return s;
}
