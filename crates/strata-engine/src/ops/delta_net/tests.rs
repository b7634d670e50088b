use super::*;
use crate::pool::{Pool, PoolOptions};
use strata_quant::Isa;

/// Deterministic pseudo-random values in (−1, 1).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

struct Case {
    shape: DeltaShape,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    b: Vec<f32>,
    state: Vec<f32>,
}

fn case(t_n: usize, seed: u64) -> Case {
    let shape = DeltaShape {
        n_v_heads: 4,
        n_k_heads: 2,
        d_k: 16,
        d_v: 8,
        key_heads: Default::default(),
    };
    case_of(shape, t_n, seed)
}

fn case_of(shape: DeltaShape, t_n: usize, seed: u64) -> Case {
    let (hk, hv) = (shape.n_k_heads, shape.n_v_heads);
    let mut q = noise(t_n * hk * shape.d_k, seed);
    let mut k = noise(t_n * hk * shape.d_k, seed + 1);
    l2_norm_heads_in_place(crate::pool::global(), &mut q, shape.d_k, 1e-6);
    l2_norm_heads_in_place(crate::pool::global(), &mut k, shape.d_k, 1e-6);
    Case {
        shape,
        q,
        k,
        v: noise(t_n * hv * shape.d_v, seed + 2),
        // log decays in (−1.5, 0): strong and weak forgetting
        g: noise(t_n * hv, seed + 3)
            .iter()
            .map(|x| -0.75 * (x + 1.0))
            .collect(),
        b: noise(t_n * hv, seed + 4)
            .iter()
            .map(|x| 0.5 + 0.45 * x)
            .collect(),
        state: noise(hv * shape.d_v * shape.d_k, seed + 5),
    }
}

impl Case {
    fn inputs(&self) -> DeltaInputs<'_> {
        DeltaInputs {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            log_decay: &self.g,
            beta: &self.b,
        }
    }
}

#[test]
fn recurrent_step_matches_the_naive_delta_rule() {
    let c = case(3, 7);
    let s = c.shape;
    let (dk, dv) = (s.d_k, s.d_v);
    let mut state = c.state.clone();
    let mut out = vec![0.0; 3 * s.n_v_heads * dv];
    delta_rule_recurrent(crate::pool::global(), &s, c.inputs(), &mut state, &mut out);
    for h in 0..s.n_v_heads {
        let kh = h / 2;
        // S[i][j] (d_k × d_v) in f64, from the row-major storage.
        let mut m: Vec<Vec<f64>> = (0..dk)
            .map(|i| {
                (0..dv)
                    .map(|j| c.state[(h * dk + i) * dv + j] as f64)
                    .collect()
            })
            .collect();
        for t in 0..3 {
            let q = &c.q[(t * s.n_k_heads + kh) * dk..][..dk];
            let k = &c.k[(t * s.n_k_heads + kh) * dk..][..dk];
            let v = &c.v[(t * s.n_v_heads + h) * dv..][..dv];
            let g = (c.g[t * s.n_v_heads + h] as f64).exp();
            let b = c.b[t * s.n_v_heads + h] as f64;
            m.iter_mut().flatten().for_each(|x| *x *= g);
            let stk: Vec<f64> = (0..dv)
                .map(|j| (0..dk).map(|i| m[i][j] * k[i] as f64).sum())
                .collect();
            for i in 0..dk {
                for j in 0..dv {
                    m[i][j] += k[i] as f64 * b * (v[j] as f64 - stk[j]);
                }
            }
            for j in 0..dv {
                let o: f64 =
                    (0..dk).map(|i| m[i][j] * q[i] as f64).sum::<f64>() / (dk as f64).sqrt();
                let got = out[(t * s.n_v_heads + h) * dv + j] as f64;
                assert!((o - got).abs() < 1e-5, "h{h} t{t} j{j}: {o} vs {got}");
            }
        }
        for i in 0..dk {
            for j in 0..dv {
                let got = state[(h * dk + i) * dv + j] as f64;
                assert!((m[i][j] - got).abs() < 1e-5);
            }
        }
    }
}

/// A call of T tokens gives the bits of T calls of one token, for outputs and state: the
/// delta rule's part of batch invariance.
#[test]
fn a_call_of_many_tokens_equals_one_call_per_token() {
    for t_n in [2, 5, 150] {
        let c = case(t_n, 11 + t_n as u64);
        let s = c.shape;
        let (nk, nv) = (s.n_k_heads, s.n_v_heads);
        let mut s_all = c.state.clone();
        let mut o_all = vec![0.0; t_n * nv * s.d_v];
        delta_rule_recurrent(
            crate::pool::global(),
            &s,
            c.inputs(),
            &mut s_all,
            &mut o_all,
        );
        let mut s_one = c.state.clone();
        let mut o_one = Vec::new();
        for t in 0..t_n {
            let x = DeltaInputs {
                q: &c.q[t * nk * s.d_k..(t + 1) * nk * s.d_k],
                k: &c.k[t * nk * s.d_k..(t + 1) * nk * s.d_k],
                v: &c.v[t * nv * s.d_v..(t + 1) * nv * s.d_v],
                log_decay: &c.g[t * nv..(t + 1) * nv],
                beta: &c.b[t * nv..(t + 1) * nv],
            };
            let mut o = vec![0.0; nv * s.d_v];
            delta_rule_recurrent(crate::pool::global(), &s, x, &mut s_one, &mut o);
            o_one.extend_from_slice(&o);
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&o_all), bits(&o_one), "T={t_n}: outputs");
        assert_eq!(bits(&s_all), bits(&s_one), "T={t_n}: state");
    }
}

/// The same bits on pools of 1, 2 and 3 workers, with heads big enough to be
/// tasks of their own (decode) and a head count that does not divide evenly among workers.
#[test]
fn results_are_bit_identical_for_any_worker_count() {
    let shape = DeltaShape {
        n_v_heads: 6,
        n_k_heads: 2,
        d_k: 64,
        d_v: 64,
        key_heads: Default::default(),
    };
    let pools: Vec<Pool> = (1..=3)
        .map(|n| {
            Pool::new(PoolOptions {
                workers: n,
                ..PoolOptions::default()
            })
        })
        .collect();
    for t_n in [1, 3, 70] {
        let c = case_of(shape, t_n, 40 + t_n as u64);
        let run = |pool: &Pool| {
            let mut state = c.state.clone();
            let mut out = vec![0.0; t_n * shape.n_v_heads * shape.d_v];
            pool.install(|| {
                delta_rule_recurrent(
                    crate::pool::global(),
                    &shape,
                    c.inputs(),
                    &mut state,
                    &mut out,
                )
            });
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (bits(&state), bits(&out))
        };
        let want = run(&pools[0]);
        for pool in &pools[1..] {
            assert!(
                run(pool) == want,
                "T={t_n}: {} workers change the result",
                pool.workers()
            );
        }
    }
}

#[test]
fn l2_norm_gives_unit_heads() {
    let mut x = vec![3.0f32, 4.0, 0.0, 0.0, 1.0, 1.0];
    l2_norm_heads_in_place(crate::pool::global(), &mut x, 2, 1e-12);
    assert!((x[0] - 0.6).abs() < 1e-6 && (x[1] - 0.8).abs() < 1e-6);
    assert_eq!(&x[2..4], &[0.0, 0.0]);
    assert!((x[4] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
}

/// Heads grouped several to a task (32 × 32 heads: 4 per task for one token, 2 for three)
/// give each head the bits it gets when run alone as a one-head call, so a head is never
/// paired with another head's state, inputs or output rows; in both key-head orders.
#[test]
fn grouped_heads_match_each_head_run_alone() {
    for key_heads in [KeyHeads::Grouped, KeyHeads::Tiled] {
        heads_match_each_head_run_alone(key_heads);
    }
}

fn heads_match_each_head_run_alone(key_heads: KeyHeads) {
    let shape = DeltaShape {
        n_v_heads: 6,
        n_k_heads: 2,
        d_k: 32,
        d_v: 32,
        key_heads,
    };
    let (nv, nk, dk, dv) = (6, 2, 32, 32);
    let pool = Pool::new(PoolOptions {
        workers: 2,
        ..PoolOptions::default()
    });
    for t_n in [1, 3] {
        let c = case_of(shape, t_n, 90 + t_n as u64);
        {
            let call = |s: &DeltaShape, x: DeltaInputs<'_>, st: &mut [f32], out: &mut [f32]| {
                pool.install(|| delta_rule_recurrent(crate::pool::global(), s, x, st, out))
            };
            let mut state = c.state.clone();
            let mut out = vec![0.0; t_n * nv * dv];
            call(&shape, c.inputs(), &mut state, &mut out);
            let one = DeltaShape {
                n_v_heads: 1,
                n_k_heads: 1,
                d_k: dk,
                d_v: dv,
                key_heads: Default::default(),
            };
            for h in 0..nv {
                let kh = match key_heads {
                    KeyHeads::Grouped => h / (nv / nk),
                    KeyHeads::Tiled => h % nk,
                };
                let per_tok = |v: &[f32], heads: usize, i: usize, w: usize| -> Vec<f32> {
                    (0..t_n)
                        .flat_map(|t| v[(t * heads + i) * w..][..w].to_vec())
                        .collect()
                };
                let (q, k) = (per_tok(&c.q, nk, kh, dk), per_tok(&c.k, nk, kh, dk));
                let v = per_tok(&c.v, nv, h, dv);
                let (g, b) = (per_tok(&c.g, nv, h, 1), per_tok(&c.b, nv, h, 1));
                let x = DeltaInputs {
                    q: &q,
                    k: &k,
                    v: &v,
                    log_decay: &g,
                    beta: &b,
                };
                let mut st = c.state[h * dv * dk..(h + 1) * dv * dk].to_vec();
                let mut o = vec![0.0; t_n * dv];
                call(&one, x, &mut st, &mut o);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let form = "recurrent";
                assert_eq!(
                    bits(&st),
                    bits(&state[h * dv * dk..(h + 1) * dv * dk]),
                    "{form} {key_heads:?} T={t_n} head {h}: state"
                );
                assert_eq!(
                    bits(&o),
                    bits(&per_tok(&out, nv, h, dv)),
                    "{form} {key_heads:?} T={t_n} head {h}: outputs"
                );
            }
        }
    }
}

#[test]
fn the_vector_paths_give_the_portable_bits() {
    // Qwen3-Next's 128 × 128 heads (two column blocks), and odd widths (a short block).
    for (d_k, d_v) in [(128, 128), (37, 24), (16, 70)] {
        let shape = DeltaShape {
            n_v_heads: 2,
            n_k_heads: 1,
            d_k,
            d_v,
            key_heads: KeyHeads::Grouped,
        };
        let c = case_of(shape, 5, 11);
        let scale = 1.0 / (d_k as f32).sqrt();
        for h in 0..2 {
            let head = |st: &mut Vec<f32>, o: &mut Vec<f32>, dispatched: bool| {
                let (st, o) = (&mut st[h * d_v * d_k..(h + 1) * d_v * d_k], &mut o[..]);
                if dispatched {
                    recurrent_head(&shape, c.inputs(), h, st, o, scale);
                } else {
                    let (s, x) = (&shape, c.inputs());
                    Head {
                        s,
                        x,
                        h,
                        st,
                        o,
                        scale,
                    }
                    .recur();
                }
            };
            let (mut st_a, mut o_a) = (c.state.clone(), vec![0.0; 5 * d_v]);
            let (mut st_b, mut o_b) = (c.state.clone(), vec![0.0; 5 * d_v]);
            head(&mut st_a, &mut o_a, true);
            head(&mut st_b, &mut o_b, false);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&o_a), bits(&o_b), "{} d_k {d_k}", Isa::best().name());
            assert_eq!(bits(&st_a), bits(&st_b));
        }
    }
}
