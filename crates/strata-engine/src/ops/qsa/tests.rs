//! QSA against a naive reference (explicit block scores and a masked softmax in f64), the
//! dense kernel below the budget, and one call against one query at a time.

use super::*;
use crate::kv_cache::{KvCache, KvType};
use crate::ops::rope::RopeStyle;
use half::f16;

const N_HEAD: usize = 4;
const N_KV: usize = 2;
const HD: usize = 8;
const DI: usize = 8;
const NI: usize = 2;

fn val(seed: usize, i: usize) -> f32 {
    ((seed * 131 + i * 17) as f32 * 0.37).sin()
}

struct Case {
    cache: KvCache,
    q: Vec<f32>,
    iq: Vec<f32>,
    k_norm: Vec<f32>,
    rope: Rope,
    shape: AttnShape,
    qsa: QsaShape,
    n_pos: usize,
}

fn case(kv_type: KvType) -> Case {
    let n_pos = 40;
    let kvd = N_KV * HD;
    let mut cache = KvCache::new(1, n_pos, kvd, kv_type).with_index_keys(&[DI]);
    for p in 0..n_pos {
        let k: Vec<f32> = (0..kvd).map(|i| val(p, i)).collect();
        let v: Vec<f32> = (0..kvd).map(|i| val(p + 1000, i)).collect();
        cache.layers[0].write(p, &k, &v);
        let kr: Vec<f32> = (0..DI).map(|i| val(p + 2000, i)).collect();
        cache.layers[0].write_index_key(p, &kr);
    }
    Case {
        cache,
        q: (0..n_pos * N_HEAD * HD).map(|i| val(3000, i)).collect(),
        iq: (0..n_pos * NI * DI).map(|i| val(4000, i)).collect(),
        k_norm: (0..DI).map(|i| 1.0 + 0.1 * i as f32).collect(),
        rope: Rope {
            style: RopeStyle::Neox,
            n_rot: 4,
            freq_base: 10000.0,
            freq_scale: 1.0,
        },
        shape: AttnShape {
            n_head: N_HEAD,
            n_kv_head: N_KV,
            head_dim: HD,
            scale: 1.0 / (HD as f32).sqrt(),
            window: None,
        },
        qsa: QsaShape {
            ratio: 4,
            budget: 8,
            n_head: NI,
            head_dim: DI,
            eps: 1e-6,
        },
        n_pos,
    }
}

impl Case {
    fn run(&mut self, pos0: usize, t: usize) -> Vec<f32> {
        let w = N_HEAD * HD;
        let mut out = vec![0.0; t * w];
        let bk = BlockKeyWeights {
            k_norm: &self.k_norm,
            rope: &self.rope,
        };
        qsa_attention(
            crate::pool::global(),
            &self.q[pos0 * w..(pos0 + t) * w],
            &self.iq[pos0 * NI * DI..(pos0 + t) * NI * DI],
            &mut self.cache.layers[0],
            pos0,
            &self.shape,
            &self.qsa,
            bk,
            &mut out,
        );
        out
    }

    /// The kept positions of the query at `p`, by explicit scoring in f64.
    fn reference_kept(&self, p: usize) -> Vec<usize> {
        let r = self.qsa.ratio;
        let nb = (p + 1) / r;
        let raw = self.cache.layers[0].index_keys().unwrap();
        let mut bks = BlockKeys::default();
        let bk = BlockKeyWeights {
            k_norm: &self.k_norm,
            rope: &self.rope,
        };
        block_keys(|t| raw.row(t), nb, &self.qsa, bk, &mut bks);
        let keys = &bks.keys;
        let iq = &self.iq[p * NI * DI..(p + 1) * NI * DI];
        let mut scored: Vec<(f64, usize)> = (0..nb)
            .map(|b| {
                let s: f64 = (0..NI)
                    .map(|h| {
                        let d: f64 = (0..DI)
                            .map(|i| iq[h * DI + i] as f64 * keys[b * DI + i] as f64)
                            .sum();
                        d.max(0.0)
                    })
                    .sum();
                (s, b)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut blocks: Vec<usize> = scored
            .iter()
            .take(self.qsa.budget / r)
            .map(|x| x.1)
            .collect();
        blocks.sort();
        let mut kept: Vec<usize> = blocks.iter().flat_map(|b| b * r..(b + 1) * r).collect();
        kept.extend(nb * r..=p);
        kept
    }

    /// Softmax attention of the query at `p` over `kept`, in f64.
    fn reference_out(&self, p: usize, kept: &[usize]) -> Vec<f32> {
        let w = N_HEAD * HD;
        let q = &self.q[p * w..(p + 1) * w];
        let mut out = vec![0.0f32; w];
        for h in 0..N_HEAD {
            let g = h / (N_HEAD / N_KV);
            let s: Vec<f64> = kept
                .iter()
                .map(|&j| {
                    (0..HD)
                        .map(|d| q[h * HD + d] as f64 * val(j, g * HD + d) as f64)
                        .sum::<f64>()
                        * self.shape.scale as f64
                })
                .collect();
            let m = s.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for d in 0..HD {
                let o: f64 = kept
                    .iter()
                    .zip(&e)
                    .map(|(&j, w)| w / z * val(j + 1000, g * HD + d) as f64)
                    .sum();
                out[h * HD + d] = o as f32;
            }
        }
        out
    }
}

#[test]
fn sparse_queries_match_a_masked_reference() {
    let mut c = case(KvType::F32);
    let w = N_HEAD * HD;
    let all = c.run(0, c.n_pos);
    let mut dropped_some = false;
    for p in 0..c.n_pos {
        let kept = c.reference_kept(p);
        dropped_some |= kept.len() < p + 1;
        if c.qsa.is_dense_at(p) {
            assert_eq!(kept.len(), p + 1, "position {p} keeps everything");
        } else {
            assert_eq!(
                kept.len(),
                c.qsa.budget + (p + 1) % c.qsa.ratio,
                "position {p}"
            );
        }
        let want = c.reference_out(p, &kept);
        for (a, b) in all[p * w..(p + 1) * w].iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "position {p}: {a} vs {b}");
        }
    }
    assert!(dropped_some, "the case exercises dropped blocks");
}

#[test]
fn below_the_budget_it_is_the_dense_kernel_bit_for_bit() {
    let mut c = case(KvType::F16);
    let n = c.qsa.budget + c.qsa.ratio - 1;
    let got = c.run(0, n);
    let w = N_HEAD * HD;
    let mut want = vec![0.0; n * w];
    attention(
        crate::pool::global(),
        &c.q[..n * w],
        &c.cache.layers[0],
        0,
        &c.shape,
        &mut want,
    );
    assert_eq!(got, want);
}

#[test]
fn one_call_equals_one_query_at_a_time_bit_for_bit() {
    for kv_type in [KvType::F32, KvType::F16] {
        let mut c = case(kv_type);
        let w = N_HEAD * HD;
        let all = c.run(0, c.n_pos);
        for p in 0..c.n_pos {
            let one = c.run(p, 1);
            assert_eq!(one, all[p * w..(p + 1) * w], "{kv_type:?} position {p}");
        }
        let tail = c.run(17, c.n_pos - 17);
        assert_eq!(tail, all[17 * w..], "{kv_type:?} from 17");
    }
}

/// The pooled block keys are kept between calls and pooled again where a position's raw key
/// is written anew (a rollback that rewrites the sequence): the outputs after the rewrite are
/// those of a cache that never saw the old keys, bit for bit.
#[test]
fn cached_block_keys_follow_rewritten_positions() {
    let mut c = case(KvType::F32);
    let w = N_HEAD * HD;
    let n = c.n_pos;
    let _ = c.run(0, n);
    let blocks = c.cache.layers[0].block_key_cache().unwrap();
    let pooled = n / c.qsa.ratio;
    assert_eq!(
        blocks.keys.len(),
        pooled * DI,
        "every complete block is pooled"
    );
    // Rewrite positions 9.. (blocks 2.. change; blocks 0 and 1 stay valid in the cache).
    let mut fresh = case(KvType::F32);
    for p in 9..n {
        let new_key: Vec<f32> = (0..DI).map(|i| val(p + 9000, i)).collect();
        c.cache.layers[0].write_index_key(p, &new_key);
        fresh.cache.layers[0].write_index_key(p, &new_key);
    }
    assert_eq!(
        c.cache.layers[0]
            .block_key_cache()
            .unwrap()
            .valid(c.qsa.ratio, DI),
        2
    );
    let want = fresh.run(0, n);
    assert_eq!(c.run(12, n - 12), want[12 * w..]);
    assert_eq!(c.run(0, n), want);
    let unchanged = case(KvType::F32).run(0, n);
    assert_ne!(want, unchanged, "the rewrite changes some kept block");
}

#[test]
fn sparse_positions_are_the_kept_positions_and_none_below_the_budget() {
    let mut c = case(KvType::F32);
    let bk = BlockKeyWeights {
        k_norm: &c.k_norm.clone(),
        rope: &c.rope.clone(),
    };
    let mut lists = Vec::new();
    // Two calls (prefill of 21, then the rest): the block-key cache carries over.
    for (pos0, t) in [(0, 21), (21, c.n_pos - 21)] {
        let iq = &c.iq[pos0 * NI * DI..(pos0 + t) * NI * DI];
        sparse_positions(iq, &mut c.cache.layers[0], pos0, &c.qsa, bk, &mut lists);
        assert_eq!(lists.len(), t);
        for (i, got) in lists.iter().enumerate() {
            let p = pos0 + i;
            match c.qsa.is_dense_at(p) {
                true => assert!(got.is_empty(), "position {p} is dense"),
                false => assert_eq!(got, &c.reference_kept(p), "position {p}"),
            }
        }
    }
}

/// An f16 cache gives, bit for bit, what an f32 cache holding the same keys and values
/// rounded to f16 gives to queries rounded to f16 (as the kernels round them for an f16
/// cache): the sparse path gathers the right elements and converts them exactly, before and
/// past the budget.
#[test]
fn an_f16_cache_is_an_f32_cache_of_rounded_values() {
    let mut half_cache = case(KvType::F16);
    let mut rounded = case(KvType::F32);
    let kvd = N_KV * HD;
    let round = |x: f32| f16::from_f32(x).to_f32();
    for p in 0..rounded.n_pos {
        let k: Vec<f32> = (0..kvd).map(|i| round(val(p, i))).collect();
        let v: Vec<f32> = (0..kvd).map(|i| round(val(p + 1000, i))).collect();
        rounded.cache.layers[0].write(p, &k, &v);
    }
    rounded.q.iter_mut().for_each(|x| *x = round(*x));
    let n = rounded.n_pos;
    let first_sparse = (0..n).find(|&p| !rounded.qsa.is_dense_at(p)).unwrap();
    assert!(first_sparse + 8 < n, "the case runs sparse queries");
    assert_eq!(half_cache.run(0, n), rounded.run(0, n));
}

/// A lone query deep in the context (a decode step) scores its blocks in parallel parts: the
/// same scores, bit for bit, and the same kept positions as one part, whatever the pool.
#[test]
fn scores_split_over_the_pool_are_the_serial_ones() {
    let qsa = QsaShape {
        ratio: 4,
        budget: 64,
        n_head: NI,
        head_dim: DI,
        eps: 1e-6,
    };
    let p = 4 * PAR_SCORE_BLOCKS + 4 * 37 + 2;
    let nb = (p + 1) / qsa.ratio;
    let keys: Vec<f32> = (0..nb * DI).map(|i| val(5000, i)).collect();
    let iq: Vec<f32> = (0..NI * DI).map(|i| val(6000, i)).collect();
    let (mut serial, mut split) = (Scratch::default(), Scratch::default());
    let (mut want, mut got) = (Vec::new(), Vec::new());
    kept_positions(&iq, &keys, p, &qsa, &mut serial, &mut want, None);
    for workers in [2, 3] {
        let pool = crate::pool::Pool::new(crate::pool::PoolOptions {
            workers,
            ..Default::default()
        });
        kept_positions(&iq, &keys, p, &qsa, &mut split, &mut got, Some(&pool));
        let bits = |s: &Scratch| s.scores.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&split), bits(&serial), "{workers} workers");
        assert_eq!(got, want, "{workers} workers");
    }
    assert_eq!(want.len(), qsa.budget + (p + 1) % qsa.ratio);
    assert!(serial.scores.iter().any(|&s| s > 0.0) && serial.scores.contains(&0.0));
}
