//! The routed experts (`Backend::moe`) on the device with expert tensors split into row
//! ranges (as a tensor over the device's storage-buffer limit is) whose boundaries fall
//! inside experts: every expert straddling two ranges must give the output of the whole
//! tensors, bit for bit (each output row is the same kernel on the same bytes), and that
//! output must match the CPU's (F32 experts: neither side quantizes activations).

mod common;

use strata_engine::backend::{Backend, Buf, Cpu};
use strata_engine::ops::linear::Matrix;
use strata_engine::ops::moe::{ExpertTensor, MoeWeights};
use strata_engine::pool::Pool;
use strata_quant::GgmlType;
use strata_vulkan::Vulkan;

/// `rows × cols` weights of type `ty` from deterministic values, leaked: a backend finds
/// uploaded weights again by their address, which must not be reused.
fn weights(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Matrix<'static> {
    let vals = common::values(rows * cols, seed);
    let row_bytes = cols / ty.block_size() * ty.type_size();
    let mut bytes = vec![0u8; rows * row_bytes];
    for (src, dst) in vals
        .chunks_exact(cols)
        .zip(bytes.chunks_exact_mut(row_bytes))
    {
        strata_quant::quantize(ty, src, dst).expect("quantizable type");
    }
    Matrix {
        ty,
        rows,
        cols,
        data: bytes.leak(),
    }
}

/// 6 experts of 96 × 64, top-2 with renormalisation, in `ty`.
fn experts(ty: GgmlType) -> MoeWeights {
    let (ne, d, ff) = (6, 64, 96);
    MoeWeights {
        layer: 0,
        router: weights(GgmlType::F32, ne, d, 1),
        gate: ExpertTensor::new(weights(ty, ne * ff, d, 2), ne),
        up: ExpertTensor::new(weights(ty, ne * ff, d, 3), ne),
        down: ExpertTensor::new(weights(ty, ne * d, ff, 4), ne),
        n_used: 2,
        norm_topk: true,
    }
}

fn moe<B: Backend>(be: &B, w: &MoeWeights, x: &[f32]) -> Vec<f32> {
    let mut xb = Buf::<B>::default();
    be.upload(x, w.router.cols, &mut xb);
    let mut out = Buf::<B>::default();
    let mut scratch = Default::default();
    be.moe(w, &mut xb, &mut out, &mut scratch).expect("moe");
    let y = be.host(&mut out).clone();
    be.finish().expect("finish");
    y
}

#[test]
fn experts_straddling_split_row_ranges_match_whole_tensors_and_the_cpu() {
    let Some(dev) = common::device() else { return };
    let pool = Pool::new(Default::default());
    let cpu = Cpu::new(&pool);
    for ty in [GgmlType::F32, GgmlType::Q8_0] {
        let w = experts(ty);
        // 9 tokens: a decode step's worth of experts and a batch with shared experts.
        let x = common::values(9 * 64, 5);
        let whole = moe(&Vulkan::on(&dev), &w, &x);
        // Gate/up rows are 256 bytes in F32 (68 in Q8_0), down rows 384 (102): 10 000-byte
        // ranges end inside experts of 96 and 64 rows.
        let split = moe(&Vulkan::on(&dev).with_weight_part_limit(10_000), &w, &x);
        let differ = whole.iter().zip(&split).filter(|(a, b)| a != b).count();
        assert!(
            whole.len() == split.len() && differ == 0,
            "{ty:?}: split expert tensors: {differ} of {} values differ",
            whole.len()
        );
        let rel = common::rel_err(&whole, &moe(&cpu, &w, &x));
        // Q8_0: two matmuls in a row whose activations the CPU quantizes (as the conformance test).
        let tol = if ty == GgmlType::F32 { 1e-5 } else { 5e-2 };
        eprintln!("moe {ty:?}: vulkan vs cpu {rel:.2e} (tolerance {tol:.0e}), split = whole");
        assert!(rel <= tol, "{ty:?}: vulkan vs cpu {rel:.2e} > {tol:.0e}");
    }
}
