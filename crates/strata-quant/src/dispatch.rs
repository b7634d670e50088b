//! Run-time choice of the kernel instruction set: one binary, built for baseline x86-64 or
//! aarch64, runs the best kernels the CPU has.
//!
//! [`Isa::best`] probes the CPU once (`is_x86_feature_detected!`,
//! `is_aarch64_feature_detected!`) and caches the answer; the
//! public entry points ([`crate::vec_dot`], [`crate::quantize`], [`crate::dot_f32`]) use it, and
//! the `*_on` variants ([`crate::vec_dot_on`] …) run one named path, for tests and benchmarks.
//! A type without a kernel on the chosen path runs the scalar reference.
//!
//! The byte-row functions reach the kernels through [`Kernels`]: [`Supported`] (a path of
//! [`Isa`]) in the library, and `crate::testing`'s twin of the AVX-VNNI path in the tests.

use std::fmt;
use std::sync::OnceLock;

use strata_gguf::GgmlType;

use crate::gemm::Job;
use crate::QuantError;

/// An instruction-set path of the kernels, from slowest to fastest within one architecture.
/// Paths of another architecture than the one the binary was built for are never available.
///
/// ```
/// use strata_quant::Isa;
///
/// assert!(Isa::Scalar.is_available());
/// let best = Isa::best();
/// assert!(best.is_available());
/// assert_eq!(Isa::from_name(best.name()), Some(best));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Isa {
    /// Portable Rust: the reference kernels, on every CPU.
    Scalar,
    /// aarch64 AdvSIMD (NEON, 128-bit) with the `dotprod` extension's `SDOT` (Armv8.2-A and
    /// later: Apple M1+, AWS Graviton2+, Cortex-A76+, Raspberry Pi 5). Cores without
    /// `dotprod` (Cortex-A72, Raspberry Pi 4) run [`Isa::Scalar`].
    Neon,
    /// AVX2 + FMA + F16C, 256-bit (x86-64 since Haswell and Zen 1).
    Avx2,
    /// AVX2 with AVX-VNNI's integer dot instructions (Alder Lake, Zen 5).
    AvxVnni,
    /// AVX-512 F, BW, VL and VNNI with the AVX2 set (Ice Lake, Zen 4 and later).
    Avx512,
}

/// Environment variable that caps [`Isa::best`] (`scalar`, `neon`, `avx2`, `avxvnni`,
/// `avx512`), for comparing paths end to end. Unknown values are ignored.
pub const ISA_ENV: &str = "STRATA_ISA";

impl Isa {
    /// Every path, slowest first within one architecture (the order [`ISA_ENV`] caps by).
    pub const ALL: [Isa; 5] = [Isa::Scalar, Isa::Neon, Isa::Avx2, Isa::AvxVnni, Isa::Avx512];

    /// The lower-case name used by [`ISA_ENV`] and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Neon => "neon",
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avxvnni",
            Isa::Avx512 => "avx512",
        }
    }

    /// The path called `name` (as [`Isa::name`] spells it), if any.
    pub fn from_name(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|isa| isa.name() == name)
    }

    /// Whether this CPU has every feature the path needs.
    pub fn is_available(self) -> bool {
        detect(self)
    }

    /// The path [`ISA_ENV`] names, if it is set to a known name; read once per process. Other
    /// kernels (e.g. attention's) cap their own paths by it, in this enum's order.
    pub fn cap() -> Option<Isa> {
        static CAP: OnceLock<Option<Isa>> = OnceLock::new();
        *CAP.get_or_init(|| {
            std::env::var(ISA_ENV)
                .ok()
                .and_then(|v| Isa::from_name(v.trim()))
        })
    }

    /// The fastest available path, at most the one named by [`ISA_ENV`] if that is set; probed
    /// once per process.
    pub fn best() -> Isa {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| {
            let cap = Isa::cap();
            Isa::ALL
                .into_iter()
                .rev()
                .filter(|isa| cap.is_none_or(|cap| *isa <= cap))
                .find(|isa| isa.is_available())
                .unwrap_or(Isa::Scalar)
        })
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(target_arch = "x86_64")]
fn detect(isa: Isa) -> bool {
    let avx2 = || {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    };
    match isa {
        Isa::Scalar => true,
        Isa::Neon => false,
        Isa::Avx2 => avx2(),
        Isa::AvxVnni => avx2() && is_x86_feature_detected!("avxvnni"),
        Isa::Avx512 => {
            avx2()
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni")
        }
    }
}

#[cfg(target_arch = "aarch64")]
fn detect(isa: Isa) -> bool {
    match isa {
        Isa::Scalar => true,
        Isa::Neon => {
            std::arch::is_aarch64_feature_detected!("neon")
                && std::arch::is_aarch64_feature_detected!("dotprod")
        }
        Isa::Avx2 | Isa::AvxVnni | Isa::Avx512 => false,
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect(isa: Isa) -> bool {
    isa == Isa::Scalar
}

/// An [`Isa`] this CPU supports: only [`Supported::best`] and [`Supported::check`] make one,
/// so holding one is the proof the SIMD entry points below need.
#[derive(Clone, Copy, Debug)]
// Read only by the SIMD entry points (x86-64 and aarch64).
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub(crate) struct Supported(Isa);

impl Supported {
    pub(crate) fn best() -> Self {
        Supported(Isa::best())
    }

    pub(crate) fn check(isa: Isa) -> Result<Self, QuantError> {
        if isa.is_available() {
            Ok(Supported(isa))
        } else {
            Err(QuantError::IsaUnavailable { isa })
        }
    }
}

/// The SIMD kernels of one path, as the byte-row functions ([`crate::vec_dot`] …,
/// [`crate::gemm()`]) call them after checking the lengths; `None` or `false` (nothing written)
/// where `ty` has no SIMD kernel on the path, so the caller runs the scalar one. A value of an
/// implementing type is the proof that the CPU can run the path: [`Supported`], and
/// `crate::testing::AvxVnniTwin` for the tests.
pub(crate) trait Kernels: Copy {
    /// As [`vec_dot`].
    fn vec_dot(self, ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32>;
    /// As [`vec_dot_rows`].
    fn vec_dot_rows(self, ty: GgmlType, w: &[u8], act: &[u8], out: &mut [f32]) -> bool;
    /// As [`quantize`].
    fn quantize(self, ty: GgmlType, src: &[f32], dst: &mut [u8]) -> bool;
    /// As [`dot_f32`].
    fn dot_f32(self, ty: GgmlType, row: &[u8], x: &[f32]) -> Option<f32>;
    /// As [`gemm_tiles`].
    fn gemm_tiles(self, ty: GgmlType, job: Job<'_>) -> bool;
}

impl Kernels for Supported {
    #[inline]
    fn vec_dot(self, ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32> {
        vec_dot(self, ty, row, act)
    }
    #[inline]
    fn vec_dot_rows(self, ty: GgmlType, w: &[u8], act: &[u8], out: &mut [f32]) -> bool {
        vec_dot_rows(self, ty, w, act, out)
    }
    #[inline]
    fn quantize(self, ty: GgmlType, src: &[f32], dst: &mut [u8]) -> bool {
        quantize(self, ty, src, dst)
    }
    #[inline]
    fn dot_f32(self, ty: GgmlType, row: &[u8], x: &[f32]) -> Option<f32> {
        dot_f32(self, ty, row, x)
    }
    #[inline]
    fn gemm_tiles(self, ty: GgmlType, job: Job<'_>) -> bool {
        gemm_tiles(self, ty, job)
    }
}

/// The SIMD `vec_dot` of `ty` on `cpu`'s path; `None` where only the scalar kernel exists.
/// `row` and `act` hold the same whole number of blocks of `ty` and its `vec_dot_type`.
#[inline]
pub(crate) fn vec_dot(cpu: Supported, ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::dot::x86;
        // SAFETY: `Supported` holds only paths whose features `detect` found on this CPU, and
        // each entry point enables exactly its path's features; the caller checked the lengths.
        unsafe {
            match cpu.0 {
                Isa::Scalar | Isa::Neon => None,
                Isa::Avx2 => x86::vec_dot_avx2(ty, row, act),
                Isa::AvxVnni => x86::vec_dot_avxvnni(ty, row, act),
                Isa::Avx512 => x86::vec_dot_avx512(ty, row, act),
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use crate::dot::aarch64;
        // SAFETY: as on x86-64: `Supported` holds only paths `detect` found on this CPU, and the
        // entry point enables exactly the path's features; the caller checked the lengths.
        unsafe {
            match cpu.0 {
                Isa::Neon => aarch64::vec_dot_neon(ty, row, act),
                _ => None,
            }
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (cpu, ty, row, act);
        None
    }
}

/// The SIMD `vec_dot` of every row of `w` (`out.len()` rows of `ty` back to back) with `act`
/// into `out` (on x86-64 prefetching ahead of each row); `false` (nothing written) where only
/// the scalar kernel exists. Lengths as for [`vec_dot`], `out` not empty.
#[inline]
pub(crate) fn vec_dot_rows(
    cpu: Supported,
    ty: GgmlType,
    w: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::dot::x86;
        // SAFETY: as in `vec_dot`; `out` is not empty.
        unsafe {
            match cpu.0 {
                Isa::Scalar | Isa::Neon => false,
                Isa::Avx2 => x86::vec_dot_rows_avx2(ty, w, act, out),
                Isa::AvxVnni => x86::vec_dot_rows_avxvnni(ty, w, act, out),
                Isa::Avx512 => x86::vec_dot_rows_avx512(ty, w, act, out),
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use crate::dot::aarch64;
        // SAFETY: as in `vec_dot`; `out` is not empty.
        unsafe {
            match cpu.0 {
                Isa::Neon => aarch64::vec_dot_rows_neon(ty, w, act, out),
                _ => false,
            }
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (cpu, ty, w, act, out);
        false
    }
}

/// The SIMD `quantize` into `ty` on `cpu`'s path; `false` (nothing written) where only the
/// scalar quantizer exists. `dst` holds exactly the blocks of `src`.
#[inline]
pub(crate) fn quantize(cpu: Supported, ty: GgmlType, src: &[f32], dst: &mut [u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::dot::x86;
        // SAFETY: as in `vec_dot`.
        unsafe {
            match cpu.0 {
                Isa::Scalar | Isa::Neon => false,
                Isa::Avx2 => x86::quantize_avx2(ty, src, dst),
                Isa::AvxVnni => x86::quantize_avxvnni(ty, src, dst),
                Isa::Avx512 => x86::quantize_avx512(ty, src, dst),
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use crate::dot::aarch64;
        // SAFETY: as in `vec_dot`.
        unsafe {
            match cpu.0 {
                Isa::Neon => aarch64::quantize_neon(ty, src, dst),
                _ => false,
            }
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (cpu, ty, src, dst);
        false
    }
}

/// The SIMD tiles of `gemm_f32` on `cpu`'s path: `out[t·stride + r]` = [`dot_f32`] of row
/// `r` of `w` and token `t` of `x`, bit for bit; `false` (nothing written) where the path has
/// none for `ty` or `n`. The caller checked the lengths (`w`: `n_rows` rows of `n` elements,
/// `x`: `n_tok · n` floats, `out`: `(n_tok − 1)·stride + n_rows` floats at least).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_f32(
    cpu: Supported,
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    x: &[f32],
    n: usize,
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::dot::x86;
        // SAFETY: as in `vec_dot`.
        unsafe {
            match cpu.0 {
                Isa::Scalar | Isa::Neon => false,
                Isa::Avx2 => x86::gemm_f32_avx2(ty, w, n_rows, x, n, n_tok, out, stride),
                Isa::AvxVnni => x86::gemm_f32_avxvnni(ty, w, n_rows, x, n, n_tok, out, stride),
                Isa::Avx512 => x86::gemm_f32_avx512(ty, w, n_rows, x, n, n_tok, out, stride),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (cpu, ty, w, n_rows, x, n, n_tok, out, stride);
        false
    }
}

/// The SIMD `dot_f32` of a `ty` row on `cpu`'s path; `None` where only the scalar kernel
/// exists. `row` holds exactly `x.len()` elements of `ty`.
#[inline]
pub(crate) fn dot_f32(cpu: Supported, ty: GgmlType, row: &[u8], x: &[f32]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::dot::x86;
        // SAFETY: as in `vec_dot`.
        unsafe {
            match cpu.0 {
                Isa::Scalar | Isa::Neon => None,
                Isa::Avx2 => x86::dot_f32_avx2(ty, row, x),
                Isa::AvxVnni => x86::dot_f32_avxvnni(ty, row, x),
                Isa::Avx512 => x86::dot_f32_avx512(ty, row, x),
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use crate::dot::aarch64;
        // SAFETY: as in `vec_dot`.
        unsafe {
            match cpu.0 {
                Isa::Neon => aarch64::dot_f32_neon(ty, row, x),
                _ => None,
            }
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (cpu, ty, row, x);
        None
    }
}

/// The GEMM tiles of `ty` on `cpu`'s path; `false` (nothing written) where `ty` has none there.
/// `gemm` checked the lengths of `job`.
#[inline]
pub(crate) fn gemm_tiles(cpu: Supported, ty: GgmlType, job: Job<'_>) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::gemm::x86;
        // SAFETY: as in `vec_dot`; `gemm` checked the lengths of `job`.
        unsafe {
            match cpu.0 {
                Isa::Scalar | Isa::Neon => false,
                Isa::Avx2 => x86::gemm_avx2(ty, job),
                Isa::AvxVnni => x86::gemm_avxvnni(ty, job),
                Isa::Avx512 => x86::gemm_avx512(ty, job),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (cpu, ty, job);
        false
    }
}
