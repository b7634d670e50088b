//! Sequence state: the KV cache takes memory as tokens are fed (a 262,144-token session of the
//! tiny Qwen3-Next costs what its tokens need), truncating a recurrent model goes back to its
//! latest checkpoint and re-feeding reproduces the logits bit for bit, snapshots refuse another
//! model's session, and a batched forward returns exactly the rows and hidden states asked for.

mod common;

use common::tiny::tiny_dir;
use common::*;
use strata_engine::session::RECURRENT_CHECKPOINTS;
use strata_engine::{EngineError, KvType, Model, SeqInput, SeqOutput, Want};

fn tiny_qwen3next() -> Model {
    let path = tiny_dir().join("qwen3next-tiny/qwen3next-tiny-F32.gguf");
    assert!(
        path.exists(),
        "{} is missing: run scripts/make_tiny_models.sh (or .ci/run) first",
        path.display()
    );
    Model::load(&path).unwrap()
}

fn text_tokens(model: &Model, n: usize) -> Vec<u32> {
    let text = std::fs::read_to_string(repo_root().join("tests/data/reference_text.txt")).unwrap();
    let mut t = model.tokenizer().encode(&text, true, false);
    assert!(t.len() >= n, "reference text is too short");
    t.truncate(n);
    t
}

/// Resident memory of this process, bytes (`/proc/self/statm`).
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Runs in a child process of its own: RSS is per process, and the other tests of this file
/// load models at the same time.
#[test]
fn a_262144_token_session_costs_memory_for_its_tokens_only() {
    const CHILD: &str = "STRATA_SESSION_STATE_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let name = "a_262144_token_session_costs_memory_for_its_tokens_only";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
        eprintln!("{text}");
        return;
    }
    let model = tiny_qwen3next();
    let cfg = model.config();
    let n_ctx = 262_144;
    let full_kv = 2 * cfg.n_attn_layers() * n_ctx * cfg.kv_row() * 2;
    let before = rss_bytes();
    let mut s = model.new_session(n_ctx, KvType::F16);
    assert_eq!(s.n_ctx(), n_ctx);
    assert_eq!(s.kv.size_bytes(), 0, "no KV page before the first token");
    let tokens = text_tokens(&model, 300);
    model.forward(&mut s, &tokens).unwrap();
    // 300 positions: two pages of 256 per K and V of each attention layer.
    let two_pages = 2 * cfg.n_attn_layers() * 2 * 256 * cfg.kv_row() * 2;
    assert_eq!(s.kv.size_bytes(), two_pages);
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < full_kv / 4,
        "RSS grew by {grown} bytes for 300 tokens; the whole context's KV would be {full_kv}"
    );
    eprintln!(
        "262,144-token session after 300 tokens: KV {} bytes, session {} bytes, RSS +{grown} \
         (whole-context KV: {full_kv})",
        s.kv.size_bytes(),
        s.size_bytes()
    );
}

#[test]
fn truncating_a_recurrent_model_restores_its_latest_checkpoint() {
    let model = tiny_qwen3next();
    let toks = text_tokens(&model, 120);
    let fresh = |n: usize| {
        let mut s = model.new_session(256, KvType::F32);
        bits(model.forward(&mut s, &toks[..n]).unwrap())
    };
    let mut s = model.new_session(256, KvType::F32);
    model.forward(&mut s, &toks[..40]).unwrap();
    model.forward(&mut s, &toks[40..60]).unwrap();
    for t in &toks[60..70] {
        model.forward(&mut s, &[*t]).unwrap();
    }
    // Multi-token calls end with a checkpoint; single decode steps add none before 256.
    assert_eq!(s.checkpoint_positions(), vec![40, 60]);
    s.truncate(70);
    assert_eq!(s.pos(), 70, "truncating at pos is a no-op");
    s.truncate(55);
    assert_eq!(s.pos(), 40, "back to the checkpoint at or below 55");
    assert_eq!(s.tokens(), &toks[..40]);
    let got = bits(model.forward(&mut s, &toks[40..55]).unwrap());
    assert_eq!(got, fresh(55), "re-fed logits differ from a fresh session");
    // Below every checkpoint: back to the start.
    s.truncate(30);
    assert_eq!(s.pos(), 0);
    let got = bits(model.forward(&mut s, &toks[..30]).unwrap());
    assert_eq!(got, fresh(30));
    // The number of checkpoints stays bounded.
    for i in 0..2 * RECURRENT_CHECKPOINTS {
        let at = s.pos();
        model.forward(&mut s, &toks[at..at + 2]).unwrap();
        assert!(
            s.checkpoint_positions().len() <= RECURRENT_CHECKPOINTS,
            "{i}"
        );
    }
}

#[test]
fn restoring_a_snapshot_of_another_model_is_an_error() {
    let next = tiny_qwen3next();
    let smol = Model::load(&model_path("smollm2-135m")).unwrap();
    let mut a = next.new_session(64, KvType::F16);
    next.forward(&mut a, &[1, 2, 3]).unwrap();
    let mut b = smol.new_session(64, KvType::F16);
    assert!(matches!(
        b.restore(&a.snapshot()),
        Err(EngineError::CheckpointMismatch)
    ));
    let mut c = next.new_session(64, KvType::F32);
    assert!(matches!(
        c.restore(&a.snapshot()),
        Err(EngineError::CheckpointMismatch)
    ));
    let mut d = next.new_session(2, KvType::F16);
    assert!(matches!(
        d.restore(&a.snapshot()),
        Err(EngineError::ContextFull { .. })
    ));
}

#[test]
fn forward_batch_returns_the_rows_and_hidden_states_asked_for() {
    let model = Model::load(&model_path("smollm2-135m")).unwrap();
    let (nv, d) = (model.config().n_vocab, model.config().n_embd);
    let toks = text_tokens(&model, 60);
    let mut all = Vec::new();
    let mut s0 = model.new_session(128, KvType::F16);
    model.forward_all(&mut s0, &toks, &mut all).unwrap();

    let (mut s1, mut s2, mut s3) = (
        model.new_session(128, KvType::F16),
        model.new_session(128, KvType::F16),
        model.new_session(128, KvType::F16),
    );
    let rows = vec![0, 17, 59];
    let mut batch = [
        SeqInput {
            session: &mut s1,
            tokens: &toks,
            want: Want::Rows(rows.clone()),
            hidden: true,
        },
        SeqInput {
            session: &mut s2,
            tokens: &toks,
            want: Want::None,
            hidden: false,
        },
        SeqInput {
            session: &mut s3,
            tokens: &toks[..30],
            want: Want::Last,
            hidden: true,
        },
    ];
    let mut out = vec![SeqOutput::default(); 3];
    model.forward_batch(&mut batch, &mut out).unwrap();
    let want: Vec<f32> = rows
        .iter()
        .flat_map(|r| all[r * nv..(r + 1) * nv].to_vec())
        .collect();
    assert_eq!(bits(&out[0].logits), bits(&want));
    assert_eq!(out[0].hidden.len(), rows.len() * d);
    assert!(out[1].logits.is_empty() && out[1].hidden.is_empty());
    assert_eq!(bits(&out[2].logits), bits(&all[29 * nv..30 * nv]));
    assert_eq!(out[2].hidden.len(), d);
    // Hidden states are those of the same positions: row 29 of s3 equals row 29 of a
    // Rows([29]) call on a fresh session.
    let mut s4 = model.new_session(128, KvType::F16);
    let mut one = [SeqInput {
        session: &mut s4,
        tokens: &toks[..30],
        want: Want::Rows(vec![29]),
        hidden: true,
    }];
    let mut o4 = vec![SeqOutput::default()];
    model.forward_batch(&mut one, &mut o4).unwrap();
    assert_eq!(bits(&o4[0].hidden), bits(&out[2].hidden));
    assert_eq!(s1.pos(), 60);
    assert_eq!(s2.pos(), 60);
    assert_eq!(s3.pos(), 30);
    // Rows out of order are refused before anything runs.
    let mut s5 = model.new_session(128, KvType::F16);
    let mut bad = [SeqInput {
        session: &mut s5,
        tokens: &toks[..5],
        want: Want::Rows(vec![3, 1]),
        hidden: false,
    }];
    assert!(matches!(
        model.forward_batch(&mut bad, &mut o4),
        Err(EngineError::BadRows)
    ));
    assert_eq!(s5.pos(), 0);
}
