//! Hooks for this crate's own tests (tests/simd.rs, tests/gemm.rs); hidden from the docs and
//! not part of the API: no stability, no use outside the tests.
//!
//! [`AvxVnniTwin`] runs the AVX-VNNI path's kernels on CPUs that lack AVX-VNNI. That path
//! ([`Isa::AvxVnni`](crate::Isa::AvxVnni)) is the default on Intel's consumer cores from Alder
//! Lake on, yet the machines the tests run on cannot execute it: AMD Zen 4 has AVX-512 VNNI but
//! not the VEX-encoded AVX-VNNI, and QEMU's TCG emulates neither (checked on 7.2 and 10.0).
//! The VEX (`_mm256_dpbusd_avx_epi32`) and EVEX (`_mm256_dpbusd_epi32` under AVX-512 VNNI + VL)
//! encodings of `vpdpbusd` and `vpdpwssd` on 256-bit registers compute the same lanes, so the
//! twin is the AVX-VNNI path with only those two instructions' encoding swapped: the same
//! generic AVX2 kernels, quantizers, row loop and GEMM tiles, the same integer-dot semantics
//! (no saturation, unlike plain AVX2) and the same choice of loads over gathers.
//!
//! What the twin does not check: the VEX encoding itself, and code generation for a target
//! without AVX-512 (its functions are compiled with AVX-512 enabled, so the compiler may pick
//! other instructions and registers for the same intrinsics). Both are the compiler's job;
//! the kernels' logic under AVX-VNNI's semantics is what the twin tests.

use crate::{GgmlType, QuantError};

/// The AVX-VNNI path run with the EVEX encodings of its VNNI instructions (see the module
/// docs). Only [`AvxVnniTwin::new`] makes one, where the CPU can run it; its methods behave as
/// the `*_on` functions with [`Isa::AvxVnni`](crate::Isa::AvxVnni) would, errors included
/// (types without a SIMD kernel run the scalar one).
///
/// ```
/// use strata_quant::{testing::AvxVnniTwin, GgmlType};
///
/// if let Some(twin) = AvxVnniTwin::new() {
///     let act = vec![0u8; 34]; // one zero Q8_0 block
///     assert_eq!(twin.vec_dot(GgmlType::Q8_0, &act, &act)?, 0.0);
/// }
/// # Ok::<(), strata_quant::QuantError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct AvxVnniTwin {
    _proof: (),
}

impl AvxVnniTwin {
    /// The twin's name in test messages and in the tests' `STRATA_TEST_REQUIRE_ISA`.
    pub const NAME: &'static str = "avxvnni-evex";

    /// The twin where this CPU has AVX2, FMA, F16C and AVX-512 F, BW, VL and VNNI (the features
    /// its functions are compiled with); `None` elsewhere, aarch64 included.
    pub fn new() -> Option<Self> {
        // `Isa::Avx512` needs exactly the twin's feature list.
        (cfg!(target_arch = "x86_64") && crate::Isa::Avx512.is_available())
            .then_some(AvxVnniTwin { _proof: () })
    }

    /// [`crate::vec_dot_on`] on the twin.
    ///
    /// # Errors
    /// As [`crate::vec_dot`].
    pub fn vec_dot(self, ty: GgmlType, row: &[u8], act: &[u8]) -> Result<f32, QuantError> {
        crate::vec_dot_with(self, ty, row, act)
    }

    /// [`crate::quantize_on`] on the twin.
    ///
    /// # Errors
    /// As [`crate::quantize`].
    pub fn quantize(self, ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
        crate::quantize_with(self, ty, src, dst)
    }

    /// [`crate::dot_f32_on`] on the twin.
    ///
    /// # Errors
    /// As [`crate::dot_f32`].
    pub fn dot_f32(self, ty: GgmlType, row: &[u8], x: &[f32]) -> Result<f32, QuantError> {
        crate::dot_f32_with(self, ty, row, x)
    }

    /// [`crate::gemm_on`] on the twin (one token: the row loop of `vec_dot`).
    ///
    /// # Errors
    /// As [`crate::gemm`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        self,
        ty: GgmlType,
        w: &[u8],
        n_rows: usize,
        acts: &[u8],
        n_tok: usize,
        out: &mut [f32],
        out_stride: usize,
    ) -> Result<(), QuantError> {
        crate::gemm::gemm_with(self, ty, w, n_rows, acts, n_tok, out, out_stride)
    }
}

#[cfg(target_arch = "x86_64")]
mod kernels {
    use super::AvxVnniTwin;
    use crate::dispatch::Kernels;
    use crate::dot::x86;
    use crate::gemm::{x86 as gemm_x86, Job};
    use crate::GgmlType;

    // SAFETY (every block below): an `AvxVnniTwin` exists only where `new` found every feature
    // the `*_avxvnni_evex` entry points are compiled with, and the callers checked the lengths
    // as for `Supported`.
    impl Kernels for AvxVnniTwin {
        fn vec_dot(self, ty: GgmlType, row: &[u8], act: &[u8]) -> Option<f32> {
            // SAFETY: see above.
            unsafe { x86::vec_dot_avxvnni_evex(ty, row, act) }
        }
        fn vec_dot_rows(self, ty: GgmlType, w: &[u8], act: &[u8], out: &mut [f32]) -> bool {
            // SAFETY: see above; `out` is not empty.
            unsafe { x86::vec_dot_rows_avxvnni_evex(ty, w, act, out) }
        }
        fn quantize(self, ty: GgmlType, src: &[f32], dst: &mut [u8]) -> bool {
            // SAFETY: see above.
            unsafe { x86::quantize_avxvnni_evex(ty, src, dst) }
        }
        fn dot_f32(self, ty: GgmlType, row: &[u8], x: &[f32]) -> Option<f32> {
            // SAFETY: see above.
            unsafe { x86::dot_f32_avxvnni_evex(ty, row, x) }
        }
        fn gemm_tiles(self, ty: GgmlType, job: Job<'_>) -> bool {
            // SAFETY: see above.
            unsafe { gemm_x86::gemm_avxvnni_evex(ty, job) }
        }
    }
}

// Elsewhere `new` makes no twin, so these never run: the scalar kernels would answer anyway.
#[cfg(not(target_arch = "x86_64"))]
impl crate::dispatch::Kernels for AvxVnniTwin {
    fn vec_dot(self, _: GgmlType, _: &[u8], _: &[u8]) -> Option<f32> {
        None
    }
    fn vec_dot_rows(self, _: GgmlType, _: &[u8], _: &[u8], _: &mut [f32]) -> bool {
        false
    }
    fn quantize(self, _: GgmlType, _: &[f32], _: &mut [u8]) -> bool {
        false
    }
    fn dot_f32(self, _: GgmlType, _: &[u8], _: &[f32]) -> Option<f32> {
        None
    }
    fn gemm_tiles(self, _: GgmlType, _: crate::gemm::Job<'_>) -> bool {
        false
    }
}

thread_local! {
    static NO_VBMI: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's kernels acting as if the CPU lacked AVX512-VBMI: the AVX-512
/// path then takes the kernels of AVX-512 CPUs without it (Cascade Lake, Cooper Lake), which a
/// Zen 4, Zen 5 or Ice Lake machine would otherwise never run. Per thread, so tests running
/// side by side are not affected.
///
/// ```
/// let v = strata_quant::testing::without_vbmi(|| 1 + 1);
/// assert_eq!(v, 2);
/// ```
pub fn without_vbmi<R>(f: impl FnOnce() -> R) -> R {
    scoped(&NO_VBMI, true, f)
}

/// Runs `f` with this thread's `cell` set to `value`, restoring the old value afterwards (also
/// when `f` panics): the per-thread overrides of this module.
pub(crate) fn scoped<T: Copy + 'static, R>(
    cell: &'static std::thread::LocalKey<std::cell::Cell<T>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore<T: Copy + 'static>(&'static std::thread::LocalKey<std::cell::Cell<T>>, T);
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.with(|c| c.set(self.1));
        }
    }
    let _restore = Restore(cell, cell.with(|c| c.replace(value)));
    f()
}

/// Whether the kernels may use AVX512-VBMI (and BITALG) on this thread: the CPU has them and
/// no [`without_vbmi`] is running.
#[cfg(target_arch = "x86_64")]
pub fn vbmi() -> bool {
    is_x86_feature_detected!("avx512vbmi")
        && is_x86_feature_detected!("avx512bitalg")
        && !NO_VBMI.with(|c| c.get())
}
