//! Attention against a naive f64 reference, and every SIMD kernel against its scalar
//! reference, bit for bit.

use super::lanes::{self, f16_to_f32, Isa};
use super::*;
use crate::kv_cache::{KvCache, KvType};

/// Naive reference: softmax over all visible keys, computed in f64.
fn reference(q: &[f32], ks: &[Vec<f32>], vs: &[Vec<f32>], scale: f32, first: usize) -> Vec<f32> {
    let n = ks.len();
    let s: Vec<f64> = (first..n)
        .map(|j| {
            q.iter()
                .zip(&ks[j])
                .map(|(a, b)| (*a * *b) as f64)
                .sum::<f64>()
                * scale as f64
        })
        .collect();
    let m = s.iter().cloned().fold(f64::MIN, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = e.iter().sum();
    let mut o = vec![0.0f64; q.len()];
    for (w, j) in e.iter().zip(first..n) {
        for d in 0..q.len() {
            o[d] += w / z * vs[j][d] as f64;
        }
    }
    o.into_iter().map(|x| x as f32).collect()
}

#[test]
fn gqa_and_window_match_naive_reference() {
    let (hd, n_head, n_kv) = (4, 4, 2);
    let mut cache = KvCache::new(1, 8, n_kv * hd, KvType::F32);
    let val = |p: usize, i: usize| ((p * 7 + i * 3) as f32 * 0.13).sin();
    let mut keys = vec![vec![]; n_kv];
    let mut vals = vec![vec![]; n_kv];
    for p in 0..6 {
        let k: Vec<f32> = (0..n_kv * hd).map(|i| val(p, i)).collect();
        let v: Vec<f32> = (0..n_kv * hd).map(|i| val(p + 11, i)).collect();
        cache.layers[0].write(p, &k, &v);
        for g in 0..n_kv {
            keys[g].push(k[g * hd..(g + 1) * hd].to_vec());
            vals[g].push(v[g * hd..(g + 1) * hd].to_vec());
        }
    }
    for window in [None, Some(3)] {
        let shape = AttnShape {
            n_head,
            n_kv_head: n_kv,
            head_dim: hd,
            scale: 0.5,
            window,
        };
        // two queries at positions 4 and 5
        let q: Vec<f32> = (0..2 * n_head * hd)
            .map(|i| (i as f32 * 0.7).cos())
            .collect();
        let mut out = vec![0.0; q.len()];
        attention(
            crate::pool::global(),
            &q,
            &cache.layers[0],
            4,
            &shape,
            &mut out,
        );
        for t in 0..2 {
            let pos: usize = 4 + t;
            let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
            for h in 0..n_head {
                let g = h / 2;
                let qi = &q[(t * n_head + h) * hd..][..hd];
                let r = reference(qi, &keys[g][..=pos], &vals[g][..=pos], 0.5, first);
                let got = &out[(t * n_head + h) * hd..][..hd];
                for d in 0..hd {
                    assert!((r[d] - got[d]).abs() < 1e-5, "{window:?} t{t} h{h}");
                }
            }
        }
    }
}

#[test]
fn key_tiles_splits_and_query_blocks_match_naive_reference() {
    let (hd, n_head, n_kv, n_pos) = (8, 4, 2, 700);
    let mut cache = KvCache::new(1, n_pos, n_kv * hd, KvType::F32);
    let val = |p: usize, i: usize| ((p * 31 + i * 7) as f32 * 0.011).sin() * 2.0;
    let mut keys = vec![vec![]; n_kv];
    let mut vals = vec![vec![]; n_kv];
    for p in 0..n_pos {
        let k: Vec<f32> = (0..n_kv * hd).map(|i| val(p, i)).collect();
        let v: Vec<f32> = (0..n_kv * hd).map(|i| val(p + 5000, i)).collect();
        cache.layers[0].write(p, &k, &v);
        for g in 0..n_kv {
            keys[g].push(k[g * hd..(g + 1) * hd].to_vec());
            vals[g].push(v[g * hd..(g + 1) * hd].to_vec());
        }
    }
    // (tokens, pos0): one query past three key splits; 20 queries over two blocks.
    for (t_n, pos0) in [(1, 650), (3, 500), (20, 600)] {
        for window in [None, Some(100)] {
            let shape = AttnShape {
                n_head,
                n_kv_head: n_kv,
                head_dim: hd,
                scale: 0.3,
                window,
            };
            let q: Vec<f32> = (0..t_n * n_head * hd)
                .map(|i| (i as f32 * 0.37).cos())
                .collect();
            let mut out = vec![0.0; q.len()];
            attention(
                crate::pool::global(),
                &q,
                &cache.layers[0],
                pos0,
                &shape,
                &mut out,
            );
            for t in 0..t_n {
                let pos = pos0 + t;
                let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
                for h in 0..n_head {
                    let g = h / (n_head / n_kv);
                    let qi = &q[(t * n_head + h) * hd..][..hd];
                    let r = reference(qi, &keys[g][..=pos], &vals[g][..=pos], 0.3, first);
                    let got = &out[(t * n_head + h) * hd..][..hd];
                    for d in 0..hd {
                        assert!(
                            (r[d] - got[d]).abs() < 1e-5,
                            "T={t_n} {window:?} t{t} h{h}: {} vs {}",
                            got[d],
                            r[d]
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn f16_conversion_is_exact_for_every_half() {
    for bits in 0..=u16::MAX {
        let want = half::f16::from_bits(bits).to_f32();
        let got = f16_to_f32(bits);
        if want.is_nan() {
            assert!(got.is_nan(), "{bits:#06x}");
        } else {
            assert_eq!(got.to_bits(), want.to_bits(), "{bits:#06x}");
        }
    }
}

/// Every ISA this CPU runs, the scalar reference first.
fn isas() -> Vec<Isa> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut v = vec![Isa::Scalar];
    #[cfg(target_arch = "x86_64")]
    {
        let fma = std::arch::is_x86_feature_detected!("fma");
        if fma
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            v.push(Isa::Avx2);
        }
        if fma && std::arch::is_x86_feature_detected!("avx512f") {
            v.push(Isa::Avx512);
        }
    }
    v
}

#[test]
fn f16_rows_convert_exactly_on_every_isa() {
    let src: Vec<half::f16> = (0..=u16::MAX).map(half::f16::from_bits).collect();
    for isa in isas() {
        for len in [65_536, 37] {
            let mut dst = vec![0.0f32; len];
            lanes::convert_f16(isa, &src[..len], &mut dst);
            for (h, d) in src.iter().zip(&dst) {
                assert!(
                    h.to_f32().to_bits() == d.to_bits() || d.is_nan(),
                    "{isa:?} {h}"
                );
            }
        }
    }
}

#[test]
fn f16_rounding_of_queries_is_bit_identical_on_every_isa() {
    let src: Vec<f32> = (0..100_003)
        .map(|i| {
            f32::from_bits(0x3000_0000u32.wrapping_add(i * 7919))
                * if i % 2 == 0 { 1.0 } else { -1.0 }
        })
        .chain([
            65504.0,
            65520.0,
            1e-8,
            6e-8,
            -3e-5,
            0.0,
            -0.0,
            f32::INFINITY,
        ])
        .collect();
    for isa in isas() {
        let mut got = vec![];
        lanes::extend_rounded_f16(isa, &src, &mut got);
        for (x, g) in src.iter().zip(&got) {
            let want = half::f16::from_f32(*x).to_f32();
            assert_eq!(want.to_bits(), g.to_bits(), "{isa:?} {x:e}");
        }
    }
}

#[test]
fn f16_cache_decode_matches_naive_reference_on_rounded_inputs() {
    let (hd, n_head, n_kv, n_pos) = (64, 6, 2, 1500);
    let mut cache = KvCache::new(1, n_pos, n_kv * hd, KvType::F16);
    let val = |p: usize, i: usize| ((p * 31 + i * 7) as f32 * 0.013).sin();
    let r16 = |v: f32| half::f16::from_f32(v).to_f32();
    let mut keys = vec![vec![]; n_kv];
    let mut vals = vec![vec![]; n_kv];
    for p in 0..n_pos {
        let k: Vec<f32> = (0..n_kv * hd).map(|i| val(p, i)).collect();
        let v: Vec<f32> = (0..n_kv * hd).map(|i| val(p + 9000, i)).collect();
        cache.layers[0].write(p, &k, &v);
        for g in 0..n_kv {
            keys[g].push(k[g * hd..(g + 1) * hd].iter().map(|x| r16(*x)).collect());
            vals[g].push(v[g * hd..(g + 1) * hd].iter().map(|x| r16(*x)).collect());
        }
    }
    for pos in [40, 299, 1499] {
        let shape = AttnShape {
            n_head,
            n_kv_head: n_kv,
            head_dim: hd,
            scale: 0.125,
            window: None,
        };
        let q: Vec<f32> = (0..n_head * hd)
            .map(|i| (i as f32 * 0.37).cos() * 2.0)
            .collect();
        let mut out = vec![0.0; q.len()];
        attention(
            crate::pool::global(),
            &q,
            &cache.layers[0],
            pos,
            &shape,
            &mut out,
        );
        for h in 0..n_head {
            let g = h / (n_head / n_kv);
            let qi: Vec<f32> = q[h * hd..][..hd].iter().map(|x| r16(*x)).collect();
            let r = reference(&qi, &keys[g][..=pos], &vals[g][..=pos], 0.125, 0);
            for d in 0..hd {
                let got = out[h * hd + d];
                assert!(
                    (r[d] - got).abs() < 1e-5,
                    "pos{pos} h{h} d{d}: {got} vs {}",
                    r[d]
                );
            }
        }
    }
}

#[test]
fn prefill_and_decode_outputs_are_bit_identical_on_every_isa() {
    // Head groups of 1 (no blocking), 3 (a block and a rest), 4 and 7; head dims with and
    // without a tail past 32 columns; many queries (transposed key tiles, head blocks) and one
    // f32 and f16 caches; with and without a sliding window.
    for (n_head, n_kv) in [(4, 4), (6, 2), (8, 2), (14, 2)] {
        for hd in [40, 64, 72, 128] {
            for kv_type in [KvType::F32, KvType::F16] {
                let n_pos = 160;
                let mut cache = KvCache::new(1, n_pos, n_kv * hd, kv_type);
                let val = |p: usize, i: usize| ((p * 29 + i * 5) as f32 * 0.013).sin() * 2.5;
                for p in 0..n_pos {
                    let k: Vec<f32> = (0..n_kv * hd).map(|i| val(p, i)).collect();
                    let v: Vec<f32> = (0..n_kv * hd).map(|i| val(p + 9000, i)).collect();
                    cache.layers[0].write(p, &k, &v);
                }
                for (t_n, pos0, window) in [(37, 100, None), (37, 100, Some(50)), (1, 150, None)] {
                    let shape = AttnShape {
                        n_head,
                        n_kv_head: n_kv,
                        head_dim: hd,
                        scale: 1.0 / (hd as f32).sqrt(),
                        window,
                    };
                    let q: Vec<f32> = (0..t_n * n_head * hd)
                        .map(|i| (i as f32 * 0.29).cos())
                        .collect();
                    let mut want = Vec::new();
                    for isa in isas() {
                        let mut out = vec![0.0; q.len()];
                        attention_on(
                            crate::pool::global(),
                            isa,
                            &q,
                            &cache.layers[0],
                            pos0,
                            &shape,
                            &mut out,
                        );
                        let bits: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
                        if want.is_empty() {
                            want = bits;
                        } else {
                            let diff = bits.iter().zip(&want).filter(|(a, b)| a != b).count();
                            assert_eq!(
                                diff, 0,
                                "{isa:?} {kv_type:?} heads {n_head}/{n_kv} hd {hd} T {t_n} \
                                 window {window:?}: {diff} outputs differ from scalar"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Batch invariance: a query's output has the same bits whether it is the only query of a call
/// (decode: segments as parallel tasks, merged at the end), one of a verify window of 2–16, or
/// one of a prefill batch of any size starting anywhere (segments merged as the tiles go), on
/// every ISA, with and without a sliding window, with f32 and f16 caches.
#[test]
fn query_output_is_independent_of_its_batch() {
    let (n_head, n_kv, hd, n_pos) = (6, 2, 72, 700);
    for kv_type in [KvType::F32, KvType::F16] {
        let cache = filled_cache(n_pos, n_kv, hd, kv_type);
        let width = n_head * hd;
        let q_all: Vec<f32> = (0..n_pos * width)
            .map(|i| (i as f32 * 0.31).cos())
            .collect();
        for window in [None, Some(300)] {
            let shape = AttnShape {
                n_head,
                n_kv_head: n_kv,
                head_dim: hd,
                scale: 1.0 / (hd as f32).sqrt(),
                window,
            };
            for isa in isas() {
                let run = |pos0: usize, t_n: usize| {
                    let q = &q_all[pos0 * width..(pos0 + t_n) * width];
                    let mut out = vec![0.0; q.len()];
                    attention_on(
                        crate::pool::global(),
                        isa,
                        q,
                        &cache.layers[0],
                        pos0,
                        &shape,
                        &mut out,
                    );
                    out
                };
                // Every position of 0..n_pos one at a time.
                let want: Vec<u32> = (0..n_pos)
                    .flat_map(|p| run(p, 1))
                    .map(f32::to_bits)
                    .collect();
                for sizes in [
                    &[700][..],
                    &[3, 250, 17, 16, 2, 300, 112],
                    &[255, 2, 1, 256, 186],
                ] {
                    let mut pos0 = 0;
                    for &t_n in sizes {
                        let got = run(pos0, t_n);
                        for (t, row) in got.chunks_exact(width).enumerate() {
                            let p = pos0 + t;
                            let same = row
                                .iter()
                                .zip(&want[p * width..(p + 1) * width])
                                .all(|(a, b)| a.to_bits() == *b);
                            assert!(
                                same,
                                "{isa:?} {kv_type:?} window {window:?}: position {p} in a \
                                 call of {t_n} from {pos0} differs from decode"
                            );
                        }
                        pos0 += t_n;
                    }
                }
            }
        }
    }
}

#[test]
fn transpose_moves_every_element_on_every_path() {
    for (rows, cols) in [(1, 1), (8, 8), (13, 64), (64, 80), (7, 9), (64, 128)] {
        let (ss, ds) = (cols + 3, 130);
        let src: Vec<f32> = (0..rows * ss).map(|i| i as f32 * 0.5 - 7.0).collect();
        for isa in [Isa::Scalar, Isa::detect()] {
            let mut dst = vec![f32::NAN; cols * ds];
            lanes::transpose(isa, &src, ss, &mut dst, ds, rows, cols);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(
                        dst[c * ds + r].to_bits(),
                        src[r * ss + c].to_bits(),
                        "{isa:?} {rows}×{cols} at ({r}, {c})"
                    );
                }
            }
            // Nothing outside the block is written.
            assert!(
                dst[..ds].iter().skip(rows).all(|x| x.is_nan()),
                "{isa:?} wrote past a row"
            );
        }
    }
}

/// Full causal attention of `n_head` query heads over `n_kv` KV heads of `hd`, scaled by
/// `1/√hd`.
fn causal(n_head: usize, n_kv: usize, hd: usize) -> AttnShape {
    AttnShape {
        n_head,
        n_kv_head: n_kv,
        head_dim: hd,
        scale: 1.0 / (hd as f32).sqrt(),
        window: None,
    }
}

/// A cache of `n_pos` positions with `n_kv · hd` keys and values a position.
fn filled_cache(n_pos: usize, n_kv: usize, hd: usize, kv_type: KvType) -> KvCache {
    let mut cache = KvCache::new(1, n_pos, n_kv * hd, kv_type);
    let val = |p: usize, i: usize| ((p * 37 + i * 11) as f32 * 0.017).sin() * 3.0;
    for p in 0..n_pos {
        let k: Vec<f32> = (0..n_kv * hd).map(|i| val(p, i)).collect();
        let v: Vec<f32> = (0..n_kv * hd).map(|i| val(p + 7000, i)).collect();
        cache.layers[0].write(p, &k, &v);
    }
    cache
}

/// Kept positions as QSA keeps them: some whole blocks of 4 before the query's own
/// (incomplete, maybe empty) block, chosen by a hash of the query's position (the last
/// complete one always), then that block.
fn qsa_like_list(p: usize) -> Vec<usize> {
    let nb = (p + 1) / 4;
    let mut list: Vec<usize> = (0..nb)
        .filter(|b| (b * 2654435761 + p * 40503) % 7 < 3 || b + 1 == nb)
        .flat_map(|b| 4 * b..4 * b + 4)
        .collect();
    list.extend(4 * nb..=p);
    list
}

/// A query that lists every position up to its own gets the dense kernel's bits: in a
/// prefill call and in a decode step, past several segments, on every ISA, f32 and f16.
#[test]
fn listing_every_position_is_the_dense_kernel_bit_for_bit() {
    let n_pos = 600;
    for (n_head, n_kv, hd) in [(6, 2, 72), (24, 2, 64), (4, 4, 40)] {
        for kv_type in [KvType::F32, KvType::F16] {
            let cache = filled_cache(n_pos, n_kv, hd, kv_type);
            let shape = causal(n_head, n_kv, hd);
            let width = n_head * hd;
            for isa in isas() {
                for (pos0, t_n) in [(0, 40), (530, 37), (599, 1), (300, 1), (257, 3)] {
                    let q: Vec<f32> = (0..t_n * width)
                        .map(|i| ((i + pos0 * width) as f32 * 0.29).cos())
                        .collect();
                    let mut dense = vec![0.0; q.len()];
                    let kv = &cache.layers[0];
                    attention_on(crate::pool::global(), isa, &q, kv, pos0, &shape, &mut dense);
                    let lists: Vec<Vec<usize>> =
                        (pos0..pos0 + t_n).map(|p| (0..=p).collect()).collect();
                    let mut listed = vec![0.0; q.len()];
                    let pool = crate::pool::global();
                    listed::attention_listed_on(pool, isa, &q, kv, &lists, &shape, &mut listed);
                    let same = dense
                        .iter()
                        .zip(&listed)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "{isa:?} {kv_type:?} heads {n_head}/{n_kv} hd {hd} {t_n} from {pos0}"
                    );
                }
            }
        }
    }
}

/// Listed positions against the naive f64 reference over exactly those keys (f32 cache).
#[test]
fn listed_positions_match_naive_reference() {
    let (n_head, n_kv, hd, n_pos) = (6, 2, 72, 700);
    let cache = filled_cache(n_pos, n_kv, hd, KvType::F32);
    let shape = causal(n_head, n_kv, hd);
    let width = n_head * hd;
    let group = n_head / n_kv;
    let kv = &cache.layers[0];
    let positions = [3, 64, 200, 411, 699];
    let lists: Vec<Vec<usize>> = positions.iter().map(|&p| qsa_like_list(p)).collect();
    assert!(
        lists[4].len() < 500 && lists[4].len() > 256,
        "several segments, some dropped"
    );
    let q: Vec<f32> = (0..positions.len() * width)
        .map(|i| (i as f32 * 0.31).cos())
        .collect();
    for isa in isas() {
        let mut out = vec![0.0; q.len()];
        listed::attention_listed_on(crate::pool::global(), isa, &q, kv, &lists, &shape, &mut out);
        for (t, list) in lists.iter().enumerate() {
            for h in 0..n_head {
                let g = h / group;
                let row = |rows: crate::kv_cache::KvRows<'_>, p: usize| match rows {
                    crate::kv_cache::KvRows::F32(r) => r.row(p)[g * hd..(g + 1) * hd].to_vec(),
                    crate::kv_cache::KvRows::F16(_) => unreachable!("an f32 cache"),
                };
                let ks: Vec<Vec<f32>> = list.iter().map(|&p| row(kv.k_rows(), p)).collect();
                let vs: Vec<Vec<f32>> = list.iter().map(|&p| row(kv.v_rows(), p)).collect();
                let qh = &q[t * width + h * hd..t * width + (h + 1) * hd];
                let want = reference(qh, &ks, &vs, shape.scale, 0);
                let got = &out[t * width + h * hd..t * width + (h + 1) * hd];
                for (a, b) in got.iter().zip(&want) {
                    assert!(
                        (a - b).abs() < 1e-5,
                        "{isa:?} query {t} head {h}: {a} vs {b}"
                    );
                }
            }
        }
    }
}

/// A query's listed attention has the same bits alone, in any call it shares, and on every
/// ISA (f32 and f16 caches).
#[test]
fn listed_output_is_independent_of_its_batch_and_isa() {
    let (n_head, n_kv, hd, n_pos) = (6, 2, 72, 700);
    for kv_type in [KvType::F32, KvType::F16] {
        let cache = filled_cache(n_pos, n_kv, hd, kv_type);
        let shape = causal(n_head, n_kv, hd);
        let width = n_head * hd;
        let q_all: Vec<f32> = (0..n_pos * width)
            .map(|i| (i as f32 * 0.23).sin())
            .collect();
        let lists: Vec<Vec<usize>> = (0..n_pos).map(qsa_like_list).collect();
        let mut want: Vec<u32> = Vec::new();
        for isa in isas() {
            let run = |pos0: usize, t_n: usize| {
                let q = &q_all[pos0 * width..(pos0 + t_n) * width];
                let mut out = vec![0.0; q.len()];
                let (pool, kv) = (crate::pool::global(), &cache.layers[0]);
                let lists = &lists[pos0..pos0 + t_n];
                listed::attention_listed_on(pool, isa, q, kv, lists, &shape, &mut out);
                out
            };
            if want.is_empty() {
                want = (0..n_pos)
                    .flat_map(|p| run(p, 1))
                    .map(f32::to_bits)
                    .collect();
            }
            for sizes in [&[700][..], &[3, 250, 17, 16, 2, 300, 112]] {
                let mut pos0 = 0;
                for &t_n in sizes {
                    let got: Vec<u32> = run(pos0, t_n).into_iter().map(f32::to_bits).collect();
                    let want = &want[pos0 * width..(pos0 + t_n) * width];
                    assert!(got == want, "{isa:?} {kv_type:?}: {t_n} from {pos0}");
                    pos0 += t_n;
                }
            }
        }
    }
}
