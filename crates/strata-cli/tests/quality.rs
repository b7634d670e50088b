//! `strata quality`: a model against itself scores 100 % / KL 0; two quantizations of a tiny
//! model give the KL that a direct computation predicts; SmolLM2 against llama.cpp (when
//! llama-cpp-python is installed) stays close.

mod common;

use std::path::{Path, PathBuf};

use common::tiny::{self, Weights, BOS, N_EMBD, N_VOCAB, RMS_EPS};
use common::{python_with_llama_cpp, run_strata, smollm2, temp_dir, text};
use serde_json::Value;
use strata_gguf::GgmlType;

/// Runs `strata quality ARGS --json FILE` and returns the JSON summary.
fn quality(dir: &Path, args: &[&str]) -> Value {
    let json = dir.join("quality.json");
    let mut all: Vec<&str> = vec!["quality"];
    all.extend_from_slice(args);
    let json_s = json.to_str().unwrap().to_string();
    all.extend(["--json", &json_s]);
    let out = run_strata(&all);
    assert!(
        out.status.success(),
        "strata quality failed:\n{}",
        text(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("same top token") && stdout.contains("perplexity"),
        "{stdout}"
    );
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

fn tiny_file(dir: &Path, name: &str, seed: u64, passthrough: bool, ty: GgmlType) -> PathBuf {
    let p = dir.join(name);
    Weights::new(seed, passthrough).write(&p, ty);
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn tiny_model_compared_with_itself_has_every_top_token_and_zero_kl() {
    let dir = temp_dir("q-self");
    let m = tiny_file(&dir, "tiny-q8_0.gguf", 7, false, GgmlType::Q8_0);
    let v = quality(
        &dir,
        &[
            "-m",
            s(&m),
            "--reference",
            s(&m),
            "--ctx",
            "128",
            "--chunks",
            "3",
        ],
    );
    let sum = &v["summary"];
    assert_eq!(sum["positions"], 3 * 63);
    assert_eq!(sum["same_top_pct"], 100.0);
    assert_eq!(sum["kl_max"], 0.0);
    assert_eq!(sum["ppl_ours"], sum["ppl_reference"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `output · (rms_norm(embd[t]) ⊙ g)` as the file stores it: embedding rows dequantized,
/// the head's activation quantized to its vec-dot type like the engine's matmul.
fn direct_logits(w: &Weights, ty: GgmlType, token: usize) -> Vec<f32> {
    let rb = ty.row_bytes(N_EMBD as u64).unwrap() as usize;
    let quant = |row: &[f32]| {
        let mut b = vec![0u8; rb];
        strata_quant::quantize(ty, row, &mut b).unwrap();
        b
    };
    let mut x = vec![0.0f32; N_EMBD];
    strata_quant::dequantize(
        ty,
        &quant(&w.token_embd[token * N_EMBD..][..N_EMBD]),
        &mut x,
    )
    .unwrap();
    let ms = x.iter().map(|v| v * v).sum::<f32>() / N_EMBD as f32;
    let inv = 1.0 / (ms + RMS_EPS).sqrt();
    let h: Vec<f32> = x
        .iter()
        .zip(&w.output_norm)
        .map(|(v, g)| v * inv * g)
        .collect();
    (0..N_VOCAB)
        .map(|r| {
            let row = quant(&w.output[r * N_EMBD..][..N_EMBD]);
            match strata_quant::vec_dot_type(ty) {
                Some(act) => {
                    let mut a = vec![0u8; act.row_bytes(N_EMBD as u64).unwrap() as usize];
                    strata_quant::quantize(act, &h, &mut a).unwrap();
                    strata_quant::vec_dot(ty, &row, &a).unwrap()
                }
                None => strata_quant::dot_f32(ty, &row, &h).unwrap(),
            }
        })
        .collect()
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
    let lse = max
        + row
            .iter()
            .map(|&v| (v as f64 - max).exp())
            .sum::<f64>()
            .ln();
    row.iter().map(|&v| v as f64 - lse).collect()
}

#[test]
fn q4_0_against_f32_gives_the_kl_of_a_direct_computation() {
    let dir = temp_dir("q-known");
    let seed = 11;
    let f32_path = tiny_file(&dir, "tiny-f32.gguf", seed, true, GgmlType::F32);
    let q4_path = tiny_file(&dir, "tiny-q4_0.gguf", seed, true, GgmlType::Q4_0);
    let text_path = dir.join("text.txt");
    let text =
        "The keeper trimmed the wick at dusk and wound the clockwork twice before midnight. \
                Fog rolled in from the sound; the horn answered every thirty seconds until dawn. ";
    std::fs::write(&text_path, text.repeat(4)).unwrap();
    let (ctx, chunks) = (128usize, 2usize);
    let v = quality(
        &dir,
        &[
            "-m",
            s(&q4_path),
            "--reference",
            s(&f32_path),
            "--text",
            s(&text_path),
            "--ctx",
            "128",
            "--chunks",
            "2",
        ],
    );

    // Independently: tokens are BOS + the text's bytes; each chunk starts with BOS and its
    // second half is scored; the logits at a position depend on that position's token only.
    let w = Weights::new(seed, true);
    let mut tokens = vec![BOS];
    tokens.extend(text.repeat(4).bytes().map(u32::from));
    let (mut kl_sum, mut same, mut n, mut nll_q4, mut nll_f32) =
        (0.0f64, 0usize, 0usize, 0.0f64, 0.0f64);
    for c in 0..chunks {
        let mut chunk = tokens[c * ctx..(c + 1) * ctx].to_vec();
        chunk[0] = BOS;
        for i in ctx / 2..ctx - 1 {
            let p = log_softmax(&direct_logits(&w, GgmlType::F32, chunk[i] as usize));
            let q = log_softmax(&direct_logits(&w, GgmlType::Q4_0, chunk[i] as usize));
            kl_sum += p
                .iter()
                .zip(&q)
                .map(|(a, b)| a.exp() * (a - b))
                .sum::<f64>();
            let top = |l: &[f64]| (0..l.len()).fold(0, |b, j| if l[j] > l[b] { j } else { b });
            same += usize::from(top(&p) == top(&q));
            let y = chunk[i + 1] as usize;
            nll_f32 -= p[y];
            nll_q4 -= q[y];
            n += 1;
        }
    }
    let want_kl = kl_sum / n as f64;
    let sum = &v["summary"];
    let got_kl = sum["kl_mean"].as_f64().unwrap();
    assert_eq!(sum["positions"], n);
    assert!(
        want_kl > 1e-4,
        "Q4_0 should move the distribution measurably: {want_kl}"
    );
    assert!(
        (got_kl - want_kl).abs() <= 0.02 * want_kl,
        "mean KL {got_kl}, direct computation {want_kl}"
    );
    let want_same = 100.0 * same as f64 / n as f64;
    assert!(
        (sum["same_top_pct"].as_f64().unwrap() - want_same).abs() <= 100.0 * 2.0 / n as f64,
        "{sum}"
    );
    for (key, nll) in [("ppl_ours", nll_q4), ("ppl_reference", nll_f32)] {
        let want = (nll / n as f64).exp();
        let got = sum[key].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-3 * want, "{key}: {got} vs {want}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kl_grows_from_q8_0_to_q4_0_on_a_live_tiny_model() {
    let dir = temp_dir("q-order");
    let f32_path = tiny_file(&dir, "f32.gguf", 5, false, GgmlType::F32);
    let q8 = tiny_file(&dir, "q8_0.gguf", 5, false, GgmlType::Q8_0);
    let q4 = tiny_file(&dir, "q4_0.gguf", 5, false, GgmlType::Q4_0);
    let args = |m: &Path| {
        [
            "-m",
            s(m),
            "--reference",
            s(&f32_path),
            "--ctx",
            "128",
            "--chunks",
            "3",
        ]
        .map(str::to_string)
    };
    let kl = |m: &Path| {
        let a = args(m);
        let v = quality(&dir, &a.iter().map(String::as_str).collect::<Vec<_>>());
        v["summary"]["kl_mean"].as_f64().unwrap()
    };
    let (k8, k4) = (kl(&q8), kl(&q4));
    assert!(k8 > 0.0 && k8 < k4, "KL Q8_0 {k8}, Q4_0 {k4}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn models_with_different_vocabularies_are_refused() {
    let dir = temp_dir("q-vocab");
    let m = tiny_file(&dir, "tiny.gguf", 3, false, GgmlType::F32);
    let out = run_strata(&[
        "quality",
        "-m",
        s(&m),
        "--reference",
        s(&smollm2()),
        "--ctx",
        "128",
        "--chunks",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("different vocabularies"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn smollm2_compared_with_itself_on_256_positions_has_zero_kl() {
    let dir = temp_dir("q-smol-self");
    let m = smollm2();
    // --ctx 514 scores positions 257..=512 of one chunk: 256 positions.
    let v = quality(
        &dir,
        &[
            "-m",
            s(&m),
            "--reference",
            s(&m),
            "--ctx",
            "514",
            "--chunks",
            "1",
        ],
    );
    let sum = &v["summary"];
    assert_eq!(sum["positions"], 256);
    assert_eq!(sum["same_top_pct"], 100.0);
    assert_eq!(sum["kl_mean"], 0.0);
    assert_eq!(sum["kl_max"], 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn smollm2_stays_close_to_llama_cpp() {
    if python_with_llama_cpp().is_none() {
        return;
    }
    let dir = temp_dir("q-smol-llama");
    let v = quality(
        &dir,
        &[
            "-m",
            s(&smollm2()),
            "--reference",
            "llama.cpp",
            "--ctx",
            "514",
            "--chunks",
            "1",
        ],
    );
    let sum = &v["summary"];
    assert_eq!(sum["positions"], 256);
    assert!(sum["same_top_pct"].as_f64().unwrap() >= 90.0, "{sum}");
    assert!(sum["kl_mean"].as_f64().unwrap() < 0.05, "{sum}");
    let ratio = sum["ppl_ours"].as_f64().unwrap() / sum["ppl_reference"].as_f64().unwrap();
    assert!((ratio - 1.0).abs() < 0.02, "{sum}");
    assert!(
        v["reference"]
            .as_str()
            .unwrap()
            .starts_with("llama.cpp (llama-cpp-python "),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tiny_vocabulary_is_bytes_plus_bos() {
    // Guards the direct computation above: text must tokenize to BOS + bytes.
    let dir = temp_dir("q-tok");
    let p = tiny_file(&dir, "t.gguf", 1, true, GgmlType::F32);
    let model = strata_engine::Model::load(&p).unwrap();
    assert_eq!(model.tokenizer().encode("Fog, at 3 a.m.!", true, false), {
        let mut v = vec![BOS];
        v.extend("Fog, at 3 a.m.!".bytes().map(u32::from));
        v
    });
    assert_eq!(model.config().n_vocab, tiny::N_VOCAB);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_llama_cpp_python_is_an_error_that_says_what_to_install() {
    let dir = temp_dir("q-nopython");
    let m = tiny_file(&dir, "tiny.gguf", 2, false, GgmlType::F32);
    // `false` runs and exits at once without a word, like a Python without llama_cpp.
    let out = run_strata(&[
        "quality",
        "-m",
        s(&m),
        "--reference",
        "llama.cpp",
        "--python",
        "false",
        "--ctx",
        "128",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("llama-cpp-python"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
