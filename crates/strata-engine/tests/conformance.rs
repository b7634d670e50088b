//! Per-op conformance, after llama.cpp's `test-backend-ops`: every op of the model graphs, over
//! odd shapes, every weight type and both KV types, run on each backend and compared with the
//! reference backend within a tolerance stated per op.
//!
//! Backends today are the CPU at each instruction-set level this machine has (`STRATA_ISA`),
//! each in a child process of this test (the level is chosen once per process); the reference
//! is the scalar path. A child runs [`cases`] and writes every output to a file; the parent
//! compares them with the reference's and prints one line per op and backend. A GPU backend
//! adds itself as one more producer of the same outputs.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Command;

use common::Rng;
use strata_engine::backend::{Backend, Buf, Cpu, DeltaBufs, Glu, QsaBufs};
use strata_engine::kv_cache::{KvCache, KvType};
use strata_engine::ops::attention::AttnShape;
use strata_engine::ops::delta_net::{DeltaShape, KeyHeads};
use strata_engine::ops::linear::Matrix;
use strata_engine::ops::moe::{ExpertTensor, MoeWeights};
use strata_engine::ops::qsa::{BlockKeyWeights, QsaShape};
use strata_engine::ops::rope::{Rope, RopeStyle};
use strata_engine::recurrent_state::{DeltaState, PleState, RecurrentState};
use strata_engine::session::SeqRun;
use strata_gguf::GgmlType;
use strata_quant::Isa;

/// Set in a child: the file to write outputs to.
const CHILD_ENV: &str = "STRATA_CONFORMANCE_OUT";

/// Every weight type a graph can meet, with a `vec_dot` or a float dot.
const WEIGHT_TYPES: [GgmlType; 22] = {
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
fn weights(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
    let rb = ty.row_bytes(cols as u64).unwrap() as usize;
    let mut out = vec![0u8; rows * rb];
    if strata_quant::supports_quantize(ty) {
        for row in out.chunks_exact_mut(rb) {
            strata_quant::quantize(ty, &rng.vec(cols, 1.0), row).unwrap();
        }
        return out;
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
    out
}

/// `x` (`[·][cols]`) in a buffer of `be`.
fn buf<B: Backend>(be: &B, x: &[f32], cols: usize) -> Buf<B> {
    let mut b = Buf::<B>::default();
    be.upload(x, cols, &mut b);
    b
}

/// The contents of a buffer of `be`.
fn read<B: Backend>(be: &B, b: &mut Buf<B>) -> Vec<f32> {
    be.host(b).clone()
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

/// Outputs of every case on backend `be`, by case name (`op/...`).
fn cases<B: Backend>(be: &B) -> Vec<(String, Vec<f32>)> {
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
                data: &w,
            };
            for t in [1, 3, 70] {
                let mut x = buf(be, &rng.vec(t * cols, 1.0), cols);
                let mut y = Buf::<B>::default();
                be.matmul(&m, None, &mut x, &mut y).unwrap();
                out.push((format!("matmul/{ty}/{rows}x{cols}/T{t}"), read(be, &mut y)));
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
        let mut rec = RecurrentState {
            layers: vec![DeltaState {
                conv: Vec::new(),
                ssm: rng.vec(nv * dv * dk, 0.1),
            }],
            ple: None,
        };
        let mut o = Buf::<B>::default();
        let x = DeltaBufs {
            q: &q,
            k: &k,
            v: &v,
            log_decay: &g,
            beta: &b,
        };
        be.delta_rule(&mut [seq(&mut [], Some(&mut rec), 0, t)], 0, &s, x, &mut o);
        out.push((
            format!("delta_rule/{nv}v{nk}k{dk}x{dv}/{key_heads:?}/T{t}"),
            read(be, &mut o),
        ));
        let state = std::mem::take(&mut rec.layers[0].ssm);
        out.push((
            format!("delta_rule_state/{nv}v{nk}k{dk}x{dv}/{key_heads:?}/T{t}"),
            state,
        ));
    }
    for (c, kk, t) in [(96, 4, 1), (130, 4, 9)] {
        let w = rng.vec(c * kk, 0.5);
        let mut rec = RecurrentState {
            layers: vec![DeltaState {
                conv: rng.vec((kk - 1) * c, 1.0),
                ssm: Vec::new(),
            }],
            ple: None,
        };
        let x = buf(be, &rng.vec(t * c, 1.0), c);
        let mut o = Buf::<B>::default();
        be.conv1d(&mut [seq(&mut [], Some(&mut rec), 0, t)], 0, &x, &w, &mut o);
        out.push((format!("conv1d/C{c}K{kk}/T{t}"), read(be, &mut o)));
        let state = std::mem::take(&mut rec.layers[0].conv);
        out.push((format!("conv1d_state/C{c}K{kk}/T{t}"), state));
    }
    // Row-wise and element-wise ops.
    for (d, t) in [(576, 1), (896, 33)] {
        let xv = rng.vec(t * d, 3.0);
        let x = buf(be, &xv, d);
        let w = rng.vec(d, 1.0);
        let mut o = Buf::<B>::default();
        be.rms_norm(&x, &w, 1e-6, &mut o);
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
        be.rms_norm_grouped(&buf(be, &r, hc * d), &rng.vec(hc * d, 1.0), d, 1e-6, &mut o);
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
        let mut rec = RecurrentState {
            layers: Vec::new(),
            ple: Some(PleState {
                tokens: vec![0; 2],
                eos: 0,
                conv: rng.vec((kk - 1) * dil * c, 1.0),
            }),
        };
        let w = rng.vec(c * kk, 0.5);
        be.ple_conv(
            &mut [seq(&mut [], Some(&mut rec), 0, t)],
            &buf(be, &r, c),
            &w,
            dil,
            &mut o,
        );
        out.push((format!("ple_conv/C{c}K{kk}D{dil}/T{t}"), read(be, &mut o)));
        let state = rec.ple.take().unwrap().conv;
        out.push((format!("ple_conv_state/C{c}K{kk}D{dil}/T{t}"), state));
    }
    // Embedding rows side by side (hyper-connection copies, PLE n-gram rows).
    let table = weights(&mut rng, GgmlType::IQ4_NL, 40, 64);
    let m = Matrix {
        ty: GgmlType::IQ4_NL,
        rows: 40,
        cols: 64,
        data: &table,
    };
    let mut x = Buf::<B>::default();
    be.embed_rows(&m, &[3, 39, 0, 3, 7, 7], 3, &mut x).unwrap();
    out.push(("embed_rows/IQ4_NL".into(), read(be, &mut x)));
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
        let k_norm = rng.vec(di, 1.0);
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
                k_norm: &k_norm,
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
    let (dt, a) = (rng.vec(nv, 1.0), rng.vec(nv, 1.0));
    let (mut beta, mut decay) = (Buf::<B>::default(), Buf::<B>::default());
    be.delta_gates(&ba, &dt, &a, nk, &mut beta, &mut decay);
    out.push(("delta_gates/beta".into(), read(be, &mut beta)));
    out.push(("delta_gates/log_decay".into(), read(be, &mut decay)));
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
        data: &table,
    };
    let mut x = Buf::<B>::default();
    be.embed(&m, 0.5, &[3, 49, 0, 3], &mut x).unwrap();
    out.push(("embed/Q4_K".into(), read(be, &mut x)));
    // Routed experts: two weight types, decode and a batch.
    for (ty, down_ty) in [
        (GgmlType::Q4_K, GgmlType::Q6_K),
        (GgmlType::IQ4_XS, GgmlType::Q8_0),
    ] {
        let (ne, k, d, ff) = (8, 2, 256, 512);
        let leak = |b: Vec<u8>| -> &'static [u8] { Box::leak(b.into_boxed_slice()) };
        let mat = |data: &'static [u8], ty, rows, cols| Matrix {
            ty,
            rows,
            cols,
            data,
        };
        let router = leak(weights(&mut rng, GgmlType::F32, ne, d));
        let gate = leak(weights(&mut rng, ty, ne * ff, d));
        let up = leak(weights(&mut rng, ty, ne * ff, d));
        let down = leak(weights(&mut rng, down_ty, ne * d, ff));
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
            be.moe(&m, &mut x, &mut o, &mut scratch).unwrap();
            out.push((format!("moe/{ty}+{down_ty}/T{t}"), read(be, &mut o)));
        }
    }
    out
}

/// The op of a case name, and the largest difference allowed relative to the reference's
/// largest magnitude in that case.
fn tolerance(case: &str) -> (&str, f32) {
    if case.starts_with("matmul/BF16") {
        // AVX512-BF16 adds the pair products of `vdpbf16ps` in its own order.
        return ("matmul/BF16", 1e-4);
    }
    let op = case.split('/').next().unwrap();
    let tol = match op {
        // Integer block sums are exact; only the f32 order of adding the blocks differs.
        "matmul" | "moe" => 1e-5,
        // Same float operations in the same order on every path, by construction.
        _ => 0.0,
    };
    (op, tol)
}

fn write_outputs(path: &str, outs: &[(String, Vec<f32>)]) {
    let mut f = std::fs::File::create(path).unwrap();
    for (name, v) in outs {
        f.write_all(&(name.len() as u32).to_le_bytes()).unwrap();
        f.write_all(name.as_bytes()).unwrap();
        f.write_all(&(v.len() as u32).to_le_bytes()).unwrap();
        for x in v {
            f.write_all(&x.to_le_bytes()).unwrap();
        }
    }
}

fn read_outputs(path: &PathBuf) -> BTreeMap<String, Vec<f32>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    let mut at = 0;
    let u32_at = |at: &mut usize| {
        let v = u32::from_le_bytes(bytes[*at..*at + 4].try_into().unwrap());
        *at += 4;
        v as usize
    };
    let mut out = BTreeMap::new();
    while at < bytes.len() {
        let n = u32_at(&mut at);
        let name = String::from_utf8(bytes[at..at + n].to_vec()).unwrap();
        at += n;
        let len = u32_at(&mut at);
        let v = bytes[at..at + 4 * len]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        at += 4 * len;
        out.insert(name, v);
    }
    out
}

/// Runs [`cases`] on `isa` in a child process and reads its outputs.
fn outputs_on(isa: Isa) -> BTreeMap<String, Vec<f32>> {
    let path = std::env::temp_dir().join(format!(
        "strata-conformance-{}-{}.bin",
        std::process::id(),
        isa.name()
    ));
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "every_op_matches_the_reference_backend",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD_ENV, &path)
        .env(strata_quant::ISA_ENV, isa.name())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the {} backend failed:\n{}",
        isa.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    let outs = read_outputs(&path);
    let _ = std::fs::remove_file(&path);
    outs
}

#[test]
fn every_op_matches_the_reference_backend() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        let pool = strata_engine::pool::Pool::new(Default::default());
        return write_outputs(&path, &cases(&Cpu::new(&pool)));
    }
    let reference = outputs_on(Isa::Scalar);
    assert!(reference.len() > 100, "{} cases", reference.len());
    for (name, v) in &reference {
        assert!(
            v.iter().all(|x| x.is_finite()),
            "{name}: non-finite reference output"
        );
    }
    let mut failures = Vec::new();
    let mut not_run = Vec::new();
    for isa in Isa::ALL.into_iter().filter(|i| *i != Isa::Scalar) {
        if !isa.is_available() {
            not_run.push(isa.name());
            continue;
        }
        let got = outputs_on(isa);
        // op → (cases, worst relative difference, tolerance)
        let mut per_op: BTreeMap<&str, (usize, f32, f32)> = BTreeMap::new();
        for (name, want) in &reference {
            let (op, tol) = tolerance(name);
            let have = &got[name];
            let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-30);
            let worst = want
                .iter()
                .zip(have)
                .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()))
                / scale;
            let e = per_op.entry(op).or_insert((0, 0.0, tol));
            e.0 += 1;
            e.1 = e.1.max(worst);
            if worst.is_nan() || worst > tol || have.len() != want.len() {
                failures.push(format!(
                    "{} {name}: relative difference {worst:.2e} > {tol:.0e}",
                    isa.name()
                ));
            }
        }
        for (op, (n, worst, tol)) in per_op {
            println!(
                "conformance {:>8} vs scalar  {op:<16} {n:>4} cases  max rel diff {worst:.2e}  (tolerance {tol:.0e})",
                isa.name()
            );
        }
    }
    println!(
        "conformance: not run (this CPU lacks them): {}",
        not_run.join(", ")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
