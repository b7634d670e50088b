// Weight access in ggml block layouts (ggml-common.h; strata-quant's CPU dequantizers are the
// reference for every bit position). The weight buffer is read as 32-bit words because
// blocks are byte-aligned (18, 34, 144, 210 … bytes) and 8-bit storage is optional.
//
// dequant_chunk(base, c, v): elements 32c .. 32c+31 of the row starting at byte `base`,
// zero past the row's end (only float rows may end inside a chunk).

uint byte_at(uint o) {
    return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xFFu;
}

uint u16_at(uint o) {
    return byte_at(o) | (byte_at(o + 1) << 8);
}

uint u32_at(uint o) {
    return u16_at(o) | (u16_at(o + 2) << 16);
}

float f16_at(uint o) {
    return unpackHalf2x16(u16_at(o)).x;
}

int i8_at(uint o) {
    return int(byte_at(o) << 24) >> 24;
}

#if defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
const int KVALUES_IQ4NL[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10,
                                       1, 13, 25, 38, 53, 69, 89, 113);
#endif

#if defined(TYPE_F32)
void dequant_chunk(uint base, uint c, out float v[32]) {
    for (uint i = 0; i < 32; i++) {
        const uint e = c * 32 + i;
        v[i] = e < p.cols ? uintBitsToFloat(w[(base >> 2) + e]) : 0.0;
    }
}

#elif defined(TYPE_F16)
void dequant_chunk(uint base, uint c, out float v[32]) {
    for (uint i = 0; i < 32; i++) {
        const uint e = c * 32 + i;
        v[i] = e < p.cols ? f16_at(base + 2 * e) : 0.0;
    }
}

#elif defined(TYPE_BF16)
void dequant_chunk(uint base, uint c, out float v[32]) {
    for (uint i = 0; i < 32; i++) {
        const uint e = c * 32 + i;
        v[i] = e < p.cols ? uintBitsToFloat(u16_at(base + 2 * e) << 16) : 0.0;
    }
}

#elif defined(TYPE_Q4_0)
// 18 bytes: d (f16), 16 bytes of nibbles (element j low, j + 16 high); value d·(q − 8).
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + c * 18;
    const float d = f16_at(b);
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(b + 2 + j);
        v[j] = d * float(int(q & 15u) - 8);
        v[j + 16] = d * float(int(q >> 4) - 8);
    }
}

#elif defined(TYPE_Q4_1)
// 20 bytes: d, m (f16), nibbles as Q4_0; value d·q + m.
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + c * 20;
    const float d = f16_at(b), m = f16_at(b + 2);
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(b + 4 + j);
        v[j] = d * float(q & 15u) + m;
        v[j + 16] = d * float(q >> 4) + m;
    }
}

#elif defined(TYPE_Q5_0)
// 22 bytes: d (f16), qh (u32: bit j = 5th bit of element j), nibbles; value d·(q − 16).
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + c * 22;
    const float d = f16_at(b);
    const uint qh = u32_at(b + 2);
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(b + 6 + j);
        v[j] = d * float(int((q & 15u) | (((qh >> j) & 1u) << 4)) - 16);
        v[j + 16] = d * float(int((q >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16);
    }
}

#elif defined(TYPE_Q5_1)
// 24 bytes: d, m (f16), qh (u32), nibbles; value d·q + m.
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + c * 24;
    const float d = f16_at(b), m = f16_at(b + 2);
    const uint qh = u32_at(b + 4);
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(b + 8 + j);
        v[j] = d * float((q & 15u) | (((qh >> j) & 1u) << 4)) + m;
        v[j + 16] = d * float((q >> 4) | (((qh >> (j + 16)) & 1u) << 4)) + m;
    }
}

#elif defined(TYPE_Q8_0)
// 34 bytes: d (f16), 32 × i8; value d·q.
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + c * 34;
    const float d = f16_at(b);
    for (uint j = 0; j < 32; j++) {
        v[j] = float(i8_at(b + 2 + j)) * d;
    }
}

#elif defined(TYPE_IQ4_NL)
// 18 bytes: d (f16), nibbles as Q4_0 selecting one of 16 non-linear levels; value d·level.
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + c * 18;
    const float d = f16_at(b);
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(b + 2 + j);
        v[j] = d * float(KVALUES_IQ4NL[q & 15u]);
        v[j + 16] = d * float(KVALUES_IQ4NL[q >> 4]);
    }
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Q4_K, 144 bytes: d, dmin (f16), 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
// (byte 32·(g/2) + l: element 32g + l in the low nibble for even g, high for odd g).
// Q5_K, 176 bytes: the same with 32 bytes of 5th bits (bit g of byte l) before the nibbles.
// Chunk c is sub-block g = c % 8 of block c / 8; value d·sc·q − dmin·m.
#ifdef TYPE_Q4_K
#define BLOCK_BYTES 144
#define QS_OFFSET 16
#else
#define BLOCK_BYTES 176
#define QS_OFFSET 48
#endif
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + (c / 8) * BLOCK_BYTES;
    const uint g = c % 8;
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint s = b + 4; // scales: ggml's get_scale_min_k4
    uint sc, m;
    if (g < 4) {
        sc = byte_at(s + g) & 63u;
        m = byte_at(s + g + 4) & 63u;
    } else {
        sc = (byte_at(s + g + 4) & 15u) | ((byte_at(s + g - 4) >> 6) << 4);
        m = (byte_at(s + g + 4) >> 4) | ((byte_at(s + g) >> 6) << 4);
    }
    const float dl = d * float(sc), ml = dmin * float(m);
    const uint qs = b + QS_OFFSET + 32 * (g / 2);
    const uint shift = 4 * (g % 2);
    for (uint l = 0; l < 32; l++) {
        uint q = (byte_at(qs + l) >> shift) & 15u;
#ifdef TYPE_Q5_K
        q |= ((byte_at(b + 16 + l) >> g) & 1u) << 4;
#endif
        v[l] = dl * float(q) - ml;
    }
}

#elif defined(TYPE_Q6_K)
// 210 bytes: ql (128: low nibbles), qh (64: high 2-bit pairs), 16 × i8 scales, d (f16).
// Element 128h + 32t + l: low nibble t/2 of ql[64h + 32(t%2) + l], high bits 2t of
// qh[32h + l]; value d·scale[e/16]·(q − 32). Chunk c is t = c % 4 of half h of block c / 8.
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + (c / 8) * 210;
    const uint h = (c % 8) / 4, t = c % 4;
    const float d = f16_at(b + 208);
    const uint ql = b + 64 * h + 32 * (t % 2);
    const uint qh = b + 128 + 32 * h;
    const uint sc = b + 192 + 8 * h + 2 * t; // scale index (128h + 32t) / 16
    const float d0 = d * float(i8_at(sc)), d1 = d * float(i8_at(sc + 1));
    for (uint l = 0; l < 32; l++) {
        const uint lo = (byte_at(ql + l) >> (4 * (t / 2))) & 15u;
        const uint hi = (byte_at(qh + l) >> (2 * t)) & 3u;
        v[l] = (l < 16 ? d0 : d1) * float(int(lo | (hi << 4)) - 32);
    }
}

#elif defined(TYPE_Q2_K)
// 84 bytes: 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit quants
// (element 128c + 32s + l: bits 2s of byte 32c + l), d, dmin (f16);
// value d·(sc & 15)·q − dmin·(sc >> 4), one scale byte per 16 elements.
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + (c / 8) * 84;
    const uint g = c % 8;
    const float d = f16_at(b + 80), dmin = f16_at(b + 82);
    const uint qs = b + 16 + 32 * (g / 4);
    const uint shift = 2 * (g % 4);
    const uint sc0 = byte_at(b + 2 * g), sc1 = byte_at(b + 2 * g + 1);
    const float dl0 = d * float(sc0 & 15u), ml0 = dmin * float(sc0 >> 4);
    const float dl1 = d * float(sc1 & 15u), ml1 = dmin * float(sc1 >> 4);
    for (uint l = 0; l < 32; l++) {
        const float q = float((byte_at(qs + l) >> shift) & 3u);
        v[l] = l < 16 ? dl0 * q - ml0 : dl1 * q - ml1;
    }
}

#elif defined(TYPE_Q3_K)
// 110 bytes: hmask (32: bit g of byte l is the high bit of element 32g + l), 64 bytes of low
// 2-bit quants (as Q2_K), 12 bytes of 16 packed 6-bit scales, d (f16);
// value d·(scale − 32)·(low − 4·!high).
int q3_k_scale(uint s, uint i) {
    const uint low = i < 8 ? byte_at(s + i) & 15u : byte_at(s + i - 8) >> 4;
    const uint high = (byte_at(s + 8 + i % 4) >> (2 * (i / 4))) & 3u;
    return int(low | (high << 4)) - 32;
}
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + (c / 8) * 110;
    const uint g = c % 8;
    const float d = f16_at(b + 108);
    const uint qs = b + 32 + 32 * (g / 4);
    const uint shift = 2 * (g % 4);
    const float d0 = d * float(q3_k_scale(b + 96, 2 * g));
    const float d1 = d * float(q3_k_scale(b + 96, 2 * g + 1));
    for (uint l = 0; l < 32; l++) {
        const int low = int((byte_at(qs + l) >> shift) & 3u);
        const int high = int((byte_at(b + l) >> g) & 1u);
        v[l] = (l < 16 ? d0 : d1) * float(low - 4 * (1 - high));
    }
}

#elif defined(TYPE_IQ4_XS)
// 136 bytes: d (f16), scales_h (u16: 2 high bits of scale ib at bit 2ib), scales_l (4 bytes:
// low nibble ib % 2 of byte ib / 2), 8 × 16 bytes of codes as IQ4_NL;
// value d·(scale − 32)·level. Chunk c is sub-block c % 8 of block c / 8.
void dequant_chunk(uint base, uint c, out float v[32]) {
    const uint b = base + (c / 8) * 136;
    const uint ib = c % 8;
    const uint low = (byte_at(b + 4 + ib / 2) >> (4 * (ib % 2))) & 15u;
    const uint high = (u16_at(b + 2) >> (2 * ib)) & 3u;
    const float dl = f16_at(b) * float(int(low | (high << 4)) - 32);
    const uint qs = b + 8 + 16 * ib;
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(qs + j);
        v[j] = dl * float(KVALUES_IQ4NL[q & 15u]);
        v[j + 16] = dl * float(KVALUES_IQ4NL[q >> 4]);
    }
}

#else
#error "define one TYPE_* macro"
#endif
