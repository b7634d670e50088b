use super::*;
use crate::ops::linear::matmul;

#[test]
fn route_picks_the_largest_probabilities_and_renormalises() {
    let mut logits = [0.0f32, 2.0, 1.0, -1.0];
    let (mut ids, mut w) = ([0usize; 2], [0.0f32; 2]);
    route(&mut logits, false, &mut ids, &mut w);
    assert_eq!(ids, [1, 2]);
    let z: f32 = [0.0f32, 2.0, 1.0, -1.0].iter().map(|l| l.exp()).sum();
    assert!((w[0] - 2.0f32.exp() / z).abs() < 1e-6);
    let mut logits = [0.0f32, 2.0, 1.0, -1.0];
    route(&mut logits, true, &mut ids, &mut w);
    assert!((w[0] + w[1] - 1.0).abs() < 1e-6);
    assert!((w[0] / w[1] - 1.0f32.exp()).abs() < 1e-5);
}

#[test]
fn route_picks_as_repeated_best_unused_with_ties_to_the_lower_id() {
    // The definition: slot j takes the unused expert of the largest probability, the lowest
    // id among equals. Logits on a coarse grid make many ties.
    let mut seed = 7u64;
    for trial in 0..200 {
        let n = [4, 16, 128, 512][trial % 4];
        let k = [1, 2, 8, 10][(trial / 4) % 4].min(n);
        let logits: Vec<f32> = (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 59) as f32) * 0.5 - 4.0
            })
            .collect();
        let (mut ids, mut w) = (vec![0usize; k], vec![0.0f32; k]);
        route(&mut logits.clone(), false, &mut ids, &mut w);
        let mut probs = logits.clone();
        route(&mut probs, false, &mut [], &mut []);
        let mut want = Vec::new();
        for _ in 0..k {
            let best = (0..n)
                .filter(|e| !want.contains(e))
                .fold(None, |b: Option<usize>, e| match b {
                    Some(b) if probs[e] <= probs[b] => Some(b),
                    _ => Some(e),
                })
                .unwrap();
            want.push(best);
        }
        assert_eq!(ids, want, "n {n} k {k}");
        let want_w: Vec<f32> = want.iter().map(|&e| probs[e]).collect();
        assert_eq!(w, want_w);
    }
}

#[test]
fn expert_views_address_consecutive_row_blocks() {
    let data: Vec<u8> = (0..3 * 2 * 4 * 4).map(|i| i as u8).collect();
    let all = Matrix {
        ty: strata_gguf::GgmlType::F32,
        rows: 6,
        cols: 4,
        data: &data,
    };
    let t = ExpertTensor::new(all, 3);
    assert_eq!(t.rows(), 2);
    assert_eq!(t.expert(1).data, &data[32..64]);
    assert_eq!(t.expert(2).row(1), &data[80..96]);
}

/// The pre-grouping algorithm: one `matmul` per expert and matrix, as the oracle.
fn per_expert_matmuls(w: &MoeWeights, x: &[f32], t_n: usize) -> Vec<f32> {
    let (n_expert, k, d, n_ff) = (w.gate.n_expert, w.n_used, w.router.cols, w.gate.rows());
    let mut xa = Activations::default();
    xa.resize(t_n, d);
    xa.write().copy_from_slice(x);
    let mut probs = vec![0.0; t_n * n_expert];
    matmul(crate::pool::global(), &w.router, None, &mut xa, &mut probs).unwrap();
    let (mut ids, mut wts) = (vec![0; t_n * k], vec![0.0; t_n * k]);
    for t in 0..t_n {
        let r = t * k..(t + 1) * k;
        let p = &mut probs[t * n_expert..(t + 1) * n_expert];
        route(p, w.norm_topk, &mut ids[r.clone()], &mut wts[r]);
    }
    let mut slots = vec![0.0; t_n * k * d];
    for e in 0..n_expert {
        let routed: Vec<usize> = (0..t_n * k).filter(|i| ids[*i] == e).collect();
        let (mut xe, mut he) = (Activations::default(), Activations::default());
        xe.resize(routed.len(), d);
        for (r, slot) in routed.iter().enumerate() {
            xe.write()[r * d..(r + 1) * d].copy_from_slice(&x[slot / k * d..][..d]);
        }
        he.resize(routed.len(), n_ff);
        let mut up = vec![0.0; routed.len() * n_ff];
        let mut ye = vec![0.0; routed.len() * d];
        matmul(
            crate::pool::global(),
            &w.gate.expert(e),
            None,
            &mut xe,
            he.write(),
        )
        .unwrap();
        matmul(
            crate::pool::global(),
            &w.up.expert(e),
            None,
            &mut xe,
            &mut up,
        )
        .unwrap();
        swiglu(crate::pool::global(), he.write(), &up);
        matmul(
            crate::pool::global(),
            &w.down.expert(e),
            None,
            &mut he,
            &mut ye,
        )
        .unwrap();
        for (r, slot) in routed.iter().enumerate() {
            slots[slot * d..(slot + 1) * d].copy_from_slice(&ye[r * d..(r + 1) * d]);
        }
    }
    let mut out = vec![0.0; t_n * d];
    for t in 0..t_n {
        for slot in t * k..(t + 1) * k {
            axpy(
                wts[slot],
                &slots[slot * d..(slot + 1) * d],
                &mut out[t * d..][..d],
            );
        }
    }
    out
}

fn leak_quantized(
    ty: strata_gguf::GgmlType,
    rows: usize,
    cols: usize,
    seed: usize,
) -> Matrix<'static> {
    let rb = ty.row_bytes(cols as u64).unwrap() as usize;
    let mut bytes = vec![0u8; rows * rb];
    for (r, b) in bytes.chunks_exact_mut(rb).enumerate() {
        let row: Vec<f32> = (0..cols)
            .map(|c| (((r * cols + c) * 7919 + seed) % 211) as f32 / 100.0 - 1.05)
            .collect();
        strata_quant::quantize(ty, &row, b).unwrap();
    }
    Matrix {
        ty,
        rows,
        cols,
        data: Box::leak(bytes.into_boxed_slice()),
    }
}

#[test]
fn grouped_experts_equal_one_matmul_per_expert_bit_for_bit_on_any_pool() {
    use strata_gguf::GgmlType::{F16, F32, Q4_K, Q8_0};
    let (n_expert, k, d, n_ff) = (6, 3, 256, 512);
    for (ty, down_ty) in [(Q4_K, Q8_0), (F16, F32)] {
        let w = MoeWeights {
            layer: 0,
            router: leak_quantized(F32, n_expert, d, 1),
            gate: ExpertTensor::new(leak_quantized(ty, n_expert * n_ff, d, 2), n_expert),
            up: ExpertTensor::new(leak_quantized(ty, n_expert * n_ff, d, 3), n_expert),
            down: ExpertTensor::new(leak_quantized(down_ty, n_expert * d, n_ff, 4), n_expert),
            n_used: k,
            norm_topk: true,
        };
        for t_n in [1, 5, 130] {
            let x: Vec<f32> = (0..t_n * d).map(|i| (i as f32 * 0.37).sin()).collect();
            let want = per_expert_matmuls(&w, &x, t_n);
            for workers in [1, 3] {
                let pool = crate::pool::Pool::new(crate::pool::PoolOptions {
                    workers,
                    ..Default::default()
                });
                let mut xa = Activations::default();
                xa.resize(t_n, d);
                xa.write().copy_from_slice(&x);
                let mut out = vec![0.0; t_n * d];
                let mut s = MoeScratch::default();
                moe_ffn(&pool, &Placement::cpu_only(), &w, &mut xa, &mut out, &mut s).unwrap();
                let same = out
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{ty} T={t_n} workers={workers}");
            }
        }
    }
}

#[test]
fn products_in_the_routers_round_equal_their_own_matmuls_bit_for_bit() {
    use strata_gguf::GgmlType::{F32, Q4_K, Q8_0};
    let (n_expert, k, d, n_ff) = (6, 3, 256, 512);
    let w = MoeWeights {
        layer: 0,
        router: leak_quantized(F32, n_expert, d, 1),
        gate: ExpertTensor::new(leak_quantized(Q4_K, n_expert * n_ff, d, 2), n_expert),
        up: ExpertTensor::new(leak_quantized(Q4_K, n_expert * n_ff, d, 3), n_expert),
        down: ExpertTensor::new(leak_quantized(Q8_0, n_expert * d, n_ff, 4), n_expert),
        n_used: k,
        norm_topk: true,
    };
    // A shared expert's gate and up (Q4_K) and its one-row F32 gate logit.
    let also_w = [
        leak_quantized(Q4_K, 256, d, 5),
        leak_quantized(Q4_K, 256, d, 6),
        leak_quantized(F32, 1, d, 7),
    ];
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for t_n in [1, 5, 130] {
        let x: Vec<f32> = (0..t_n * d).map(|i| (i as f32 * 0.37).sin()).collect();
        let acts = || {
            let mut xa = Activations::default();
            xa.resize(t_n, d);
            xa.write().copy_from_slice(&x);
            xa
        };
        for workers in [1, 3] {
            let pool = crate::pool::Pool::new(crate::pool::PoolOptions {
                workers,
                ..Default::default()
            });
            let place = Placement::cpu_only();
            let mut want = vec![0.0; t_n * d];
            let mut s = MoeScratch::default();
            moe_ffn(&pool, &place, &w, &mut acts(), &mut want, &mut s).unwrap();
            let want_also: Vec<Vec<f32>> = also_w
                .iter()
                .map(|m| {
                    let mut y = vec![0.0; t_n * m.rows];
                    matmul(&pool, m, None, &mut acts(), &mut y).unwrap();
                    y
                })
                .collect();

            let mut ys: Vec<Vec<f32>> = also_w.iter().map(|m| vec![0.0; t_n * m.rows]).collect();
            let mut also: Vec<MatmulOut<'_, '_>> = also_w
                .iter()
                .zip(ys.iter_mut())
                .map(|(w, y)| MatmulOut { w, bias: None, y })
                .collect();
            let mut out = vec![0.0; t_n * d];
            let mut s = MoeScratch::default();
            moe_ffn_with(&pool, &place, &w, &mut acts(), &mut out, &mut s, &mut also).unwrap();
            drop(also);
            assert_eq!(bits(&out), bits(&want), "experts T={t_n} workers={workers}");
            for (i, (y, want)) in ys.iter().zip(&want_also).enumerate() {
                assert_eq!(bits(y), bits(want), "product {i} T={t_n} workers={workers}");
            }
        }
    }
}

/// F32 experts of `n_expert` × (`d` → `n_ff` → `d`) for `layer`, every expert used.
fn f32_experts(layer: usize, n_expert: usize, d: usize, n_ff: usize) -> MoeWeights {
    use strata_gguf::GgmlType::F32;
    MoeWeights {
        layer,
        router: leak_quantized(F32, n_expert, d, 1),
        gate: ExpertTensor::new(leak_quantized(F32, n_expert * n_ff, d, 2), n_expert),
        up: ExpertTensor::new(leak_quantized(F32, n_expert * n_ff, d, 3), n_expert),
        down: ExpertTensor::new(leak_quantized(F32, n_expert * d, n_ff, 4), n_expert),
        n_used: n_expert,
        norm_topk: false,
    }
}

#[test]
fn an_expert_placed_on_a_missing_device_is_an_error_naming_the_layer() {
    let d = 32;
    let w = f32_experts(5, 4, d, 64);
    let mut place = Placement::cpu_only();
    place.set(5, 2, Unit::Device(0));
    let mut xa = Activations::default();
    xa.resize(1, d);
    xa.write().fill(0.5);
    let mut out = vec![0.0; d];
    let r = moe_ffn(
        crate::pool::global(),
        &place,
        &w,
        &mut xa,
        &mut out,
        &mut MoeScratch::default(),
    );
    assert!(matches!(
        r,
        Err(EngineError::NoExpertUnit {
            layer: 5,
            experts: 1
        })
    ));
}

#[test]
fn expert_rows_address_each_experts_three_matrices() {
    let (d, n_ff) = (8, 16);
    let w = f32_experts(0, 3, d, n_ff);
    let e = w.expert_rows(2);
    assert_eq!(w.gate.rows_of(2), 32..48);
    assert_eq!(e.gate.data, &w.gate.all.data[32 * d * 4..48 * d * 4]);
    assert_eq!(e.down.rows, d);
    assert_eq!(
        e.down.data,
        &w.down.all.data[2 * d * n_ff * 4..3 * d * n_ff * 4]
    );
}
