//! The SPIR-V that build.rs compiled from `shaders/*.comp`, by kernel and variant.

use strata_quant::GgmlType;

mod spirv {
    include!(concat!(env!("OUT_DIR"), "/spirv.rs"));
}

pub(crate) use spirv::{
    ADD, ADD_GATED, ATTENTION, ATTENTION_F16, ATTENTION_SPARSE, ATTENTION_SPARSE_F16, CONV1D,
    COPY_COLS, DELTA_GATES, DELTA_RULE, GATE, GLU, HC_COLLAPSE, HC_EXPAND_ADD, KV_STORE,
    KV_STORE_F16, L2_NORM, PLE_GATE, RMS_NORM, ROPE, SCALE, SILU, SOFTCAP,
};

/// The grid and sign tables of the i-quants as one blob of u32 words (build.rs writes it from
/// strata-quant's tables; `iq_tables.glsl` holds each table's offset).
pub(crate) const IQ_TABLES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/iq_tables.bin"));

/// Whether the kernels of `ty` read [`IQ_TABLES`] (bound after their other buffers).
pub(crate) fn uses_iq_tables(ty: GgmlType) -> bool {
    use GgmlType as T;
    matches!(
        ty,
        T::IQ2_XXS | T::IQ2_XS | T::IQ2_S | T::IQ3_XXS | T::IQ3_S | T::IQ1_S | T::IQ1_M
    )
}

/// The matrix-vector kernel for weight type `ty` as `(name, SPIR-V)`; `None` for a type
/// without a kernel.
pub(crate) fn mul_mat_vec(ty: GgmlType) -> Option<(&'static str, &'static [u8])> {
    macro_rules! pick {
        ($($t:ident => $k:ident;)*) => {
            match ty {
                $(GgmlType::$t => Some((stringify!($k), spirv::$k)),)*
                _ => None,
            }
        };
    }
    pick! {
        F32 => MUL_MAT_VEC_F32; F16 => MUL_MAT_VEC_F16; BF16 => MUL_MAT_VEC_BF16;
        Q4_0 => MUL_MAT_VEC_Q4_0; Q4_1 => MUL_MAT_VEC_Q4_1; Q5_0 => MUL_MAT_VEC_Q5_0;
        Q5_1 => MUL_MAT_VEC_Q5_1; Q8_0 => MUL_MAT_VEC_Q8_0; IQ4_NL => MUL_MAT_VEC_IQ4_NL;
        IQ4_XS => MUL_MAT_VEC_IQ4_XS; Q2_K => MUL_MAT_VEC_Q2_K; Q3_K => MUL_MAT_VEC_Q3_K;
        Q4_K => MUL_MAT_VEC_Q4_K; Q5_K => MUL_MAT_VEC_Q5_K; Q6_K => MUL_MAT_VEC_Q6_K;
        IQ2_XXS => MUL_MAT_VEC_IQ2_XXS; IQ2_XS => MUL_MAT_VEC_IQ2_XS;
        IQ2_S => MUL_MAT_VEC_IQ2_S; IQ3_XXS => MUL_MAT_VEC_IQ3_XXS; IQ3_S => MUL_MAT_VEC_IQ3_S;
        IQ1_S => MUL_MAT_VEC_IQ1_S; IQ1_M => MUL_MAT_VEC_IQ1_M;
    }
}

/// The tiled matrix-matrix (prefill) kernel for weight type `ty` as `(name, SPIR-V)`; `None`
/// for a type without a kernel.
pub(crate) fn mul_mm(ty: GgmlType) -> Option<(&'static str, &'static [u8])> {
    macro_rules! pick {
        ($($t:ident => $k:ident;)*) => {
            match ty {
                $(GgmlType::$t => Some((stringify!($k), spirv::$k)),)*
                _ => None,
            }
        };
    }
    pick! {
        F32 => MUL_MM_F32; F16 => MUL_MM_F16; BF16 => MUL_MM_BF16;
        Q4_0 => MUL_MM_Q4_0; Q4_1 => MUL_MM_Q4_1; Q5_0 => MUL_MM_Q5_0;
        Q5_1 => MUL_MM_Q5_1; Q8_0 => MUL_MM_Q8_0; IQ4_NL => MUL_MM_IQ4_NL;
        IQ4_XS => MUL_MM_IQ4_XS; Q2_K => MUL_MM_Q2_K; Q3_K => MUL_MM_Q3_K;
        Q4_K => MUL_MM_Q4_K; Q5_K => MUL_MM_Q5_K; Q6_K => MUL_MM_Q6_K;
        IQ2_XXS => MUL_MM_IQ2_XXS; IQ2_XS => MUL_MM_IQ2_XS; IQ2_S => MUL_MM_IQ2_S;
        IQ3_XXS => MUL_MM_IQ3_XXS; IQ3_S => MUL_MM_IQ3_S; IQ1_S => MUL_MM_IQ1_S;
        IQ1_M => MUL_MM_IQ1_M;
    }
}

/// The row-gather kernel for weight type `ty` as `(name, SPIR-V)`; `None` for a type without
/// a kernel.
pub(crate) fn get_rows(ty: GgmlType) -> Option<(&'static str, &'static [u8])> {
    macro_rules! pick {
        ($($t:ident => $k:ident;)*) => {
            match ty {
                $(GgmlType::$t => Some((stringify!($k), spirv::$k)),)*
                _ => None,
            }
        };
    }
    pick! {
        F32 => GET_ROWS_F32; F16 => GET_ROWS_F16; BF16 => GET_ROWS_BF16;
        Q4_0 => GET_ROWS_Q4_0; Q4_1 => GET_ROWS_Q4_1; Q5_0 => GET_ROWS_Q5_0;
        Q5_1 => GET_ROWS_Q5_1; Q8_0 => GET_ROWS_Q8_0; IQ4_NL => GET_ROWS_IQ4_NL;
        IQ4_XS => GET_ROWS_IQ4_XS; Q2_K => GET_ROWS_Q2_K; Q3_K => GET_ROWS_Q3_K;
        Q4_K => GET_ROWS_Q4_K; Q5_K => GET_ROWS_Q5_K; Q6_K => GET_ROWS_Q6_K;
        IQ2_XXS => GET_ROWS_IQ2_XXS; IQ2_XS => GET_ROWS_IQ2_XS; IQ2_S => GET_ROWS_IQ2_S;
        IQ3_XXS => GET_ROWS_IQ3_XXS; IQ3_S => GET_ROWS_IQ3_S; IQ1_S => GET_ROWS_IQ1_S;
        IQ1_M => GET_ROWS_IQ1_M;
    }
}

/// The weight types [`crate::Kernels::matmul`] multiplies and [`crate::Kernels::get_rows`]
/// gathers.
pub const MATMUL_TYPES: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
];

#[cfg(test)]
mod tests {
    use strata_quant::iq_tables::*;

    #[test]
    fn iq_table_blob_is_strata_quants_tables_in_the_order_of_iq_tables_glsl() {
        let u64s = |t: &[u64]| -> Vec<u8> { t.iter().flat_map(|p| p.to_le_bytes()).collect() };
        let u32s = |t: &[u32]| -> Vec<u8> { t.iter().flat_map(|p| p.to_le_bytes()).collect() };
        let mut want = Vec::new();
        want.extend(u64s(&IQ2XXS_GRID));
        want.extend(u64s(&IQ2XS_GRID));
        want.extend(u64s(&IQ2S_GRID));
        want.extend(u32s(&IQ3XXS_GRID));
        want.extend(u32s(&IQ3S_GRID));
        want.extend(u64s(&IQ1S_GRID));
        want.extend(u32s(&KSIGNS_IQ2XS.map(u32::from)));
        assert_eq!(super::IQ_TABLES, &want[..]);
    }
}
