//! AVX-512 `dot_f32` of F32, F16 and BF16 rows: four 16-lane FMA accumulators over 64 elements
//! a step, then a masked step for the rest (no scalar tail). Conversions are exact.

use std::arch::x86_64::*;

use super::super::float_tiles::{Lanes, Operands, RowLanes};

/// A little-endian float row, read 16 elements at a time (fewer under `mask`).
trait Row {
    unsafe fn load16(&self, i: usize) -> __m512;
    unsafe fn load_masked(&self, i: usize, mask: __mmask16) -> __m512;
}

struct F32Row<'a>(&'a [u8]);
struct F16Row<'a>(&'a [u8]);
struct BF16Row<'a>(&'a [u8]);

impl Row for F32Row<'_> {
    #[inline(always)]
    unsafe fn load16(&self, i: usize) -> __m512 {
        _mm512_loadu_ps(self.0.as_ptr().add(4 * i).cast())
    }
    #[inline(always)]
    unsafe fn load_masked(&self, i: usize, mask: __mmask16) -> __m512 {
        _mm512_maskz_loadu_ps(mask, self.0.as_ptr().add(4 * i).cast())
    }
}

impl Row for F16Row<'_> {
    #[inline(always)]
    unsafe fn load16(&self, i: usize) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(self.0.as_ptr().add(2 * i).cast()))
    }
    #[inline(always)]
    unsafe fn load_masked(&self, i: usize, mask: __mmask16) -> __m512 {
        _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
            mask,
            self.0.as_ptr().add(2 * i).cast(),
        ))
    }
}

#[inline(always)]
unsafe fn widen_bf16(h: __m256i) -> __m512 {
    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
}

impl Row for BF16Row<'_> {
    #[inline(always)]
    unsafe fn load16(&self, i: usize) -> __m512 {
        widen_bf16(_mm256_loadu_si256(self.0.as_ptr().add(2 * i).cast()))
    }
    #[inline(always)]
    unsafe fn load_masked(&self, i: usize, mask: __mmask16) -> __m512 {
        widen_bf16(_mm256_maskz_loadu_epi16(
            mask,
            self.0.as_ptr().add(2 * i).cast(),
        ))
    }
}

/// `Σ row[i] · x[i]`; the row holds `x.len()` elements.
#[inline(always)]
unsafe fn dot<R: Row>(row: R, x: &[f32]) -> f32 {
    let (n, xp) = (x.len(), x.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let at = i + 16 * k;
            *acc = _mm512_fmadd_ps(row.load16(at), _mm512_loadu_ps(xp.add(at)), *acc);
        }
        i += 64;
    }
    while i + 16 <= n {
        acc[0] = _mm512_fmadd_ps(row.load16(i), _mm512_loadu_ps(xp.add(i)), acc[0]);
        i += 16;
    }
    if i < n {
        let mask: __mmask16 = (1u16 << (n - i)) - 1;
        let xv = _mm512_maskz_loadu_ps(mask, xp.add(i));
        acc[1] = _mm512_fmadd_ps(row.load_masked(i, mask), xv, acc[1]);
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(sum)
}

/// # Safety
/// AVX-512 F is available; `row.len() == 4 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn f32(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 4 * x.len(), "F32 dot_f32 lengths");
    dot(F32Row(row), x)
}

/// # Safety
/// AVX-512 F and BW are available; `row.len() == 2 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn f16(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 2 * x.len(), "F16 dot_f32 lengths");
    dot(F16Row(row), x)
}

/// # Safety
/// AVX-512 F and BW are available; `row.len() == 2 * x.len()`.
#[inline(always)]
pub(crate) unsafe fn bf16(row: &[u8], x: &[f32]) -> f32 {
    assert_eq!(row.len(), 2 * x.len(), "BF16 dot_f32 lengths");
    dot(BF16Row(row), x)
}

/// `out[t·stride + r]` = [`dot`] of row `r` of `w` (`n_rows` rows of `ty`, back to back) and
/// token `t` of `x` (`n_tok` rows of `n` floats), bit for bit, in tiles of 4 rows × 4 tokens:
/// each loaded weight vector serves four tokens and each token vector four rows. `false`
/// (nothing written) unless `ty` is a float type and `n` a multiple of 16 (no masked tail).
///
/// # Safety
/// AVX-512 F and BW are available; `w` holds `n_rows` rows of `n` elements of `ty`, `x`
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
        T::F32 => job.run::<Kernel, _, 4>(F32Row),
        T::F16 => job.run::<Kernel, _, 4>(F16Row),
        T::BF16 => job.run::<Kernel, _, 4>(BF16Row),
        _ => return false,
    }
    true
}

/// This path's vectors for the tiles of [`gemm`] (`float_tiles.rs`), as [`dot`] uses them.
struct Kernel;

impl Lanes for Kernel {
    type V = __m512;
    const WIDTH: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn reduce(acc: [__m512; 4]) -> f32 {
        let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        _mm512_reduce_add_ps(sum)
    }
}

impl<R: Row> RowLanes<Kernel> for R {
    #[inline(always)]
    unsafe fn lanes(&self, i: usize) -> __m512 {
        self.load16(i)
    }
}
