//! Vector kernels of attention: query·key dot products straight from cache rows (f16 rows
//! converted in registers with `vcvtph2ps`) and f16 → f32 row conversion.
//!
//! Every dot product has one fixed order, defined by [`dot_ref`]: 16 lane sums of products
//! (no FMA), folded as a tree (lanes `i + 8`, then `i + 4`, `i + 2`, `i + 1`, the order of an
//! AVX-512 `reduce_add`), then the `hd mod 16` leftover products added one by one. The AVX-512
//! and AVX2 + F16C kernels perform exactly these operations, so every path gives the same
//! bits (tested against the scalar reference in `tests.rs`).

use half::f16;

#[cfg(target_arch = "x86_64")]
use super::x86::{avx2, avx512};

/// The instruction set the kernels run on, chosen once per call of `attention`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    Scalar,
    /// AVX2 with F16C (every AVX2 CPU has it).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest path this CPU supports, at most the one `STRATA_ISA` names
    /// ([`strata_quant::Isa::cap`], in [`strata_quant::Isa`]'s order: below `avx2` caps at
    /// scalar, below `avx512` at AVX2), so one variable selects the path of every kernel for
    /// end-to-end comparisons. Probed once.
    pub(super) fn detect() -> Isa {
        static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| Isa::widest(strata_quant::Isa::cap()))
    }

    fn widest(cap: Option<strata_quant::Isa>) -> Isa {
        use strata_quant::Isa as Q;
        if cap.is_some_and(|c| c < Q::Avx2) {
            return Isa::Scalar;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let below_avx512 = cap.is_some_and(|c| c < Q::Avx512);
            if !below_avx512 && std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }
}

/// A cache element: f32 or f16 (converted exactly to f32 on load).
pub(super) trait KeyElem: Copy {
    fn to_f32(self) -> f32;
    /// Loads 16 elements as f32. Safety: `p .. p + 16` readable, AVX-512F available.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512;
    /// Loads 8 elements as f32. Safety: `p .. p + 8` readable, AVX + F16C available.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl KeyElem for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> std::arch::x86_64::__m512 {
        std::arch::x86_64::_mm512_loadu_ps(p)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(p)
    }
}

impl KeyElem for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16_to_f32(self.to_bits())
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f16) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
}

/// Scores of queries against cache rows: `out[i·out_stride + j] = q_i · k_j` for query `i` of
/// `q` (`[n_q][hd]`) and key `j < n` at `k[j·row ..][..hd]` (a strided view of the cache).
///
/// Panics if `k` is shorter than `(n − 1)·row + hd` or `out` too short.
#[allow(clippy::too_many_arguments)]
pub(super) fn scores<E: KeyElem>(
    isa: Isa,
    q: &[f32],
    hd: usize,
    k: &[E],
    row: usize,
    n: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    if n == 0 || q.is_empty() {
        return;
    }
    let n_q = q.len() / hd;
    assert!(k.len() >= (n - 1) * row + hd, "key rows out of range");
    assert!(
        out.len() >= (n_q - 1) * out_stride + n,
        "score buffer too short"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is present (`Isa::detect`); bounds asserted above.
        Isa::Avx512 => unsafe { avx512::scores(q, hd, k, row, n, out, out_stride) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and F16C are present (`Isa::detect`); bounds asserted above.
        Isa::Avx2 => unsafe { avx2::scores(q, hd, k, row, n, out, out_stride) },
        Isa::Scalar => {
            for (i, qi) in q.chunks_exact(hd).enumerate() {
                for j in 0..n {
                    out[i * out_stride + j] = dot_ref(qi, &k[j * row..j * row + hd]);
                }
            }
        }
    }
}

/// The reference dot product whose order every kernel reproduces (see the module docs).
pub(super) fn dot_ref<E: KeyElem>(q: &[f32], k: &[E]) -> f32 {
    let mut acc = [0.0f32; 16];
    let body = q.len() / 16 * 16;
    for (qc, kc) in q[..body].chunks_exact(16).zip(k.chunks_exact(16)) {
        for i in 0..16 {
            acc[i] += qc[i] * kc[i].to_f32();
        }
    }
    let mut s = tree16(acc);
    for (x, y) in q[body..].iter().zip(&k[body..q.len()]) {
        s += x * y.to_f32();
    }
    s
}

/// Sums 16 lanes as `reduce_add` does: halves, then quarters, eighths, last pair.
#[inline(always)]
pub(super) fn tree16(a: [f32; 16]) -> f32 {
    let s8: [f32; 8] = std::array::from_fn(|i| a[i] + a[i + 8]);
    let s4: [f32; 4] = std::array::from_fn(|i| s8[i] + s8[i + 4]);
    let s2 = [s4[0] + s4[2], s4[1] + s4[3]];
    s2[0] + s2[1]
}

/// Converts f16 `src` to f32 `dst` (same length), exactly.
pub(super) fn convert_f16(isa: Isa, src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "conversion lengths differ");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is present (`Isa::detect`); lengths checked above.
        Isa::Avx512 => unsafe { avx512::convert(src, dst) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and F16C are present (`Isa::detect`); lengths checked above.
        Isa::Avx2 => unsafe { avx2::convert(src, dst) },
        Isa::Scalar => {
            for (d, h) in dst.iter_mut().zip(src) {
                *d = f16_to_f32(h.to_bits());
            }
        }
    }
}

/// Appends `src` rounded to the nearest f16 (ties to even) to `dst`, as f32: the query of an
/// f16 cache, as ggml converts it before `mul_mat`.
pub(super) fn extend_rounded_f16(isa: Isa, src: &[f32], dst: &mut Vec<f32>) {
    let at = dst.len();
    dst.resize(at + src.len(), 0.0);
    let dst = &mut dst[at..];
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is present (`Isa::detect`); equal lengths by construction.
        Isa::Avx512 => unsafe { avx512::round_f16(src, dst) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and F16C are present (`Isa::detect`); equal lengths by construction.
        Isa::Avx2 => unsafe { avx2::round_f16(src, dst) },
        Isa::Scalar => {
            for (d, v) in dst.iter_mut().zip(src) {
                *d = f16::from_f32(*v).to_f32();
            }
        }
    }
}

/// Asks the CPU to bring the cache lines of `data` into L1 (a hint: no effect on results).
#[inline(always)]
pub(super) fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        let bytes = std::mem::size_of_val(data);
        let p = data.as_ptr() as *const i8;
        for off in (0..bytes).step_by(64) {
            // SAFETY: `p + off` lies inside `data`; a prefetch never faults or writes.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.add(off))
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// IEEE half → single, exactly, without branches (so loops over it vectorise): the 15 bits
/// of exponent and mantissa shifted into an f32 are the value × 2⁻¹¹², normals and
/// subnormals alike; infinities and NaNs get the all-ones exponent instead.
#[inline(always)]
pub(super) fn f16_to_f32(bits: u16) -> f32 {
    let em = (bits & 0x7fff) as u32;
    let sign = ((bits & 0x8000) as u32) << 16;
    let mag = if em >= 0x7c00 {
        f32::from_bits((em << 13) | 0x7f80_0000)
    } else {
        f32::from_bits(em << 13) * f32::from_bits(0x7780_0000) // 2^112
    };
    f32::from_bits(mag.to_bits() | sign)
}

/// Queries scored together against each converted key chunk (accumulators stay in registers).
#[cfg(target_arch = "x86_64")]
pub(super) const Q_GROUP: usize = 4;
