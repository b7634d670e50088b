//! Vector kernels of attention that are not the tile loops: f16 → f32 row conversion, the
//! rounding of queries to f16, and the lane tree sum of the softmax. The AVX-512 and AVX2 + F16C
//! kernels (`x86.rs`) perform exactly the scalar operations, so every path gives the same bits
//! (tested against the scalar reference in `tests.rs`).

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
            // FMA for the softmax weights' `ops::exp` (its multiply-adds).
            let fma = std::arch::is_x86_feature_detected!("fma");
            if !below_avx512
                && fma
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("f16c")
            {
                return Isa::Avx512;
            }
            if fma
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }
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

/// An element of a key cache row: f32 or f16, read as f32 exactly.
pub(super) trait Elem: Copy {
    fn f32(self) -> f32;
}

impl Elem for f32 {
    #[inline(always)]
    fn f32(self) -> f32 {
        self
    }
}

impl Elem for f16 {
    #[inline(always)]
    fn f32(self) -> f32 {
        f16_to_f32(self.to_bits())
    }
}

/// `dst[c·dst_stride + r] = f32(src[r·src_stride + c])` for `r < rows`, `c < cols`: a block
/// converted (exactly) and moved to its transpose, so every path gives the same bits. On
/// x86-64 in 8 × 8 blocks with AVX + F16C, the edges one by one.
#[allow(clippy::too_many_arguments)]
pub(super) fn transpose<T: Elem + TransposeSimd>(
    isa: Isa,
    src: &[T],
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
    rows: usize,
    cols: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(
        src.len() >= (rows - 1) * src_stride + cols,
        "transpose source too short"
    );
    assert!(
        dst.len() >= (cols - 1) * dst_stride + rows,
        "transpose target too short"
    );
    #[cfg(target_arch = "x86_64")]
    let (r8, c8) = if isa == Isa::Scalar {
        (0, 0)
    } else {
        let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
        for r in (0..r8).step_by(8) {
            for c in (0..c8).step_by(8) {
                // SAFETY: AVX and F16C are part of both x86 paths (`Isa::detect`); the block
                // lies inside both slices by the asserts above.
                unsafe {
                    super::x86::avx::transpose8(
                        &src[r * src_stride + c..],
                        src_stride,
                        &mut dst[c * dst_stride + r..],
                        dst_stride,
                    )
                };
            }
        }
        (r8, c8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let (r8, c8) = {
        let _ = isa;
        (0, 0)
    };
    for r in 0..rows {
        let c_from = if r < r8 { c8 } else { 0 };
        for c in c_from..cols {
            dst[c * dst_stride + r] = src[r * src_stride + c].f32();
        }
    }
}

/// The element types [`transpose`] has an x86-64 block kernel for.
#[cfg(target_arch = "x86_64")]
pub(super) use super::x86::avx::Load8 as TransposeSimd;
/// The element types [`transpose`] takes (no block kernel off x86-64).
#[cfg(not(target_arch = "x86_64"))]
pub(super) trait TransposeSimd {}
#[cfg(not(target_arch = "x86_64"))]
impl TransposeSimd for f32 {}
#[cfg(not(target_arch = "x86_64"))]
impl TransposeSimd for f16 {}

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
