//! Horizontal sums of four accumulators at once, each by the same addition tree as the one-vector
//! sum the `vec_dot` kernels end with, so the tiles' results stay bit-identical to theirs.

use std::arch::x86_64::*;

/// `_mm512_reduce_add_ps` of four vectors at once, by the same tree (256-bit halves, 128-bit
/// halves, 64-bit halves, then the two lanes left), so each sum is bit-identical to it.
#[inline(always)]
pub(super) unsafe fn reduce4(v: [__m512; 4]) -> __m128 {
    // Chunks [a0+a2, a1+a3, b0+b2, b1+b3] of 128 bits.
    let ab = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x44>(v[0], v[1]),
        _mm512_shuffle_f32x4::<0xee>(v[0], v[1]),
    );
    let cd = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x44>(v[2], v[3]),
        _mm512_shuffle_f32x4::<0xee>(v[2], v[3]),
    );
    // One 128-bit chunk per vector.
    let s = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x88>(ab, cd),
        _mm512_shuffle_f32x4::<0xdd>(ab, cd),
    );
    let s = _mm512_add_ps(s, _mm512_permute_ps::<0x4e>(s));
    let s = _mm512_add_ps(s, _mm512_permute_ps::<0xb1>(s));
    let lane0 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    _mm512_castps512_ps128(_mm512_permutexvar_ps(lane0, s))
}

/// `hsum_ps128` of four vectors at once, by the same tree.
#[inline(always)]
pub(super) unsafe fn hsum4_ps128(v: [__m128; 4]) -> __m128 {
    let s = _mm512_insertf32x4::<1>(_mm512_castps128_ps512(v[0]), v[1]);
    let s = _mm512_insertf32x4::<2>(s, v[2]);
    let s = _mm512_insertf32x4::<3>(s, v[3]);
    let s = _mm512_add_ps(s, _mm512_permute_ps::<0x4e>(s));
    let s = _mm512_add_ps(s, _mm512_permute_ps::<0xb1>(s));
    let lane0 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    _mm512_castps512_ps128(_mm512_permutexvar_ps(lane0, s))
}

/// The four lanes of `v`.
#[inline(always)]
pub(super) unsafe fn lanes(v: __m128) -> [f32; 4] {
    let mut out = [0.0; 4];
    _mm_storeu_ps(out.as_mut_ptr(), v);
    out
}
