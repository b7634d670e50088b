//! AVX2 `vec_dot` of the i-quants against Q8_K. IQ4_XS: per 32 elements a `vpshufb` table
//! lookup of the 4-bit codes, the sign trick for the signed × signed product (|x| <= 127 keeps
//! every pair sum inside i16), and the 6-bit sub-block scale applied as an i16 multiply-add.

use std::arch::x86_64::*;

use super::super::{block_ptr, f16x4, hsum_ps, load32, nibbles32, sign_split, IntDot};
use super::legacy::iq4nl_table;
use crate::iq4::BlockIQ4_XS;
use crate::q8_k::BlockQ8_K;

/// # Safety
/// AVX2, FMA, F16C and `M`'s instructions are available.
#[inline(always)]
pub(crate) unsafe fn iq4_xs<M: IntDot>(x: &[BlockIQ4_XS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let table = iq4nl_table();
    let mut acc = _mm256_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let mut sum = _mm256_setzero_si256();
        for ib in 0..8 {
            let codes = nibbles32(x.qs[16 * ib..16 * ib + 16].try_into().unwrap());
            let v = _mm256_shuffle_epi8(table, codes);
            let (av, sy) = sign_split(v, load32(y.qs.as_ptr().add(32 * ib)));
            let scale = _mm256_set1_epi16(x.scale(ib) as i16);
            sum = M::madd_i16(sum, _mm256_maddubs_epi16(av, sy), scale);
        }
        let d = _mm_mul_ss(f16x4(block_ptr(x)), _mm_set_ss(y.scale()));
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    hsum_ps(acc)
}
