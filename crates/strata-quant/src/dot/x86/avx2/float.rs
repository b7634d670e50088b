//! AVX2 + FMA `dot_f32` of F32, F16 (F16C conversion) and BF16 rows: four 8-lane accumulators
//! over 32 elements a step, then 8 at a time, then a scalar tail; and the `vec_dot` of BF16
//! weights with BF16 activations. Conversions are exact (and so is the product of two bf16
//! values), so only the summation order differs from the scalar reference.

use std::arch::x86_64::*;

use super::super::float_tiles::{Lanes, Operands, RowLanes};

use super::super::hsum_ps;
use crate::block::f16_to_f32;

/// A little-endian float row: 8 elements at a time as f32 lanes, or one.
trait Row {
    unsafe fn load8(&self, i: usize) -> __m256;
    fn get(&self, i: usize) -> f32;
}

struct F32Row<'a>(&'a [u8]);
struct F16Row<'a>(&'a [u8]);
struct BF16Row<'a>(&'a [u8]);

impl Row for F32Row<'_> {
    #[inline(always)]
    unsafe fn load8(&self, i: usize) -> __m256 {
        _mm256_loadu_ps(self.0.as_ptr().add(4 * i).cast())
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f32::from_le_bytes(self.0[4 * i..4 * i + 4].try_into().unwrap())
    }
}

impl Row for F16Row<'_> {
    #[inline(always)]
    unsafe fn load8(&self, i: usize) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(self.0.as_ptr().add(2 * i).cast()))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f16_to_f32(u16::from_le_bytes([self.0[2 * i], self.0[2 * i + 1]]))
    }
}

impl Row for BF16Row<'_> {
    #[inline(always)]
    unsafe fn load8(&self, i: usize) -> __m256 {
        let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(self.0.as_ptr().add(2 * i).cast()));
        _mm256_castsi256_ps(_mm256_slli_epi32(h, 16))
    }
    #[inline(always)]
    fn get(&self, i: usize) -> f32 {
        f32::from_bits((u16::from_le_bytes([self.0[2 * i], self.0[2 * i + 1]]) as u32) << 16)
    }
}

/// `Σ row[i] · x[i]`; the row holds `x.len()` elements.
#[inline(always)]
unsafe fn dot<R: Row>(row: R, x: &[f32]) -> f32 {
    let (n, xp) = (x.len(), x.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = i + 8 * k;
            *acc = _mm256_fmadd_ps(row.load8(at), _mm256_loadu_ps(xp.add(at)), *acc);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(row.load8(i), _mm256_loadu_ps(xp.add(i)), acc[0]);
        i += 8;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut total = hsum_ps(sum);
    for (j, &xj) in x.iter().enumerate().skip(i) {
        total += row.get(j) * xj;
    }
    total
}

/// # Safety
/// AVX2 and FMA are available; `row.len() == 4 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn f32(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 4 * x.len(), "F32 dot_f32 lengths");
    dot(F32Row(row), x)
}

/// # Safety
/// AVX2, FMA and F16C are available; `row.len() == 2 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn f16(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 2 * x.len(), "F16 dot_f32 lengths");
    dot(F16Row(row), x)
}

/// # Safety
/// AVX2 and FMA are available; `row.len() == 2 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn bf16(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 2 * x.len(), "BF16 dot_f32 lengths");
    dot(BF16Row(row), x)
}

/// `vec_dot` of a BF16 row with a BF16 activation row (ggml-cpu/vec.cpp `ggml_vec_dot_bf16`):
/// four 8-lane accumulators over 32 elements a step, then 16, then a scalar tail. Unpacking 16
/// bf16 values against zero (`vpunpck{l,h}wd`) puts each in the top half of an f32 lane, in an
/// order that interleaves the two 128-bit halves; both rows get the same order, which the dot
/// product does not see, and it costs fewer instructions than widening in element order.
///
/// # Safety
/// AVX2 and FMA are available; `row.len() == act.len()`, even.
#[inline(always)]
pub(crate) unsafe fn bf16_bf16(row: &[u8], act: &[u8]) -> f32 {
    assert_eq!(row.len(), act.len(), "BF16 vec_dot lengths");
    let n = row.len() / 2;
    let (wp, ap) = (row.as_ptr(), act.as_ptr());
    let (mut acc01, mut acc23) = ([_mm256_setzero_ps(); 2], [_mm256_setzero_ps(); 2]);
    let mut i = 0;
    while i + 32 <= n {
        bf16_step(&mut acc01, wp.add(2 * i), ap.add(2 * i));
        bf16_step(&mut acc23, wp.add(2 * i + 32), ap.add(2 * i + 32));
        i += 32;
    }
    if i + 16 <= n {
        bf16_step(&mut acc01, wp.add(2 * i), ap.add(2 * i));
        i += 16;
    }
    let acc = [acc01[0], acc01[1], acc23[0], acc23[1]];
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut total = hsum_ps(sum);
    let (w, a) = (BF16Row(row), BF16Row(act));
    for j in i..n {
        total += w.get(j) * a.get(j);
    }
    total
}

/// `acc[0]` and `acc[1]` += the products of the 16 bf16 values at `w` and `a` (32 readable
/// bytes each), as [`bf16_bf16`] orders them.
#[inline(always)]
unsafe fn bf16_step(acc: &mut [__m256; 2], w: *const u8, a: *const u8) {
    let zero = _mm256_setzero_si256();
    let (w, a) = (_mm256_loadu_si256(w.cast()), _mm256_loadu_si256(a.cast()));
    let w_lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, w));
    let a_lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, a));
    let w_hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, w));
    let a_hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, a));
    acc[0] = _mm256_fmadd_ps(w_lo, a_lo, acc[0]);
    acc[1] = _mm256_fmadd_ps(w_hi, a_hi, acc[1]);
}

/// `out[t·stride + r]` = [`dot`] of row `r` of `w` (`n_rows` rows of `ty`, back to back) and
/// token `t` of `x` (`n_tok` rows of `n` floats), bit for bit, in tiles of 2 rows × 4 tokens:
/// each loaded weight vector serves four tokens and each token vector two rows. `false`
/// (nothing written) unless `ty` is a float type and `n` a multiple of 8 (no scalar tail).
///
/// # Safety
/// AVX2, FMA and F16C are available; `w` holds `n_rows` rows of `n` elements of `ty`, `x`
/// `n_tok · n` floats, `out` at least `(n_tok − 1)·stride + n_rows` floats.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(in crate::dot::x86) unsafe fn gemm(
    ty: strata_gguf::GgmlType,
    w: &[u8],
    n_rows: usize,
    x: &[f32],
    n: usize,
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
) -> bool {
    use strata_gguf::GgmlType as T;
    let Some(job) = Operands::whole::<Kernel>(w, n_rows, x, n, n_tok, out, stride) else {
        return false;
    };
    match ty {
        T::F32 => job.run::<Kernel, _, 2>(F32Row),
        T::F16 => job.run::<Kernel, _, 2>(F16Row),
        T::BF16 => job.run::<Kernel, _, 2>(BF16Row),
        _ => return false,
    }
    true
}

/// This path's vectors for the tiles of [`gemm`] (`float_tiles.rs`), as [`dot`] uses them.
struct Kernel;

impl Lanes for Kernel {
    type V = __m256;
    const WIDTH: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn reduce(acc: [__m256; 4]) -> f32 {
        let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        hsum_ps(sum)
    }
}

impl<R: Row> RowLanes<Kernel> for R {
    #[inline(always)]
    unsafe fn lanes(&self, i: usize) -> __m256 {
        self.load8(i)
    }
}
