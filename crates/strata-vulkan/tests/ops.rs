//! The dense graph's ops through the engine's `Backend` trait, on the Vulkan device against
//! the CPU backend (after llama.cpp's test-backend-ops): the same calls on both, outputs
//! compared as max |Δ| / max |y| within a tolerance per op; an op that fails reports its
//! error through `finish`.

mod common;

use strata_engine::backend::{Backend, Buf, Cpu, Glu, MatmulTo};
use strata_engine::ops::linear::Matrix;
use strata_engine::ops::rope::{Rope, RopeStyle};
use strata_engine::EngineError;
use strata_quant::GgmlType;
use strata_vulkan::Vulkan;

/// `rows × cols` weights of type `ty` (quantized from deterministic values).
fn weights(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let vals = common::values(rows * cols, seed);
    let row_bytes = cols / ty.block_size() * ty.type_size();
    let mut bytes = vec![0u8; rows * row_bytes];
    for (src, dst) in vals
        .chunks_exact(cols)
        .zip(bytes.chunks_exact_mut(row_bytes))
    {
        strata_quant::quantize(ty, src, dst).expect("quantizable type");
    }
    bytes
}

/// Every op of the dense graph on `be`, each output read back in order.
fn run<B: Backend>(
    be: &B,
    mats: &[(GgmlType, Vec<u8>)],
    norm: &[f32],
    bias: &[f32],
) -> Vec<Vec<f32>> {
    let (d, hd, n_ff) = (128, 32, 96);
    let mut outs = Vec::new();
    let mut x = Buf::<B>::default();
    let mat = |i: usize, rows: usize, cols: usize| Matrix {
        ty: mats[i].0,
        rows,
        cols,
        data: &mats[i].1,
    };
    let embd = mat(0, 50, d);
    be.embed(&embd, 1.5, &[3, 0, 49, 7, 3], &mut x)
        .expect("embed");
    outs.push(be.host(&mut x).clone());

    let mut xb = Buf::<B>::default();
    be.rms_norm(&x, &norm[..d], 1e-6, &mut xb);
    outs.push(be.host(&mut xb).clone());

    // q/k/v with a bias on q, through `matmuls`.
    let (wq, wk, wv) = (mat(1, d, d), mat(2, 64, d), mat(3, 64, d));
    let (mut q, mut k, mut v) = (
        Buf::<B>::default(),
        Buf::<B>::default(),
        Buf::<B>::default(),
    );
    let mut to = [
        MatmulTo {
            w: &wq,
            bias: Some(&bias[..d]),
            y: &mut q,
        },
        MatmulTo {
            w: &wk,
            bias: None,
            y: &mut k,
        },
        MatmulTo {
            w: &wv,
            bias: None,
            y: &mut v,
        },
    ];
    be.matmuls(&mut xb, &mut to).expect("matmuls");
    for b in [&mut q, &mut k, &mut v] {
        outs.push(be.host(b).clone());
    }

    be.rms_norm_in_place(&mut q, &norm[..hd], 1e-6);
    outs.push(be.host(&mut q).clone());
    let mut g = Buf::<B>::default();
    be.rms_norm_grouped(&q, &norm[..d], hd, 1e-6, &mut g);
    outs.push(be.host(&mut g).clone());

    for (style, n_rot) in [(RopeStyle::Neox, hd), (RopeStyle::Normal, hd / 2)] {
        let rope = Rope {
            style,
            n_rot,
            freq_base: 10000.0,
            freq_scale: 1.0,
        };
        let mut cs = Buf::<B>::default();
        be.rope_angles(&rope, &[0, 1, 2, 40, 41], &mut cs);
        outs.push(be.host(&mut cs).clone());
        be.rope(&rope, &mut k, hd, &cs);
        outs.push(be.host(&mut k).clone());
    }

    let (w_gate, w_up, w_down) = (mat(4, n_ff, d), mat(5, n_ff, d), mat(6, d, n_ff));
    for act in [Glu::SwiGlu, Glu::GegluTanh] {
        let (mut hb, mut hb2, mut y) = (
            Buf::<B>::default(),
            Buf::<B>::default(),
            Buf::<B>::default(),
        );
        be.matmul(&w_gate, None, &mut xb, &mut hb).expect("gate");
        be.matmul(&w_up, None, &mut xb, &mut hb2).expect("up");
        be.glu(act, &mut hb, &hb2);
        outs.push(be.host(&mut hb).clone());
        be.matmul(&w_down, None, &mut hb, &mut y).expect("down");
        be.add(&mut x, &y);
        outs.push(be.host(&mut x).clone());
    }
    be.silu(&mut x);
    be.scale(&mut x, 0.75);
    outs.push(be.host(&mut x).clone());

    let mut h = Buf::<B>::default();
    be.gather_rows(&x, &[1, 4], &mut h);
    outs.push(be.host(&mut h).clone());
    let mut logits = Buf::<B>::default();
    be.matmul(&embd, None, &mut h, &mut logits).expect("head");
    be.softcap(&mut logits, 3.0);
    outs.push(be.host(&mut logits).clone());
    be.finish().expect("no op failed");
    outs
}

#[test]
fn dense_ops_match_the_cpu_through_the_backend_trait() {
    let Some(dev) = common::device() else { return };
    let vk = Vulkan::on(&dev);
    let pool = strata_engine::pool::Pool::new(Default::default());
    let cpu = Cpu::new(&pool);
    let norm: Vec<f32> = common::values(128, 90)
        .iter()
        .map(|v| 1.0 + 0.5 * v)
        .collect();
    let bias = common::values(128, 91);
    // F32 weights: both sides multiply f32 activations; Q8_0: the CPU quantizes activations.
    for (ty, tol) in [(GgmlType::F32, 1e-5), (GgmlType::Q8_0, 3e-2)] {
        let shapes = [
            (50, 128),
            (128, 128),
            (64, 128),
            (64, 128),
            (96, 128),
            (96, 128),
            (128, 96),
        ];
        let mats: Vec<(GgmlType, Vec<u8>)> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(r, c))| (ty, weights(ty, r, c, 10 + i as u64)))
            .collect();
        let want = run(&cpu, &mats, &norm, &bias);
        // Whole matrices, and matrices split into row ranges of ≤ 3 KiB (as the device's
        // storage-buffer limit splits a large vocabulary's embedding and LM head).
        let split = Vulkan::on(&dev).with_weight_part_limit(3 << 10);
        for (how, be) in [("whole", &vk), ("split", &split)] {
            let got = run(be, &mats, &norm, &bias);
            assert_eq!(want.len(), got.len());
            let mut worst = 0.0f32;
            for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                assert_eq!(w.len(), g.len(), "{ty:?}: output {i} sizes");
                let err = common::rel_err(g, w);
                worst = worst.max(err);
                assert!(
                    err <= tol,
                    "{ty:?} {how}: output {i}: {err:.2e} > {tol:.0e}"
                );
            }
            eprintln!(
                "{ty:?} weights, {how}: {} outputs, max |Δ| / max |y| = {worst:.2e}",
                got.len()
            );
        }
    }
}

/// Every op of the supported architectures runs on the device now (qwen4exp's were the last
/// `Unsupported` ones), so an op that returns nothing is made to fail by an input that was
/// never written: its error is recorded, reported once by `finish`, and the backend is usable
/// afterwards.
#[test]
fn an_op_error_is_reported_once_by_finish() {
    let Some(dev) = common::device() else { return };
    let vk = Vulkan::on(&dev);
    let mut x = Buf::<Vulkan>::default();
    vk.upload(&[1.0; 8], 4, &mut x);
    let (mut y, inj) = (Buf::<Vulkan>::default(), Buf::<Vulkan>::default());
    vk.upload(&[1.0; 4], 2, &mut y);
    // `inj` never written: no device buffer behind it.
    vk.hc_expand_add(&mut x, &y, &inj);
    match vk.finish() {
        Err(EngineError::Device { message, .. }) => {
            assert!(message.contains("never written"), "{message}")
        }
        other => panic!("expected a device error, got {other:?}"),
    }
    // The error is reported once; the backend is usable afterwards.
    vk.scale(&mut x, 2.0);
    vk.finish().expect("scale");
    assert_eq!(vk.host(&mut x), &vec![2.0; 8]);
}
