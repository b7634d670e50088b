//! AVX2 quantization of activation rows to Q8_0, Q8_1 and Q8_K, bit-identical to the scalar
//! quantizers (`legacy.rs`, `q8_k.rs`): the same f32 operations in the same order per element,
//! Q8_0/Q8_1 rounding half away from zero (`roundf`), Q8_K half to even (`nearest_int`). A block
//! holding Inf or NaN, or whose inverse scale overflows (a subnormal maximum), takes the scalar
//! path, so the saturating float-to-int casts of the reference never need emulating.

use std::arch::x86_64::*;

use crate::block::{write_f16, Block, FromFloat};
use crate::k_quants::QK_K;
use crate::legacy::{BlockQ8_0, BlockQ8_1, QK};
use crate::q8_k::BlockQ8_K;

#[inline(always)]
unsafe fn abs_ps(v: __m256) -> __m256 {
    _mm256_andnot_ps(_mm256_set1_ps(-0.0), v)
}

/// Largest lane.
#[inline(always)]
unsafe fn hmax_ps(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_movehdup_ps(m));
    _mm_cvtss_f32(m)
}

/// All lanes finite (not Inf, not NaN).
#[inline(always)]
unsafe fn finite(abs: __m256) -> __m256 {
    _mm256_cmp_ps::<_CMP_LT_OQ>(abs, _mm256_set1_ps(f32::INFINITY))
}

/// `roundf`: to nearest, halves away from zero. `x - trunc(x)` is exact, so the half test is.
#[inline(always)]
unsafe fn round_half_away(x: __m256) -> __m256 {
    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(x);
    let half = _mm256_cmp_ps::<_CMP_GE_OQ>(abs_ps(_mm256_sub_ps(x, t)), _mm256_set1_ps(0.5));
    let one = _mm256_or_ps(_mm256_and_ps(x, _mm256_set1_ps(-0.0)), _mm256_set1_ps(1.0));
    _mm256_add_ps(t, _mm256_and_ps(half, one))
}

/// Four vectors of 8 i32 (elements 0..8, 8..16, 16..24, 24..32) as 32 saturated i8 in order.
#[inline(always)]
unsafe fn pack_i8(q: [__m256i; 4]) -> __m256i {
    let lo = _mm256_packs_epi32(q[0], q[1]);
    let hi = _mm256_packs_epi32(q[2], q[3]);
    // packs works per 128-bit half: dword k of the result holds elements 4·[0,4,1,5,2,6,3,7][k].
    let mixed = _mm256_packs_epi16(lo, hi);
    _mm256_permutevar8x32_epi32(mixed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// `roundf(v · id)` as i32 lanes (exact: the values are small integers).
#[inline(always)]
unsafe fn q8_0_lanes(v: __m256, id: __m256) -> __m256i {
    _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v, id)))
}

/// `min(127, nearest_int(x[..8] · iscale))` as i32 lanes.
#[inline(always)]
unsafe fn q8_k_lanes(x: *const f32, iscale: __m256) -> __m256i {
    let v = _mm256_mul_ps(_mm256_loadu_ps(x), iscale);
    let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
    _mm256_min_epi32(_mm256_cvttps_epi32(r), _mm256_set1_epi32(127))
}

/// Q8_0's `d` and quants of one block, or `None` for the scalar path.
#[inline(always)]
unsafe fn q8_symmetric(x: &[f32]) -> Option<(f32, __m256i)> {
    let p = x.as_ptr();
    let v = [
        _mm256_loadu_ps(p),
        _mm256_loadu_ps(p.add(8)),
        _mm256_loadu_ps(p.add(16)),
        _mm256_loadu_ps(p.add(24)),
    ];
    let a = [abs_ps(v[0]), abs_ps(v[1]), abs_ps(v[2]), abs_ps(v[3])];
    let ok = _mm256_and_ps(
        _mm256_and_ps(finite(a[0]), finite(a[1])),
        _mm256_and_ps(finite(a[2]), finite(a[3])),
    );
    if _mm256_movemask_ps(ok) != 0xff {
        return None;
    }
    let amax = hmax_ps(_mm256_max_ps(
        _mm256_max_ps(a[0], a[1]),
        _mm256_max_ps(a[2], a[3]),
    ));
    let d = amax / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    if !id.is_finite() {
        return None;
    }
    let id = _mm256_set1_ps(id);
    let q = [
        q8_0_lanes(v[0], id),
        q8_0_lanes(v[1], id),
        q8_0_lanes(v[2], id),
        q8_0_lanes(v[3], id),
    ];
    Some((d, pack_i8(q)))
}

/// # Safety
/// AVX2 is available; `src.len() == 32 * dst.len()`.
#[inline(always)]
pub(crate) unsafe fn q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
    assert_eq!(src.len(), QK * dst.len(), "Q8_0 quantize lengths");
    for (x, block) in src.chunks_exact(QK).zip(dst) {
        match q8_symmetric(x) {
            Some((d, q)) => {
                _mm256_storeu_si256(block.qs.as_mut_ptr().cast(), q);
                block.d = write_f16(d);
            }
            None => *block = BlockQ8_0::quantize_block(x),
        }
    }
}

/// # Safety
/// AVX2 is available; `src.len() == 32 * dst.len()`.
#[inline(always)]
pub(crate) unsafe fn q8_1(src: &[f32], dst: &mut [BlockQ8_1]) {
    assert_eq!(src.len(), QK * dst.len(), "Q8_1 quantize lengths");
    for (x, block) in src.chunks_exact(QK).zip(dst) {
        match q8_symmetric(x) {
            Some((d, q)) => {
                _mm256_storeu_si256(block.qs.as_mut_ptr().cast(), q);
                let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
                let quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
                let s = _mm_add_epi32(
                    _mm256_castsi256_si128(quads),
                    _mm256_extracti128_si256(quads, 1),
                );
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
                let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
                block.d = write_f16(d);
                block.s = write_f16(_mm_cvtsi128_si32(s) as f32 * d);
            }
            None => *block = BlockQ8_1::quantize_block(x),
        }
    }
}

/// One Q8_K block, or `None` for the scalar path.
#[inline(always)]
unsafe fn q8_k_block(x: &[f32], block: &mut BlockQ8_K) -> Option<()> {
    let p = x.as_ptr();
    let (mut amax, mut ok) = (
        _mm256_setzero_ps(),
        _mm256_castsi256_ps(_mm256_set1_epi32(-1)),
    );
    for i in (0..QK_K).step_by(8) {
        let a = abs_ps(_mm256_loadu_ps(p.add(i)));
        ok = _mm256_and_ps(ok, finite(a));
        amax = _mm256_max_ps(amax, a);
    }
    if _mm256_movemask_ps(ok) != 0xff {
        return None;
    }
    let amax = hmax_ps(amax);
    if amax == 0.0 {
        *block = BlockQ8_K::zeroed();
        return Some(());
    }
    // The reference keeps the sign of the first element of largest magnitude.
    let target = _mm256_set1_ps(amax);
    let mut first = QK_K;
    for i in (0..QK_K).step_by(8) {
        let hit = _mm256_cmp_ps::<_CMP_EQ_OQ>(abs_ps(_mm256_loadu_ps(p.add(i))), target);
        let mask = _mm256_movemask_ps(hit);
        if mask != 0 {
            first = i + mask.trailing_zeros() as usize;
            break;
        }
    }
    let iscale = -127.0 / x[first];
    if !iscale.is_finite() {
        return None;
    }
    let scale = _mm256_set1_ps(iscale);
    for i in (0..QK_K).step_by(64) {
        let a = [
            q8_k_lanes(p.add(i), scale),
            q8_k_lanes(p.add(i + 8), scale),
            q8_k_lanes(p.add(i + 16), scale),
            q8_k_lanes(p.add(i + 24), scale),
        ];
        let b = [
            q8_k_lanes(p.add(i + 32), scale),
            q8_k_lanes(p.add(i + 40), scale),
            q8_k_lanes(p.add(i + 48), scale),
            q8_k_lanes(p.add(i + 56), scale),
        ];
        _mm256_storeu_si256(block.qs.as_mut_ptr().add(i).cast(), pack_i8(a));
        _mm256_storeu_si256(block.qs.as_mut_ptr().add(i + 32).cast(), pack_i8(b));
        // The four 16-element sums of these 64 quants.
        let s = [
            _mm256_add_epi32(a[0], a[1]),
            _mm256_add_epi32(a[2], a[3]),
            _mm256_add_epi32(b[0], b[1]),
            _mm256_add_epi32(b[2], b[3]),
        ];
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        let sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        let sums16 = _mm_packs_epi32(sums, sums);
        _mm_storel_epi64(block.bsums.as_mut_ptr().add(i / 16).cast(), sums16);
    }
    block.d = (1.0 / iscale).to_le_bytes();
    Some(())
}

/// # Safety
/// AVX2 is available; `src.len() == 256 * dst.len()`.
#[inline(always)]
pub(crate) unsafe fn q8_k(src: &[f32], dst: &mut [BlockQ8_K]) {
    assert_eq!(src.len(), QK_K * dst.len(), "Q8_K quantize lengths");
    for (x, block) in src.chunks_exact(QK_K).zip(dst) {
        if q8_k_block(x, block).is_none() {
            *block = BlockQ8_K::quantize_block(x);
        }
    }
}
