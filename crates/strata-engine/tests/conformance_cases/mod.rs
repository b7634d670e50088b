//! The cases of the per-op conformance suite, after llama.cpp's `test-backend-ops`: every op
//! of the model graphs over odd shapes, every weight type and both KV types, run through the
//! [`Backend`] trait. Shared without copying by the engine's `tests/conformance.rs` (each CPU
//! instruction-set level against the scalar path) and strata-vulkan's `tests/conformance.rs`
//! (the Vulkan backend against the CPU, including this directory with `#[path]`).
//!
//! A case that the backend cannot run (an op or weight type it does not implement, reported
//! as an error by the op or by [`Backend::finish`]) is a [`Failure`], not a panic, so one
//! backend's gaps do not hide its other results.

use strata_engine::backend::{Backend, Buf, DeltaBufs, Glu, QsaBufs};
use strata_engine::kv_cache::{KvCache, KvType};
use strata_engine::ops::attention::AttnShape;
use strata_engine::ops::delta_net::{DeltaShape, KeyHeads};
use strata_engine::ops::linear::Matrix;
use strata_engine::ops::moe::{ExpertTensor, MoeWeights};
use strata_engine::ops::qsa::{BlockKeyWeights, QsaShape};
use strata_engine::ops::rope::{Rope, RopeStyle};
use strata_engine::recurrent_state::{DeltaState, PleState, RecurrentState};
use strata_engine::session::SeqRun;
use strata_engine::EngineError;
use strata_quant::GgmlType;

#[allow(dead_code)] // not every helper of the generator is used here
#[path = "../common/rng.rs"]
mod rng;

use rng::Rng;

/// Why a case has no output: the backend's error, as text.
pub type Failure = String;

/// A case's output `[·]` (the buffer's contents), or why the backend could not run it.
pub type Outcome = Result<Vec<f32>, Failure>;

/// Every weight type a graph can meet, with a `vec_dot` or a float dot.
pub const WEIGHT_TYPES: [GgmlType; 22] = {
    use GgmlType as T;
    [
        T::F32,
        T::F16,
        T::BF16,
        T::Q4_0,
        T::Q4_1,
        T::Q5_0,
        T::Q5_1,
        T::Q8_0,
        T::Q2_K,
        T::Q3_K,
        T::Q4_K,
        T::Q5_K,
        T::Q6_K,
        T::IQ4_NL,
        T::IQ4_XS,
        T::IQ2_XXS,
        T::IQ2_XS,
        T::IQ2_S,
        T::IQ3_XXS,
        T::IQ3_S,
        T::IQ1_S,
        T::IQ1_M,
    ]
};

/// Byte offsets of the f16 scale fields of a block of `ty` (ggml's block layouts).
fn f16_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType as T;
    match ty {
        T::Q4_1 | T::Q5_1 | T::Q4_K | T::Q5_K => &[0, 2],
        T::Q2_K => &[80, 82],
        T::Q3_K => &[108],
        T::Q6_K => &[208],
        T::IQ1_M | T::F32 | T::F16 | T::BF16 => &[],
        _ => &[0],
    }
}

/// `rows` rows of `cols` in `ty`: quantized from random floats where strata-quant can, else
/// random block bytes with moderate scales, re-drawn until every value is finite and small.
///
/// Leaked, as every weight of the cases: a device backend keeps the weights it uploaded by
/// the address and length of their bytes (a model's live as long as the model), so a case's
/// weights must not be freed and their memory given to another case's.
fn weights(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> &'static [u8] {
    let rb = ty.row_bytes(cols as u64).unwrap() as usize;
    let mut out = vec![0u8; rows * rb];
    if strata_quant::supports_quantize(ty) {
        for row in out.chunks_exact_mut(rb) {
            strata_quant::quantize(ty, &rng.vec(cols, 1.0), row).unwrap();
        }
        return out.leak();
    }
    let mut deq = vec![0.0f32; cols];
    for row in out.chunks_exact_mut(rb) {
        loop {
            row.iter_mut().for_each(|b| *b = rng.next() as u8);
            for block in row.chunks_exact_mut(ty.type_size()) {
                for &at in f16_fields(ty) {
                    let v = half::f16::from_f32(0.01 + 0.02 * rng.f().abs());
                    block[at..at + 2].copy_from_slice(&v.to_le_bytes());
                }
            }
            strata_quant::dequantize(ty, row, &mut deq).unwrap();
            if deq.iter().all(|v| v.is_finite() && v.abs() < 1e3) {
                break;
            }
        }
    }
    out.leak()
}

/// `n` small weights (a norm's, a convolution's) in [-scale, scale), leaked as [`weights`].
fn vector(rng: &mut Rng, n: usize, scale: f32) -> &'static [f32] {
    rng.vec(n, scale).leak()
}

/// `x` (`[·][cols]`) in a buffer of `be`.
fn buf<B: Backend>(be: &B, x: &[f32], cols: usize) -> Buf<B> {
    let mut b = Buf::<B>::default();
    be.upload(x, cols, &mut b);
    b
}

/// The contents of a buffer of `be` after a case's ops, or the first error of those ops that
/// the backend recorded (reported by [`Backend::finish`], which also clears it).
fn read<B: Backend>(be: &B, b: &mut Buf<B>) -> Outcome {
    be.finish().map_err(|e| e.to_string())?;
    let v = be.host(b).clone();
    be.finish().map_err(|e| e.to_string())?;
    Ok(v)
}

/// [`read`] after an op that returns its error.
fn read_after<B: Backend>(be: &B, r: Result<(), EngineError>, b: &mut Buf<B>) -> Outcome {
    match r {
        Ok(()) => read(be, b),
        Err(e) => {
            // Clears anything recorded before it too.
            let _ = be.finish();
            Err(e.to_string())
        }
    }
}

/// One sequence at `pos0` over rows `0..t` with one KV layer and/or one recurrent layer.
fn seq<'a>(
    kv: &'a mut [strata_engine::kv_cache::LayerKv],
    rec: Option<&'a mut RecurrentState>,
    pos0: usize,
    t: usize,
) -> SeqRun<'a> {
    SeqRun {
        kv,
        rec,
        pos0,
        rows: 0..t,
    }
}

/// Outputs of every case on backend `be`, by case name (`op/...`), in a fixed order.
///
/// Inputs are drawn from one seeded generator, so every backend gets the same ones.
pub fn cases<B: Backend>(be: &B) -> Vec<(String, Outcome)> {
    let mut out = Vec::new();
    let mut rng = Rng(0xC0FF_EE11);
    // matmul: every weight type, odd row counts, one token (decode), a few (verify window),
    // and more than a token tile (prefill).
    for ty in WEIGHT_TYPES {
        for (rows, cols) in [(37, 256), (130, 512)] {
            let w = weights(&mut rng, ty, rows, cols);
            let m = Matrix {
                ty,
                rows,
                cols,
                data: w,
            };
            for t in [1, 3, 70] {
                let mut x = buf(be, &rng.vec(t * cols, 1.0), cols);
                let mut y = Buf::<B>::default();
                let r = be.matmul(&m, None, &mut x, &mut y);
                out.push((
                    format!("matmul/{ty}/{rows}x{cols}/T{t}"),
                    read_after(be, r, &mut y),
                ));
            }
        }
    }
    // attention: f32 and f16 caches, GQA groups 1/3/7, head dims with and without a tail,
    // decode past a segment, windows, prefill blocks. The call writes the keys and values of
    // its own positions; earlier ones are in the cache already.
    for kv_type in [KvType::F32, KvType::F16] {
        for (n_head, n_kv, hd) in [(4, 4, 64), (6, 2, 72), (14, 2, 40)] {
            let (n_pos, kvd) = (600, n_kv * hd);
            let mut cache = KvCache::new(1, n_pos, kvd, kv_type);
            let (ks, vs) = (rng.vec(n_pos * kvd, 2.0), rng.vec(n_pos * kvd, 1.0));
            for p in 0..n_pos {
                let r = p * kvd..(p + 1) * kvd;
                cache.layers[0].write(p, &ks[r.clone()], &vs[r]);
            }
            for window in [None, Some(100)] {
                let shape = AttnShape {
                    n_head,
                    n_kv_head: n_kv,
                    head_dim: hd,
                    scale: 1.0 / (hd as f32).sqrt(),
                    window,
                };
                for (t, pos0) in [(1, 599), (5, 300), (37, 0), (40, 560)] {
                    let q = buf(be, &rng.vec(t * n_head * hd, 1.0), n_head * hd);
                    let r = pos0 * kvd..(pos0 + t) * kvd;
                    let (k, v) = (buf(be, &ks[r.clone()], kvd), buf(be, &vs[r], kvd));
                    let mut o = Buf::<B>::default();
                    let mut s = [seq(&mut cache.layers, None, pos0, t)];
                    be.attend(&mut s, 0, &q, &k, &v, &shape, &mut o);
                    let name = format!(
                        "attention/{kv_type:?}/h{n_head}kv{n_kv}d{hd}/{window:?}/T{t}@{pos0}"
                    );
                    out.push((name, read(be, &mut o)));
                }
            }
        }
    }
    // Gated delta rule and its inputs' L2 norm; causal conv1d.
    for (nv, nk, dk, dv, t, key_heads) in [
        (4, 2, 64, 64, 1, KeyHeads::Grouped),
        (6, 2, 32, 48, 19, KeyHeads::Grouped),
        (6, 2, 32, 48, 5, KeyHeads::Tiled),
    ] {
        let s = DeltaShape {
            n_v_heads: nv,
            n_k_heads: nk,
            d_k: dk,
            d_v: dv,
            key_heads,
        };
        let mut q = buf(be, &rng.vec(t * nk * dk, 1.0), nk * dk);
        let mut k = buf(be, &rng.vec(t * nk * dk, 1.0), nk * dk);
        be.l2_norm_heads(&mut q, dk, 1e-6);
        be.l2_norm_heads(&mut k, dk, 1e-6);
        out.push((format!("l2_norm/{nk}x{dk}/T{t}"), read(be, &mut q)));
        let v = buf(be, &rng.vec(t * nv * dv, 1.0), nv * dv);
        let g: Vec<f32> = (0..t * nv).map(|_| -rng.f().abs()).collect();
        let b: Vec<f32> = (0..t * nv).map(|_| rng.f().abs()).collect();
        let (g, b) = (buf(be, &g, nv), buf(be, &b, nv));
        let mut rec = RecurrentState::from_parts(
            vec![DeltaState {
                conv: Vec::new(),
                ssm: rng.vec(nv * dv * dk, 0.1),
            }],
            None,
        );
        let mut o = Buf::<B>::default();
        let x = DeltaBufs {
            q: &q,
            k: &k,
            v: &v,
            log_decay: &g,
            beta: &b,
        };
        be.delta_rule(&mut [seq(&mut [], Some(&mut rec), 0, t)], 0, &s, x, &mut o);
        let synced = be.sync_state(&mut [seq(&mut [], Some(&mut rec), 0, t)]);
        let y = read_after(be, synced, &mut o);
        let state = std::mem::take(&mut rec.layers[0].ssm);
        // The state is the op's output too: void when the op failed.
        let state = y.as_ref().map(|_| state).map_err(Clone::clone);
        out.push((
            format!("delta_rule/{nv}v{nk}k{dk}x{dv}/{key_heads:?}/T{t}"),
            y,
        ));
        out.push((
            format!("delta_rule_state/{nv}v{nk}k{dk}x{dv}/{key_heads:?}/T{t}"),
            state,
        ));
    }
    for (c, kk, t) in [(96, 4, 1), (130, 4, 9)] {
        let w = vector(&mut rng, c * kk, 0.5);
        let mut rec = RecurrentState::from_parts(
            vec![DeltaState {
                conv: rng.vec((kk - 1) * c, 1.0),
                ssm: Vec::new(),
            }],
            None,
        );
        let x = buf(be, &rng.vec(t * c, 1.0), c);
        let mut o = Buf::<B>::default();
        be.conv1d(&mut [seq(&mut [], Some(&mut rec), 0, t)], 0, &x, w, &mut o);
        let synced = be.sync_state(&mut [seq(&mut [], Some(&mut rec), 0, t)]);
        let y = read_after(be, synced, &mut o);
        let state = std::mem::take(&mut rec.layers[0].conv);
        let state = y.as_ref().map(|_| state).map_err(Clone::clone);
        out.push((format!("conv1d/C{c}K{kk}/T{t}"), y));
        out.push((format!("conv1d_state/C{c}K{kk}/T{t}"), state));
    }
    // Row-wise and element-wise ops.
    for (d, t) in [(576, 1), (896, 33)] {
        let xv = rng.vec(t * d, 3.0);
        let x = buf(be, &xv, d);
        let w = vector(&mut rng, d, 1.0);
        let mut o = Buf::<B>::default();
        be.rms_norm(&x, w, 1e-6, &mut o);
        out.push((format!("rms_norm/{d}/T{t}"), read(be, &mut o)));
        let up = buf(be, &rng.vec(t * d, 2.0), d);
        for (name, act) in [("swiglu", Glu::SwiGlu), ("geglu", Glu::GegluTanh)] {
            let mut g = buf(be, &xv, d);
            be.glu(act, &mut g, &up);
            out.push((format!("{name}/{d}/T{t}"), read(be, &mut g)));
        }
        let mut g = buf(be, &xv, d);
        be.silu(&mut g);
        out.push((format!("silu/{d}/T{t}"), read(be, &mut g)));
        let mut g = buf(be, &xv, d);
        be.mul_silu(&mut g, &up);
        out.push((format!("mul_silu/{d}/T{t}"), read(be, &mut g)));
        let mut g = buf(be, &xv, d);
        be.mul_sigmoid(&mut g, &up);
        out.push((format!("mul_sigmoid/{d}/T{t}"), read(be, &mut g)));
        let mut g = buf(be, &xv, d);
        be.add_gated(&mut g, &up, &buf(be, &rng.vec(t, 2.0), 1));
        out.push((format!("add_gated/{d}/T{t}"), read(be, &mut g)));
        let mut g = buf(be, &xv, d);
        be.softcap(&mut g, 2.5);
        out.push((format!("softcap/{d}/T{t}"), read(be, &mut g)));
        let (mut p0, mut p1) = (Buf::<B>::default(), Buf::<B>::default());
        be.split(&x, &[d / 8, d / 8 + d / 16], &mut [&mut p0, &mut p1]);
        out.push((format!("split/{d}/T{t}"), read(be, &mut p1)));
    }
    // Hyper-connection and PLE element-wise ops: 4 streams of 96.
    for t in [1, 7] {
        let (hc, d) = (4, 96);
        let r = rng.vec(t * hc * d, 2.0);
        let mut o = Buf::<B>::default();
        let w = vector(&mut rng, hc * d, 1.0);
        be.rms_norm_grouped(&buf(be, &r, hc * d), w, d, 1e-6, &mut o);
        out.push((format!("rms_norm_grouped/{hc}x{d}/T{t}"), read(be, &mut o)));
        let g = buf(be, &rng.vec(t * hc * d, 3.0), hc * d);
        be.hc_collapse(&buf(be, &r, hc * d), &g, hc, &mut o);
        out.push((format!("hc_collapse/{hc}x{d}/T{t}"), read(be, &mut o)));
        let mut rb = buf(be, &r, hc * d);
        let y = buf(be, &rng.vec(t * d, 1.0), d);
        be.hc_expand_add(&mut rb, &y, &buf(be, &rng.vec(t * hc, 4.0), hc));
        out.push((format!("hc_expand_add/{hc}x{d}/T{t}"), read(be, &mut rb)));
        let key = buf(be, &rng.vec(t * hc * d, 1.0), hc * d);
        be.ple_gate(&key, &buf(be, &r, hc * d), &y, &mut o);
        out.push((format!("ple_gate/{hc}x{d}/T{t}"), read(be, &mut o)));
        let mut x = buf(be, &r, hc * d);
        be.scale(&mut x, 0.3);
        out.push((format!("scale/{hc}x{d}/T{t}"), read(be, &mut x)));
        be.concat(&[&y, &key, &y], &mut o);
        out.push((format!("concat/{hc}x{d}/T{t}"), read(be, &mut o)));
        // PLE's dilated convolution: 3 taps, dilation 3, continuing a random history.
        let (kk, dil, c) = (3, 3, hc * d);
        let mut rec = RecurrentState::from_parts(
            Vec::new(),
            Some(PleState {
                tokens: vec![0; 2],
                eos: 0,
                conv: rng.vec((kk - 1) * dil * c, 1.0),
            }),
        );
        let w = vector(&mut rng, c * kk, 0.5);
        be.ple_conv(
            &mut [seq(&mut [], Some(&mut rec), 0, t)],
            &buf(be, &r, c),
            w,
            dil,
            &mut o,
        );
        let synced = be.sync_state(&mut [seq(&mut [], Some(&mut rec), 0, t)]);
        let y = read_after(be, synced, &mut o);
        let state = rec.ple.take().unwrap().conv;
        let state = y.as_ref().map(|_| state).map_err(Clone::clone);
        out.push((format!("ple_conv/C{c}K{kk}D{dil}/T{t}"), y));
        out.push((format!("ple_conv_state/C{c}K{kk}D{dil}/T{t}"), state));
    }
    // Embedding rows side by side (hyper-connection copies, PLE n-gram rows).
    let table = weights(&mut rng, GgmlType::IQ4_NL, 40, 64);
    let m = Matrix {
        ty: GgmlType::IQ4_NL,
        rows: 40,
        cols: 64,
        data: table,
    };
    let mut x = Buf::<B>::default();
    let r = be.embed_rows(&m, &[3, 39, 0, 3, 7, 7], 3, &mut x);
    out.push(("embed_rows/IQ4_NL".into(), read_after(be, r, &mut x)));
    // QSA attention: f32 and f16 caches, blocks of 4 and a budget of 8 tokens, queries below
    // and past the budget, decode and a batch.
    for kv_type in [KvType::F32, KvType::F16] {
        let (n_head, n_kv, hd, ni, di, n_pos) = (4, 2, 40, 2, 32, 90);
        let kvd = n_kv * hd;
        let mut cache = KvCache::new(1, n_pos, kvd, kv_type).with_index_keys(&[di]);
        let (ks, vs, kr) = (
            rng.vec(n_pos * kvd, 2.0),
            rng.vec(n_pos * kvd, 1.0),
            rng.vec(n_pos * di, 1.0),
        );
        for p in 0..n_pos {
            let r = p * kvd..(p + 1) * kvd;
            cache.layers[0].write(p, &ks[r.clone()], &vs[r]);
            cache.layers[0].write_index_key(p, &kr[p * di..(p + 1) * di]);
        }
        let shape = AttnShape {
            n_head,
            n_kv_head: n_kv,
            head_dim: hd,
            scale: 1.0 / (hd as f32).sqrt(),
            window: None,
        };
        let qsa = QsaShape {
            ratio: 4,
            budget: 8,
            n_head: ni,
            head_dim: di,
            eps: 1e-6,
        };
        let rope = Rope {
            style: RopeStyle::Neox,
            n_rot: 16,
            freq_base: 10000.0,
            freq_scale: 1.0,
        };
        let k_norm = vector(&mut rng, di, 1.0);
        for (t, pos0) in [(1, 89), (30, 0), (9, 60)] {
            let q = buf(be, &rng.vec(t * n_head * hd, 1.0), n_head * hd);
            let iq = buf(be, &rng.vec(t * ni * di, 1.0), ni * di);
            let r = pos0 * kvd..(pos0 + t) * kvd;
            let (k, v) = (buf(be, &ks[r.clone()], kvd), buf(be, &vs[r], kvd));
            let ik = buf(be, &kr[pos0 * di..(pos0 + t) * di], di);
            let x = QsaBufs {
                q: &q,
                k: &k,
                v: &v,
                iq: &iq,
                ik: &ik,
            };
            let bk = BlockKeyWeights {
                k_norm,
                rope: &rope,
            };
            let mut o = Buf::<B>::default();
            let mut s = [seq(&mut cache.layers, None, pos0, t)];
            be.attend_qsa(&mut s, 0, x, &shape, &qsa, bk, &mut o);
            out.push((
                format!("attend_qsa/{kv_type:?}/T{t}@{pos0}"),
                read(be, &mut o),
            ));
        }
    }
    // Gated DeltaNet gates: 2 key heads of 3 value heads.
    let (nv, nk, t) = (6, 2, 5);
    let ba = buf(be, &rng.vec(t * 2 * nv, 4.0), 2 * nv);
    let (dt, a) = (vector(&mut rng, nv, 1.0), vector(&mut rng, nv, 1.0));
    let (mut beta, mut decay) = (Buf::<B>::default(), Buf::<B>::default());
    be.delta_gates(&ba, dt, a, nk, &mut beta, &mut decay);
    // One op, two outputs: both void when it failed.
    let b = read(be, &mut beta);
    let d = b.clone().and_then(|_| read(be, &mut decay));
    out.push(("delta_gates/beta".into(), b));
    out.push(("delta_gates/log_decay".into(), d));
    for style in [RopeStyle::Normal, RopeStyle::Neox] {
        for (hd, n_rot) in [(64, 64), (256, 64)] {
            let rope = Rope {
                style,
                n_rot,
                freq_base: 10000.0,
                freq_scale: 1.0,
            };
            let (heads, t) = (3, 7);
            let pos: Vec<usize> = (0..t).map(|p| 1000 * p + 3).collect();
            let mut cs = Buf::<B>::default();
            be.rope_angles(&rope, &pos, &mut cs);
            let mut x = buf(be, &rng.vec(t * heads * hd, 1.0), heads * hd);
            be.rope(&rope, &mut x, hd, &cs);
            out.push((format!("rope/{style:?}/d{hd}r{n_rot}"), read(be, &mut x)));
        }
    }
    // Embedding rows of a quantized table.
    let table = weights(&mut rng, GgmlType::Q4_K, 50, 256);
    let m = Matrix {
        ty: GgmlType::Q4_K,
        rows: 50,
        cols: 256,
        data: table,
    };
    let mut x = Buf::<B>::default();
    let r = be.embed(&m, 0.5, &[3, 49, 0, 3], &mut x);
    out.push(("embed/Q4_K".into(), read_after(be, r, &mut x)));
    // Routed experts: quantized weight types, f32 (which no backend quantizes activations
    // for: the sharpest check of routing and combining), and the lattice i-quant experts of
    // an IQ3_XXS model (last, so the cases before keep their random draws); decode and a batch.
    for (ty, down_ty) in [
        (GgmlType::Q4_K, GgmlType::Q6_K),
        (GgmlType::IQ4_XS, GgmlType::Q8_0),
        (GgmlType::F32, GgmlType::F32),
        (GgmlType::IQ3_XXS, GgmlType::IQ3_XXS),
    ] {
        let (ne, k, d, ff) = (8, 2, 256, 512);
        let mat = |data: &'static [u8], ty, rows, cols| Matrix {
            ty,
            rows,
            cols,
            data,
        };
        let router = weights(&mut rng, GgmlType::F32, ne, d);
        let gate = weights(&mut rng, ty, ne * ff, d);
        let up = weights(&mut rng, ty, ne * ff, d);
        let down = weights(&mut rng, down_ty, ne * d, ff);
        let m = MoeWeights {
            layer: 0,
            router: mat(router, GgmlType::F32, ne, d),
            gate: ExpertTensor::new(mat(gate, ty, ne * ff, d), ne),
            up: ExpertTensor::new(mat(up, ty, ne * ff, d), ne),
            down: ExpertTensor::new(mat(down, down_ty, ne * d, ff), ne),
            n_used: k,
            norm_topk: true,
        };
        for t in [1, 9] {
            let mut x = buf(be, &rng.vec(t * d, 1.0), d);
            let mut o = Buf::<B>::default();
            let mut scratch = Default::default();
            let r = be.moe(&m, &mut x, &mut o, &mut scratch);
            out.push((
                format!("moe/{ty}+{down_ty}/T{t}"),
                read_after(be, r, &mut o),
            ));
        }
    }
    out
}
