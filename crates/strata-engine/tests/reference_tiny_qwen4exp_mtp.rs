//! The qwen4exp MTP draft layer against the transformers-module reference of
//! scripts/make_tiny_qwen4exp.py (`mtp_draft_logits`, float32) on the tiny checkpoints'
//! `-mtp-` files (trunk + MTP layer as `blk.<n_layer>.*`, scripts/make_tiny_qwen4exp_mtp.py):
//! three variants (PLE + QSA, QSA only, PLE only), three prompts each (7; 20 with an EOS at 9;
//! 64 with an EOS at 40, past the QSA budget, so the MTP layer's QSA drops blocks too).
//!
//! Each prompt is teacher-forced through the trunk in one call, asking for every position's
//! hidden state (`SeqOutput::hidden`, the `hc·H` residual before the final mixer); then row
//! `p` of the draft takes hidden `p` and token `p + 1` at position `p`
//! ([`Model::mtp_draft`]) and is compared with `ref/promptI.mtp_logits.npy` (`[T−1][n_vocab]`).
//!
//! Bounds: F32 max |Δlogit| ≤ 2e-3 over every logit of every draft row, and the trunk's logits
//! on the `-mtp-` file within 1e-3 of `ref/promptI.logits.npy` (the MTP layer changes nothing
//! in the trunk). Q8_0: the same top-1 at every row whose reference top-2 margin exceeds 0.5.
//! The KV cache is f32.
//!
//! A missing file fails under CI (`CI=true`) and is reported "not run" elsewhere.

mod common;

use common::npy;
use common::qwen4exp::{gguf, require, variant_dir, VARIANTS};
use strata_engine::sampling::argmax_logits;
use strata_engine::{EngineError, KvType, Model, SeqInput, SeqOutput, Session, Want};

/// A reference row's top-1 counts only when its top-2 margin exceeds this.
const NEAR_TIE: f32 = 0.5;

/// One prompt of `ref/`: its tokens, transformers' trunk logits `[T][n_vocab]` and MTP draft
/// logits `[T−1][n_vocab]`.
struct Prompt {
    tokens: Vec<u32>,
    logits: Vec<f32>,
    mtp: Vec<f32>,
}

fn prompts(variant: &str, test: &str) -> Option<Vec<Prompt>> {
    let dir = variant_dir(variant).join("ref");
    let mut out = Vec::new();
    for i in 0..3 {
        let p = |what: &str| dir.join(format!("prompt{i}.{what}.npy"));
        let tokens: Vec<u32> = npy::i32s(&require(p("tokens"), test)?)
            .data
            .iter()
            .map(|t| *t as u32)
            .collect();
        let logits = npy::f32s(&require(p("logits"), test)?);
        let mtp = npy::f32s(&require(p("mtp_logits"), test)?);
        assert_eq!(logits.shape[0], tokens.len());
        assert_eq!(mtp.shape, [tokens.len() - 1, logits.shape[1]]);
        out.push(Prompt {
            tokens,
            logits: logits.data,
            mtp: mtp.data,
        });
    }
    Some(out)
}

fn top2_margin(row: &[f32]) -> f32 {
    let (mut a, mut b) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &x in row {
        if x > a {
            (a, b) = (x, a);
        } else if x > b {
            b = x;
        }
    }
    a - b
}

/// Max |Δ| over all values and the row (of `n`) where it is.
fn worst(ours: &[f32], want: &[f32], n: usize) -> (f32, usize) {
    assert_eq!(ours.len(), want.len());
    let mut w = (0.0f32, 0);
    for (r, (a, b)) in ours.chunks_exact(n).zip(want.chunks_exact(n)).enumerate() {
        let d = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        if d > w.0 {
            w = (d, r);
        }
    }
    w
}

/// The trunk over `tokens` in one call: every position's logits and hidden rows.
fn trunk(model: &Model, s: &mut Session, tokens: &[u32]) -> SeqOutput {
    let mut out = [SeqOutput::default()];
    let mut batch = [SeqInput {
        session: s,
        tokens,
        want: Want::All,
        hidden: true,
    }];
    model.forward_batch(&mut batch, &mut out).unwrap();
    let [o] = out;
    o
}

enum Bound {
    /// Max |Δlogit| of the draft rows.
    Logits(f32),
    /// Same top-1 at every clear reference row.
    Top1,
}

fn check(variant: &str, ty: &str, bound: Bound) {
    let test = format!("{variant} mtp-{ty}");
    let (Some(path), Some(prompts)) = (
        gguf(variant, &format!("mtp-{ty}"), &test),
        prompts(variant, &test),
    ) else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let cfg = model.config();
    assert_eq!(cfg.n_mtp, 1, "{test}: the MTP layer is loaded");
    // The MTP layer is a QSA layer in every variant (its ratio is entry n_layer of
    // compress_ratios); in -noidx the budget (4096) keeps every block of these prompts.
    let q = cfg.qsa.as_ref().expect("indexer keys");
    assert!(q.is_sparse(cfg.n_layer), "{test}: the MTP layer is QSA");
    eprintln!(
        "{test}: MTP ratio {}, budget {}",
        q.ratios[cfg.n_layer], q.budget
    );
    let (nv, width) = (cfg.n_vocab, cfg.residual_width());
    let (mut same, mut clear) = (0usize, 0usize);
    for (i, p) in prompts.iter().enumerate() {
        let mut s = model.new_session(256, KvType::F32);
        let t = p.tokens.len();
        let out = trunk(&model, &mut s, &p.tokens);
        assert_eq!(out.hidden.len(), t * width);
        let trunk_worst = worst(&out.logits, &p.logits, nv);
        let mut draft = SeqOutput::default();
        model
            .mtp_draft(
                &mut s,
                0,
                &out.hidden[..(t - 1) * width],
                &p.tokens[1..],
                &mut draft,
            )
            .unwrap();
        assert_eq!(draft.hidden.len(), (t - 1) * width);
        let w = worst(&draft.logits, &p.mtp, nv);
        for (ours, want) in draft.logits.chunks_exact(nv).zip(p.mtp.chunks_exact(nv)) {
            if top2_margin(want) > NEAR_TIE {
                clear += 1;
                same += usize::from(argmax_logits(ours) == argmax_logits(want));
            }
        }
        eprintln!(
            "{test} prompt{i} ({t} tokens): MTP max |Δlogit| {:.2e} (row {}), trunk {:.2e}",
            w.0, w.1, trunk_worst.0
        );
        if let Bound::Logits(tol) = bound {
            assert!(
                trunk_worst.0 <= 1e-3,
                "{test} prompt{i}: trunk {trunk_worst:?}"
            );
            assert!(
                w.0 <= tol,
                "{test} prompt{i}: draft row {} differs by {} (bound {tol})",
                w.1,
                w.0
            );
        }
    }
    eprintln!("{test}: same top-1 at {same}/{clear} clear draft rows");
    if let Bound::Top1 = bound {
        assert_eq!(same, clear, "{test}: top-1 differs");
    }
}

#[test]
fn mtp_draft_logits_match_reference_qwen4exp_f32() {
    for variant in VARIANTS {
        check(variant, "F32", Bound::Logits(2e-3));
    }
}

#[test]
fn mtp_draft_top1_matches_reference_qwen4exp_q8_0() {
    for variant in VARIANTS {
        check(variant, "Q8_0", Bound::Top1);
    }
}

/// Drafting the rows one call at a time (decode-style, continuing the MTP layer's own KV and
/// indexer keys) gives the logits of drafting them in one call, bit for bit; so does drafting
/// the rest after restoring a snapshot into a fresh session; the trunk of the `-mtp-` file
/// is the plain file's, bit for bit, and the plain file refuses to draft.
#[test]
fn mtp_draft_is_incremental_and_snapshots_qwen4exp() {
    let test = "mtp_draft_is_incremental_and_snapshots_qwen4exp";
    let variant = "qwen4exp-tiny";
    let (Some(path), Some(trunk_only), Some(prompts)) = (
        gguf(variant, "mtp-F32", test),
        gguf(variant, "F32", test),
        prompts(variant, test),
    ) else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let width = model.config().residual_width();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let toks = &prompts[2].tokens;
    let t = toks.len();
    let mut s = model.new_session(128, KvType::F32);
    let hidden = trunk(&model, &mut s, toks).hidden;
    let mut all = SeqOutput::default();
    model
        .mtp_draft(&mut s, 0, &hidden[..(t - 1) * width], &toks[1..], &mut all)
        .unwrap();

    let mut s2 = model.new_session(128, KvType::F32);
    trunk(&model, &mut s2, toks);
    let (mut logits, mut out_hidden) = (Vec::new(), Vec::new());
    let mut step = SeqOutput::default();
    let mut snap = None;
    for p in 0..t - 1 {
        let h = &hidden[p * width..(p + 1) * width];
        model
            .mtp_draft(&mut s2, p, h, &toks[p + 1..p + 2], &mut step)
            .unwrap();
        logits.extend_from_slice(&step.logits);
        out_hidden.extend_from_slice(&step.hidden);
        if p == 40 {
            snap = Some(s2.snapshot());
        }
    }
    assert_eq!(bits(&logits), bits(&all.logits), "one row at a time");
    assert_eq!(bits(&out_hidden), bits(&all.hidden), "output residuals");

    // A snapshot holds the MTP layer's KV of the positions below the session's position.
    let mut s3 = model.new_session(128, KvType::F32);
    s3.restore(&snap.unwrap()).unwrap();
    let mut rest = SeqOutput::default();
    model
        .mtp_draft(
            &mut s3,
            41,
            &hidden[41 * width..(t - 1) * width],
            &toks[42..],
            &mut rest,
        )
        .unwrap();
    let nv = model.config().n_vocab;
    assert_eq!(bits(&rest.logits), bits(&all.logits[41 * nv..]), "restored");

    let err = model.mtp_draft(&mut s3, 0, &hidden[..width - 1], &toks[1..2], &mut rest);
    assert!(matches!(err, Err(EngineError::BadHidden { .. })), "{err:?}");

    // The trunk of the -mtp- file is the plain file's, bit for bit; the plain file has no
    // MTP layer and refuses to draft.
    let plain = Model::load(&trunk_only).unwrap();
    assert_eq!(plain.config().n_mtp, 0);
    let mut s4 = plain.new_session(128, KvType::F32);
    let plain_out = trunk(&plain, &mut s4, toks);
    assert_eq!(
        bits(&plain_out.hidden),
        bits(&hidden),
        "trunk hidden states"
    );
    let err = plain.mtp_draft(&mut s4, 0, &hidden[..width], &toks[1..2], &mut rest);
    assert!(matches!(err, Err(EngineError::NoMtp)), "{err:?}");
}
