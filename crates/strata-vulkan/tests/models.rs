//! Whole models on the Vulkan backend against the CPU backend: the tiny random models of
//! scripts/make_tiny_models.sh (dense, qwen3moe with routed experts, qwen3next with Gated
//! DeltaNet layers, qwen4exp with hyper-connections, QSA and PLE) and SmolLM2-135M. Teacher-forced: the top-1 token agrees
//! at ≥ 99 % of the positions where the CPU's top-2 margin is ≥ 0.5; greedy: the tokens are
//! identical up to the first near-tie (a CPU margin < 0.5). Lavapipe is ~60× slower than a
//! CPU core, so the sequences are short. Partial offload (the last layers on the device, the
//! embedding and the first layers on the CPU, `-ngl N`) is held to the same bounds, and a
//! memory budget places only the layers it holds.

mod common;

use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;

use strata_engine::backend::OnDevice;
use strata_engine::{KvType, Model, SeqInput, SeqOutput, Want};
use strata_vulkan::offload::offload;
use strata_vulkan::{Device, Vulkan};

/// Logit margin below which two tokens count as tied.
const NEAR_TIE: f32 = 0.5;

fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// `path`, or `None` (skipped; a failure with `CI=true`) when it is missing.
fn require(path: PathBuf, how: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let msg = format!("{} is missing: {how}", path.display());
    assert!(!ci(), "{msg}");
    eprintln!("skipped: {msg}");
    None
}

fn home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
}

fn tiny(name: &str, ty: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("STRATA_TINY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache/strata/tiny"));
    require(
        dir.join(name).join(format!("{name}-{ty}.gguf")),
        "run scripts/make_tiny_models.sh",
    )
}

fn smollm2() -> Option<PathBuf> {
    let dir = std::env::var_os("STRATA_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache/strata/models"));
    require(
        dir.join("SmolLM2-135M-Instruct.Q4_1.gguf"),
        "run `strata pull smollm2-135m`",
    )
}

/// (argmax, top-1 − top-2) of a logit row.
fn top(row: &[f32]) -> (usize, f32) {
    let (mut i1, mut v1, mut v2) = (0, f32::NEG_INFINITY, f32::NEG_INFINITY);
    for (i, &v) in row.iter().enumerate() {
        if v > v1 {
            (v2, v1, i1) = (v1, v, i);
        } else if v > v2 {
            v2 = v;
        }
    }
    (i1, v1 - v2)
}

/// Runs `m` on `dev`: every layer, the embedding and the LM head (`last` = `None`, as
/// `-ngl 99`), or its last `last` layers and the LM head through [`offload`] without a
/// budget limit (`-ngl N`), checking that exactly those layers are placed.
fn place(m: &mut Model, dev: &Device, last: Option<usize>) {
    let vk = Vulkan::on(dev);
    let Some(n) = last else {
        vk.preload(&m.graph().device_matrices())
            .expect("weights on the device");
        m.set_device(Box::new(OnDevice::new(vk)));
        return;
    };
    let n_layer = m.config().n_layer;
    let done = offload(m, vk, n, u64::MAX, (256, KvType::F16))
        .expect("weights on the device")
        .expect("layers placed");
    assert_eq!(done.plan.layers, n_layer - n..n_layer);
    assert_eq!(m.device_layers(), n_layer - n..n_layer);
}

/// Loads `path` on the CPU and on the Vulkan device (its `last` layers, or all: [`place`]);
/// compares teacher-forced top-1 over `text` and `n_greedy` greedy tokens after its first
/// `prompt` tokens. Returns the teacher-forced max |Δlogit| / max |logit| (0 when skipped for
/// want of a device).
fn compare_on(
    path: PathBuf,
    last: Option<usize>,
    text: &str,
    prompt: usize,
    n_greedy: usize,
) -> f32 {
    let Some(dev) = common::device() else {
        return 0.0;
    };
    let t0 = Instant::now();
    let cpu = Model::load(&path).expect("load (cpu)");
    let mut gpu = Model::load(&path).expect("load (vulkan)");
    place(&mut gpu, &dev, last);
    let n_vocab = cpu.config().n_vocab;
    let mut tokens = cpu.tokenizer().encode(text, true, false);
    tokens.truncate(24);
    assert!(tokens.len() > prompt, "{} tokens", tokens.len());

    // Teacher-forced.
    let (mut want, mut got) = (Vec::new(), Vec::new());
    let mut s = cpu.new_session(256, KvType::F16);
    cpu.forward_all(&mut s, &tokens, &mut want)
        .expect("cpu forward");
    let mut s = gpu.new_session(256, KvType::F16);
    gpu.forward_all(&mut s, &tokens, &mut got)
        .expect("vulkan forward");
    let (mut clear, mut agree) = (0, 0);
    for (w, g) in want.chunks(n_vocab).zip(got.chunks(n_vocab)) {
        let (wi, margin) = top(w);
        if margin >= NEAR_TIE {
            clear += 1;
            agree += usize::from(top(g).0 == wi);
        }
    }
    let rel = common::rel_err(&got, &want);

    // Greedy on the CPU, one token a step after the prompt; the device decodes the same
    // tokens (the decode path, the KV mirror appending) and its top-1 is compared at every
    // step: identical up to the first near-tie, and at every clear step after it.
    let mut sc = cpu.new_session(256, KvType::F16);
    let mut sg = gpu.new_session(256, KvType::F16);
    let mut lc = cpu
        .forward(&mut sc, &tokens[..prompt])
        .expect("prompt")
        .to_vec();
    let mut lg = gpu
        .forward(&mut sg, &tokens[..prompt])
        .expect("prompt")
        .to_vec();
    let (mut same, mut tied, mut steps_clear, mut steps_agree) = (0, false, 0, 0);
    for _ in 0..n_greedy {
        let (t, margin) = top(&lc);
        let g = top(&lg).0;
        if margin >= NEAR_TIE {
            steps_clear += 1;
            steps_agree += usize::from(g == t);
        }
        if !tied {
            assert!(
                g == t || margin < NEAR_TIE,
                "{}: greedy token {same} differs ({g} on vulkan, {t} on the cpu, margin {margin})",
                path.display()
            );
            tied = margin < NEAR_TIE || g != t;
            same += usize::from(g == t);
        }
        lc = cpu.forward(&mut sc, &[t as u32]).expect("decode").to_vec();
        lg = gpu.forward(&mut sg, &[t as u32]).expect("decode").to_vec();
    }
    assert_eq!(steps_agree, steps_clear, "decode top-1 on clear steps");
    eprintln!(
        "{} on layers {:?}: teacher-forced top-1 {agree}/{clear} clear positions (of {}), max|Δlogit|/max|logit| {rel:.2e}; greedy: {same} identical before the first near-tie, decode top-1 {steps_agree}/{steps_clear} clear steps of {n_greedy}; {:.1} s",
        path.file_name().unwrap_or_default().to_string_lossy(),
        gpu.device_layers(),
        want.len() / n_vocab,
        t0.elapsed().as_secs_f64()
    );
    assert!(
        agree * 100 >= clear * 99,
        "top-1 agreement {agree}/{clear} is under 99 %"
    );
    rel
}

/// [`compare_on`] with every layer on the device.
fn compare(path: PathBuf, text: &str, prompt: usize, n_greedy: usize) -> f32 {
    compare_on(path, None, text, prompt, n_greedy)
}

const TEXT: &str = "The quick brown fox jumps over the lazy dog. Once upon a time, in a small \
    village by the sea, there lived an old fisherman who told stories every evening.";

#[test]
fn llama_tiny_matches_cpu() {
    if let Some(p) = tiny("llama-tiny", "Q8_0") {
        compare(p, TEXT, 6, 16);
    }
}

#[test]
fn qwen2_tiny_matches_cpu() {
    if let Some(p) = tiny("qwen2-tiny", "Q4_K_M") {
        compare(p, TEXT, 6, 16);
    }
}

#[test]
fn qwen3_tiny_matches_cpu() {
    if let Some(p) = tiny("qwen3-tiny", "Q8_0") {
        compare(p, TEXT, 6, 16);
    }
}

#[test]
fn gemma3_tiny_matches_cpu() {
    if let Some(p) = tiny("gemma3-tiny", "F16") {
        compare(p, TEXT, 6, 16);
    }
}

/// Routed experts on the device: router logits read back and routed on the host, each chosen
/// expert's row range of the whole expert tensors multiplied on the device. In F32 neither
/// side quantizes activations, so the logits must also agree closely (measured 4.5e-5: the
/// order of f32 sums), which a wrong routing or combining could not.
#[test]
fn qwen3moe_tiny_matches_cpu() {
    if let Some(p) = tiny("qwen3moe-tiny", "Q4_K_M") {
        compare(p, TEXT, 6, 16);
    }
    if let Some(p) = tiny("qwen3moe-tiny", "F32") {
        let rel = compare(p, TEXT, 6, 16);
        assert!(rel < 1e-3, "F32 logits differ by {rel:.2e} (relative)");
    }
}

/// Qwen3-Next: Gated DeltaNet layers (conv1d and delta-rule state uploaded and read back per
/// op), gated attention, routed experts and the gated shared expert, all on the device. In
/// F32 the logits must also agree closely, which a wrong recurrence or state could not.
#[test]
fn qwen3next_tiny_matches_cpu() {
    if let Some(p) = tiny("qwen3next-tiny", "Q4_K_M") {
        compare(p, TEXT, 6, 16);
    }
    if let Some(p) = tiny("qwen3next-tiny", "F32") {
        let rel = compare(p, TEXT, 6, 16);
        assert!(rel < 1e-3, "F32 logits differ by {rel:.2e} (relative)");
    }
}

/// qwen4exp: hyper-connections (4 residual streams), Gated DeltaNet layers, gated attention
/// with QSA (budget 16 tokens in blocks of 4: positions from 19 on attend over their kept
/// blocks, chosen on the host as the CPU chooses them), PLE with its n-gram table, routed
/// and shared experts, all on the device. 24 greedy steps reach position 29. In F32 the
/// logits must also agree closely, which a wrong selection, gate or stream could not.
#[test]
fn qwen4exp_tiny_matches_cpu() {
    if let Some(p) = tiny("qwen4exp-tiny", "Q4_K_M") {
        compare(p, TEXT, 6, 24);
    }
    if let Some(p) = tiny("qwen4exp-tiny", "F32") {
        let rel = compare(p, TEXT, 6, 24);
        assert!(rel < 1e-3, "F32 logits differ by {rel:.2e} (relative)");
    }
}

/// qwen4exp without PLE, and without the QSA indexer (dense attention on every query).
#[test]
fn qwen4exp_tiny_variants_match_cpu() {
    for name in ["qwen4exp-tiny-nople", "qwen4exp-tiny-noidx"] {
        if let Some(p) = tiny(name, "F32") {
            let rel = compare(p, TEXT, 6, 24);
            assert!(
                rel < 1e-3,
                "{name} F32 logits differ by {rel:.2e} (relative)"
            );
        }
    }
}

#[test]
fn smollm2_135m_matches_cpu() {
    if let Some(p) = smollm2() {
        compare(p, TEXT, 6, 16);
    }
}

/// Snapshots, restores and truncation on the device give the logits of a fresh run, bit for
/// bit, for the model at `path`: the KV mirror follows the host cache (a restore renews the
/// layer's id; a truncated session writes its positions again), and a recurrent model's state
/// is the host's (uploaded and read back by every recurrent op).
fn restore_and_truncate_match_a_fresh_run(path: PathBuf, last: Option<usize>) {
    let Some(dev) = common::device() else { return };
    let mut m = Model::load(&path).expect("load");
    place(&mut m, &dev, last);
    let tokens = m.tokenizer().encode(TEXT, true, false);
    let (a, b) = (&tokens[..10], &tokens[10..16]);
    let fresh = |m: &Model| {
        let mut s = m.new_session(256, KvType::F16);
        m.forward(&mut s, a).expect("a");
        m.forward(&mut s, b).expect("b").to_vec()
    };
    let want = fresh(&m);

    let mut s = m.new_session(256, KvType::F16);
    m.forward(&mut s, a).expect("a");
    let snap = s.snapshot();
    m.forward(&mut s, &tokens[20..24]).expect("other tokens");
    s.restore(&snap).expect("restore");
    assert_eq!(m.forward(&mut s, b).expect("b after restore"), &want[..]);

    // A new session restored from the snapshot: its mirror starts behind, filled from the host.
    let mut s2 = m.new_session(256, KvType::F16);
    s2.restore(&snap).expect("restore into a new session");
    assert_eq!(
        m.forward(&mut s2, b).expect("b in a new session"),
        &want[..]
    );

    // A recurrent model goes back to its checkpoint at 10 (the end of a multi-token call).
    s.truncate(10);
    assert_eq!(s.pos(), 10);
    assert_eq!(m.forward(&mut s, b).expect("b after truncate"), &want[..]);
}

#[test]
fn device_kv_follows_restore_and_truncate() {
    if let Some(p) = tiny("qwen3-tiny", "Q8_0") {
        restore_and_truncate_match_a_fresh_run(p, None);
    }
}

/// The recurrent state (conv history and delta-rule matrices) and the KV of the gated
/// attention layers through snapshots, restores and truncation on the device.
#[test]
fn device_recurrent_state_follows_restore_and_truncate() {
    if let Some(p) = tiny("qwen3next-tiny", "Q8_0") {
        restore_and_truncate_match_a_fresh_run(p, None);
    }
}

/// Two sequences in one run (each attending over its own device KV mirror, each continuing
/// its own recurrent state) give the logits of each fed alone, bit for bit, for the model at
/// `path`: the tokens `a` and `b` of the text.
fn batched_sequences_match_each_alone(
    path: PathBuf,
    last: Option<usize>,
    (a, b): (Range<usize>, Range<usize>),
) {
    let Some(dev) = common::device() else { return };
    let mut m = Model::load(&path).expect("load");
    place(&mut m, &dev, last);
    let tokens = m.tokenizer().encode(TEXT, true, false);
    let (a, b) = (&tokens[a], &tokens[b]);
    let alone = |t: &[u32]| {
        let mut s = m.new_session(256, KvType::F16);
        m.forward(&mut s, t).expect("alone").to_vec()
    };
    let (want_a, want_b) = (alone(a), alone(b));
    let (mut sa, mut sb) = (
        m.new_session(256, KvType::F16),
        m.new_session(256, KvType::F16),
    );
    let mut batch = [
        SeqInput {
            session: &mut sa,
            tokens: a,
            want: Want::Last,
            hidden: false,
        },
        SeqInput {
            session: &mut sb,
            tokens: b,
            want: Want::Last,
            hidden: false,
        },
    ];
    let mut out = [SeqOutput::default(), SeqOutput::default()];
    m.forward_batch(&mut batch, &mut out).expect("batch");
    let rel_a = common::rel_err(&out[0].logits, &want_a);
    let rel_b = common::rel_err(&out[1].logits, &want_b);
    assert!(out[0].logits == want_a, "a batched vs alone: {rel_a:.2e}");
    assert!(out[1].logits == want_b, "b batched vs alone: {rel_b:.2e}");
}

/// A prompt fed in one run and the same prompt fed as a run of all but its last token and then
/// that token alone (what a prompt-cache hit does) give the same last logits, bit for bit, on
/// the device: a kernel's sums for a token may not depend on how many tokens share its run.
fn prefill_matches_token_by_token(path: PathBuf) {
    let Some(dev) = common::device() else { return };
    let mut m = Model::load(&path).expect("load");
    place(&mut m, &dev, None);
    let tokens = m.tokenizer().encode(TEXT, true, false);
    let n = 20.min(tokens.len());
    let mut whole = m.new_session(256, KvType::F16);
    let want = m.forward(&mut whole, &tokens[..n]).expect("whole").to_vec();
    for split in [n - 1, 9, 1] {
        let mut s = m.new_session(256, KvType::F16);
        m.forward(&mut s, &tokens[..split]).expect("head");
        let mut got = Vec::new();
        for t in &tokens[split..n] {
            got = m
                .forward(&mut s, std::slice::from_ref(t))
                .expect("one")
                .to_vec();
        }
        let rel = common::rel_err(&got, &want);
        assert!(
            got == want,
            "{n} tokens at once vs {split} then one at a time: {rel:.2e}"
        );
    }
}

#[test]
fn dense_prefill_matches_token_by_token_on_the_device() {
    if let Some(p) = tiny("qwen3-tiny", "Q8_0") {
        prefill_matches_token_by_token(p);
    }
}

#[test]
fn recurrent_prefill_matches_token_by_token_on_the_device() {
    if let Some(p) = tiny("qwen3next-tiny", "Q8_0") {
        prefill_matches_token_by_token(p);
    }
}

#[test]
fn sequences_batched_on_the_device_match_each_alone() {
    if let Some(p) = tiny("llama-tiny", "Q8_0") {
        batched_sequences_match_each_alone(p, None, (0..7, 7..19));
    }
}

/// The second sequence's rows start at row 7 of the run: its conv1d and delta rule read its
/// own rows and continue its own state.
#[test]
fn recurrent_sequences_batched_on_the_device_match_each_alone() {
    if let Some(p) = tiny("qwen3next-tiny", "Q8_0") {
        batched_sequences_match_each_alone(p, None, (0..7, 7..19));
    }
}

/// qwen4exp: two sequences of 21 tokens, so each one's last two positions (19, 20) are past
/// QSA's budget: the second sequence's sparse queries start at row 40 of the run and keep
/// the blocks of its own cache; its PLE convolution and DeltaNet layers continue its own state.
#[test]
fn qwen4exp_sequences_batched_on_the_device_match_each_alone() {
    if let Some(p) = tiny("qwen4exp-tiny", "Q8_0") {
        batched_sequences_match_each_alone(p, None, (0..21, 3..24));
    }
}

/// Partial offload of a dense model: the embedding and the first half of the layers on the
/// CPU, the residual handed to the device, the last half and the LM head there.
#[test]
fn dense_last_half_on_device_matches_cpu() {
    if let Some(p) = tiny("llama-tiny", "Q8_0") {
        compare_on(p, Some(2), TEXT, 6, 16);
    }
    if let Some(p) = smollm2() {
        compare_on(p, Some(15), TEXT, 6, 16);
    }
}

/// qwen3moe with its last two layers (routed experts) on the device; F32 logits close.
#[test]
fn qwen3moe_last_half_on_device_matches_cpu() {
    if let Some(p) = tiny("qwen3moe-tiny", "F32") {
        let rel = compare_on(p, Some(2), TEXT, 6, 16);
        assert!(rel < 1e-3, "F32 logits differ by {rel:.2e} (relative)");
    }
}

/// qwen3next with layer 0 (Gated DeltaNet) on the CPU and layers 1..4 (two DeltaNet layers,
/// whose recurrent states are the session's second and third, and the attention layer) on
/// the device.
#[test]
fn qwen3next_last_layers_on_device_match_cpu() {
    if let Some(p) = tiny("qwen3next-tiny", "F32") {
        let rel = compare_on(p, Some(3), TEXT, 6, 16);
        assert!(rel < 1e-3, "F32 logits differ by {rel:.2e} (relative)");
    }
}

/// qwen4exp (4 hyper-connection streams handed over whole): its last two layers (the PLE
/// layer 2, which reads the run's tokens on the device, and the QSA attention layer) on the
/// device; then only the attention layer, PLE running on the CPU. 24 greedy steps reach
/// QSA's sparse positions.
#[test]
fn qwen4exp_last_layers_on_device_match_cpu() {
    for last in [2, 1] {
        if let Some(p) = tiny("qwen4exp-tiny", "F32") {
            let rel = compare_on(p, Some(last), TEXT, 6, 24);
            assert!(
                rel < 1e-3,
                "last {last}: F32 logits differ by {rel:.2e} (relative)"
            );
        }
    }
}

/// Snapshots, restores, truncation and batched sequences with the first layers on the CPU
/// and the last on the device: each side's KV and recurrent state stay the session's.
#[test]
fn partial_offload_follows_restore_truncate_and_batches() {
    if let Some(p) = tiny("qwen3-tiny", "Q8_0") {
        restore_and_truncate_match_a_fresh_run(p, Some(2));
    }
    if let Some(p) = tiny("qwen3next-tiny", "Q8_0") {
        restore_and_truncate_match_a_fresh_run(p.clone(), Some(2));
        batched_sequences_match_each_alone(p, Some(2), (0..7, 7..19));
    }
    if let Some(p) = tiny("qwen4exp-tiny", "Q8_0") {
        batched_sequences_match_each_alone(p, Some(2), (0..21, 3..24));
    }
}

/// A budget that holds the LM head and the last two layers places exactly those (and the
/// weights uploaded fit it); a budget below the LM head and one layer leaves the model on
/// the CPU, unchanged.
#[test]
fn vram_budget_places_only_the_layers_it_holds() {
    let Some(dev) = common::device() else { return };
    let Some(p) = tiny("qwen3moe-tiny", "F32") else {
        return;
    };
    let mut m = Model::load(&p).expect("load");
    let n_layer = m.config().n_layer;
    let n_ctx = 128;
    // What every layer count costs: the plan with no limit on the last k layers.
    let cost = |m: &Model, k: usize| {
        let p =
            strata_engine::offload::plan(m.graph(), m.config(), k, u64::MAX, (n_ctx, KvType::F16));
        p.weight_bytes + p.kv_bytes
    };
    let (one, two, three) = (cost(&m, 1), cost(&m, 2), cost(&m, 3));
    assert!(one < two && two < three, "{one} {two} {three}");

    let none =
        offload(&mut m, Vulkan::on(&dev), 99, one - 1, (n_ctx, KvType::F16)).expect("offload");
    assert!(none.is_none(), "nothing fits under {} bytes", one - 1);
    assert!(m.device().is_none() && m.device_layers().is_empty());

    let budget = (two + three) / 2;
    let done = offload(&mut m, Vulkan::on(&dev), 99, budget, (n_ctx, KvType::F16))
        .expect("offload")
        .expect("two layers fit");
    assert_eq!(done.plan.layers, n_layer - 2..n_layer);
    assert_eq!(done.plan.wanted, n_layer);
    assert!(done.weight_bytes <= budget && done.plan.weight_bytes == done.weight_bytes);
    assert_eq!(m.device_layers(), n_layer - 2..n_layer);

    // And that placement runs: the logits of a prompt match the CPU's.
    let cpu = Model::load(&p).expect("load (cpu)");
    let tokens = cpu.tokenizer().encode(TEXT, true, false);
    let mut s = cpu.new_session(n_ctx, KvType::F16);
    let want = cpu.forward(&mut s, &tokens[..8]).expect("cpu").to_vec();
    let mut s = m.new_session(n_ctx, KvType::F16);
    let got = m.forward(&mut s, &tokens[..8]).expect("vulkan").to_vec();
    let rel = common::rel_err(&got, &want);
    assert!(rel < 1e-3, "F32 logits differ by {rel:.2e} (relative)");
}
