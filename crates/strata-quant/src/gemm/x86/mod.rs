//! x86-64 GEMM tiles: one `#[target_feature]` entry point per path of `dot/x86`, each
//! instantiating the tile kernels of that path so every intrinsic inlines into code compiled for
//! its instruction set.
//!
//! Each tile mirrors one `vec_dot` kernel in `dot/x86` (its lane layout, FMA chains and
//! reduction): a change to such a kernel needs the same change to its tile here, or
//! tests/gemm.rs fails (bit-identity per path).

mod affine_quad_avx2;
mod avx2;
mod avx512;
mod block_order;
mod block_order_avx2;
mod block_order_lanes_avx2;
mod block_order_pairs;
mod iq3_xxs_lanes;
mod iq3_xxs_pairs;
mod iq3_xxs_vbmi;
mod lattice_lanes;
mod paired_lattice;
mod reduce;
mod row_quad;
mod token_lanes;

use super::tile::Job;
use crate::dot::x86::{AvxVnni, AvxVnniEvex, Madd};
use strata_gguf::GgmlType;

macro_rules! entry_point {
    ($name:ident, $features:literal, |$ty:ident, $job:ident| $body:expr) => {
        /// `gemm` on this path; `false` (nothing written) when `ty` has no tile kernel here.
        ///
        /// # Safety
        /// The CPU supports every feature in the `target_feature` list; `gemm` checked the
        /// lengths of `job`.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name($ty: GgmlType, $job: Job<'_>) -> bool {
            $body
        }
    };
}

entry_point!(gemm_avx2, "avx2,fma,f16c", |ty, job| avx2::gemm::<Madd>(
    ty, job
));

// IQ3_XXS, IQ3_S and IQ2_S run in block order with VNNI, tokens in the lanes
// (`iq3_xxs_lanes.rs`, `lattice_lanes.rs`); in the lane order of `avx2.rs` on plain AVX2.
entry_point!(gemm_avxvnni, "avx2,fma,f16c,avxvnni", |ty, job| match ty {
    GgmlType::IQ3_XXS => iq3_xxs_lanes::gemm256::<AvxVnni>(job),
    GgmlType::IQ3_S => lattice_lanes::gemm256_iq3_s::<AvxVnni>(job),
    GgmlType::IQ2_S => lattice_lanes::gemm256_iq2_s::<AvxVnni>(job),
    _ => avx2::gemm::<AvxVnni>(ty, job),
});

// The AVX-VNNI tiles with AVX-512 VNNI's encodings, for the tests only
// (`crate::testing::AvxVnniTwin`).
entry_point!(
    gemm_avxvnni_evex,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    |ty, job| match ty {
        GgmlType::IQ3_XXS => iq3_xxs_lanes::gemm256::<AvxVnniEvex>(job),
        GgmlType::IQ3_S => lattice_lanes::gemm256_iq3_s::<AvxVnniEvex>(job),
        GgmlType::IQ2_S => lattice_lanes::gemm256_iq2_s::<AvxVnniEvex>(job),
        _ => avx2::gemm::<AvxVnniEvex>(ty, job),
    }
);

entry_point!(
    gemm_avx512,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    |ty, job| avx512::gemm(ty, job)
);
