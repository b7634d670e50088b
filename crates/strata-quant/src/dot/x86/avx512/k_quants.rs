//! AVX-512 VNNI `vec_dot` of Q5_K, Q6_K and IQ4_XS against Q8_K (Q4_K: `q4_k.rs`): 64 elements per
//! 512-bit register (two sub-blocks of 32, or four of 16), `vpmaddubsw` pair sums (exact in
//! i16) and one `vpdpwssd` by the sub-block scales into i32 lanes. Scale and min handling as in
//! the AVX2 kernels, whose helpers this file shares.

use std::arch::x86_64::*;

use super::super::avx2::k_quants::min_terms;
use super::super::{block_ptr, f16, f16x4, hsum_ps128};
use crate::iq4::BlockIQ4_XS;
use crate::iq_tables::KVALUES_IQ4NL;
use crate::k_quants::scales_mins_k4;
use crate::k_quants::{BlockQ5_K, BlockQ6_K, K_SCALE_SIZE};
use crate::q8_k::BlockQ8_K;

/// 32 bytes at `a` then 32 at `b`.
#[inline(always)]
pub(crate) unsafe fn load_pair<T>(a: *const T, b: *const T) -> __m512i {
    let lo = _mm512_castsi256_si512(_mm256_loadu_si256(a.cast()));
    _mm512_inserti64x4::<1>(lo, _mm256_loadu_si256(b.cast()))
}

/// i16 lanes 0..16 = `lo`, 16..32 = `hi`.
#[inline(always)]
unsafe fn halves_i16(lo: i16, hi: i16) -> __m512i {
    _mm512_inserti64x4::<1>(
        _mm512_castsi256_si512(_mm256_set1_epi16(lo)),
        _mm256_set1_epi16(hi),
    )
}

/// `vpshufb` control that spreads i16 lane `a` of a 128-bit lane over i16 lanes 0..16 and lane
/// `b` over 16..32.
#[inline(always)]
pub(crate) unsafe fn scale_pick(a: usize, b: usize) -> __m512i {
    let lane = |g: usize| i16::from_le_bytes([2 * g as u8, 2 * g as u8 + 1]);
    halves_i16(lane(a), lane(b))
}

/// Q5_K: blocks starting with the f16 `d` and `dmin` (Q4_K has its own kernel, `q4_k.rs`).
pub(crate) trait AffineK {
    fn packed_scales(&self) -> &[u8; K_SCALE_SIZE];
    /// Unsigned quants of sub-blocks (4k, 4k + 2) and (4k + 1, 4k + 3), 32 elements each.
    unsafe fn quants(&self, k: usize) -> (__m512i, __m512i);
}

impl AffineK for BlockQ5_K {
    #[inline(always)]
    fn packed_scales(&self) -> &[u8; K_SCALE_SIZE] {
        &self.scales
    }
    #[inline(always)]
    unsafe fn quants(&self, k: usize) -> (__m512i, __m512i) {
        let low4 = _mm512_set1_epi8(0x0f);
        let q = _mm512_loadu_si512(self.qs.as_ptr().add(64 * k).cast());
        let (lo, hi) = (
            _mm512_and_si512(q, low4),
            _mm512_and_si512(_mm512_srli_epi16::<4>(q), low4),
        );
        // Bit g of qh[l] is the 5th bit of element 32g + l.
        let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(self.qh.as_ptr().cast()));
        let bit = |g: usize| (1u8 << g) as i8;
        let lo_bits = _mm512_test_epi8_mask(qh, halves_i8(bit(4 * k), bit(4 * k + 2)));
        let hi_bits = _mm512_test_epi8_mask(qh, halves_i8(bit(4 * k + 1), bit(4 * k + 3)));
        let b4 = _mm512_set1_epi8(0x10);
        (
            _mm512_mask_add_epi8(lo, lo_bits, lo, b4),
            _mm512_mask_add_epi8(hi, hi_bits, hi, b4),
        )
    }
}

/// Bytes 0..32 = `lo`, 32..64 = `hi`.
#[inline(always)]
unsafe fn halves_i8(lo: i8, hi: i8) -> __m512i {
    _mm512_inserti64x4::<1>(
        _mm512_castsi256_si512(_mm256_set1_epi8(lo)),
        _mm256_set1_epi8(hi),
    )
}

#[inline(always)]
unsafe fn affine_k<X: AffineK>(x: &[X], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (mut acc, mut acc_min) = (_mm512_setzero_ps(), _mm_setzero_ps());
    for (x, y) in x.iter().zip(y) {
        let (scales, mins) = scales_mins_k4(x.packed_scales());
        let sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64)));
        let yq = y.qs.as_ptr();
        let mut sum = _mm512_setzero_si512();
        for k in 0..2 {
            let (lo, hi) = x.quants(k);
            let y_lo = load_pair(yq.add(128 * k), yq.add(128 * k + 64));
            let y_hi = load_pair(yq.add(128 * k + 32), yq.add(128 * k + 96));
            let sc_lo = _mm512_shuffle_epi8(sc16, scale_pick(4 * k, 4 * k + 2));
            let sc_hi = _mm512_shuffle_epi8(sc16, scale_pick(4 * k + 1, 4 * k + 3));
            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(lo, y_lo), sc_lo);
            sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(hi, y_hi), sc_hi);
        }
        // Lane 0: d_x d_y, lane 1: dmin_x d_y.
        let d = _mm_mul_ps(f16x4(block_ptr(x)), _mm_set1_ps(y.scale()));
        acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(d), _mm512_cvtepi32_ps(sum), acc);
        let dmin = _mm_permute_ps::<0b01_01_01_01>(d);
        acc_min = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(min_terms(mins, y)), acc_min);
    }
    _mm512_reduce_add_ps(acc) - hsum_ps128(acc_min)
}

/// # Safety
/// AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C are available.
#[inline(always)]
pub(crate) unsafe fn q5_k(x: &[BlockQ5_K], y: &[BlockQ8_K]) -> f32 {
    affine_k(x, y)
}

/// # Safety
/// As for [`q5_k`].
#[inline(always)]
pub(crate) unsafe fn q6_k(x: &[BlockQ6_K], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    let (low4, low2) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x03));
    let mut acc = _mm512_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let scales = _mm256_broadcastsi128_si256(_mm_loadu_si128(x.scales.as_ptr().cast()));
        // The quants are stored as q + 32 (0..=63): Σ sc (q + 32) y - 32 Σ sc bsum.
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let offset = _mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(scales)));
        let mut sum = _mm512_setzero_si512();
        for c in 0..2 {
            // ql[64c..64c+64] holds the low nibbles of elements 128c..128c+64 (low halves) and
            // 128c+64..128c+128 (high halves); qh[32c + l] bits 2t of element 128c + 32t + l.
            let ql = _mm512_loadu_si512(x.ql.as_ptr().add(64 * c).cast());
            let qh = _mm256_loadu_si256(x.qh.as_ptr().add(32 * c).cast());
            let h = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), _mm256_srli_epi16::<2>(qh));
            let q_a = _mm512_or_si512(
                _mm512_and_si512(ql, low4),
                _mm512_slli_epi16::<4>(_mm512_and_si512(h, low2)),
            );
            let q_b = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(ql), low4),
                _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srli_epi16::<4>(h), low2)),
            );
            for (half, q) in [q_a, q_b].into_iter().enumerate() {
                let at = 128 * c + 64 * half;
                let yq = _mm512_loadu_si512(y.qs.as_ptr().add(at).cast());
                // Sub-blocks at/16 .. at/16 + 4, 16 elements (8 i16 lanes) each.
                let k = (at / 16) as i64;
                let pick = _mm256_set_epi64x(
                    (k + 3) * 0x0101_0101_0101_0101,
                    (k + 2) * 0x0101_0101_0101_0101,
                    (k + 1) * 0x0101_0101_0101_0101,
                    k * 0x0101_0101_0101_0101,
                );
                let sc = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(scales, pick));
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(q, yq), sc);
            }
        }
        let offset = _mm512_castsi256_si512(_mm256_slli_epi32::<5>(offset));
        let offset = _mm512_maskz_mov_epi32(0x00ff, offset);
        let sum = _mm512_sub_epi32(sum, offset);
        // `d` ends the block: too close to the row's end for `f16x4`.
        let d = _mm512_set1_ps(y.scale() * f16(x.d));
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum), acc);
    }
    _mm512_reduce_add_ps(acc)
}

/// # Safety
/// As for [`q5_k`].
#[inline(always)]
pub(crate) unsafe fn iq4_xs(x: &[BlockIQ4_XS], y: &[BlockQ8_K]) -> f32 {
    assert_eq!(x.len(), y.len(), "vec_dot block counts");
    // The table shifted to unsigned (+128); the offset comes back as 128 Σ y per sub-block.
    let table = _mm512_broadcast_i32x4(_mm_xor_si128(
        _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()),
        _mm_set1_epi8(-128),
    ));
    let (low4, bias) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(-128));
    let mut acc = _mm512_setzero_ps();
    for (x, y) in x.iter().zip(y) {
        let mut sum = _mm512_setzero_si512();
        for p in 0..4 {
            // Sub-blocks 2p and 2p + 1: codes qs[32p..32p+32], activations y[64p..64p+64].
            let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * p).cast());
            let both =
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), _mm256_srli_epi16::<4>(q));
            let ordered = _mm512_shuffle_i64x2::<0b11_01_10_00>(both, both);
            let v = _mm512_shuffle_epi8(table, _mm512_and_si512(ordered, low4));
            let yq = _mm512_loadu_si512(y.qs.as_ptr().add(64 * p).cast());
            let biased = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, yq);
            let sub = _mm512_sub_epi32(
                biased,
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, yq),
            );
            let sc = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_set1_epi32(x.scale(2 * p))),
                _mm256_set1_epi32(x.scale(2 * p + 1)),
            );
            sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(sub, sc));
        }
        let d = _mm_mul_ss(f16x4(block_ptr(x)), _mm_set_ss(y.scale()));
        acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(d), _mm512_cvtepi32_ps(sum), acc);
    }
    _mm512_reduce_add_ps(acc)
}
