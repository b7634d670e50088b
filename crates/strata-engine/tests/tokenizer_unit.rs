//! Behaviour of the tokenizer beyond llama.cpp's vectors: streaming decode of split UTF-8,
//! BPE round trips, special-token parsing on and off, errors naming keys, and no panics on
//! arbitrary text or ids. Uses llama.cpp's vocab-only files (`scripts/fetch_llama_vocab.sh`,
//! `STRATA_LLAMA_VOCAB_DIR`).

use std::path::PathBuf;

use strata_engine::tokenizer::{Tokenizer, TokenizerError, VocabKind};
use strata_gguf::{GgufFile, Metadata};

fn vocab(name: &str) -> Tokenizer {
    let dir = match std::env::var_os("STRATA_LLAMA_VOCAB_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/strata/llama-vocab"),
    };
    let path = dir.join(format!("ggml-vocab-{name}.gguf"));
    let file = GgufFile::open(&path).unwrap_or_else(|e| {
        panic!("{e}\nrun scripts/fetch_llama_vocab.sh (or set STRATA_LLAMA_VOCAB_DIR)")
    });
    Tokenizer::from_metadata(file.metadata()).expect("vocab loads")
}

/// Feeds `ids` one by one; returns every chunk the decoder gave, then the final flush.
fn stream(tok: &Tokenizer, ids: &[u32]) -> (Vec<String>, String) {
    let mut dec = tok.stream_decoder();
    let chunks = ids.iter().map(|&id| dec.push(id)).collect();
    (chunks, dec.finish())
}

#[test]
fn stream_decoder_holds_back_an_emoji_split_across_byte_level_tokens() {
    let tok = vocab("qwen2");
    let text = "a😶\u{200d}🌫\u{fe0f}𒀀b";
    let ids = tok.encode(text, false, false);
    // Some tokens carry only part of a character.
    let partial = ids
        .iter()
        .filter(|&&id| std::str::from_utf8(tok.token_to_piece(id)).is_err())
        .count();
    assert!(partial >= 2, "{ids:?}");
    let (chunks, rest) = stream(&tok, &ids);
    assert_eq!(chunks.concat() + &rest, text);
    assert_eq!(rest, "");
    assert!(
        chunks.iter().any(|c| c.is_empty()),
        "some chunk waited: {chunks:?}"
    );
    assert!(chunks.iter().any(|c| c.contains('𒀀')));
}

#[test]
fn stream_decoder_joins_spm_byte_fallback_tokens_and_strips_the_first_space() {
    let tok = vocab("llama-spm");
    let ids = tok.encode("🦙 ok", false, false);
    let bytes: Vec<u32> = (0..4)
        .map(|i| {
            tok.token_id(&format!("<0x{:02X}>", "🦙".as_bytes()[i]))
                .unwrap()
        })
        .collect();
    assert!(
        ids.windows(4).any(|w| w == bytes),
        "{ids:?} has byte tokens {bytes:?}"
    );
    let (chunks, rest) = stream(&tok, &ids);
    assert_eq!(chunks.concat() + &rest, "🦙 ok");
    assert_eq!(tok.decode(&ids), "🦙 ok");
}

#[test]
fn stream_decoder_replaces_bytes_that_never_form_a_character() {
    let tok = vocab("llama-spm");
    let ff = tok.token_id("<0xFF>").unwrap();
    let f0 = tok.token_id("<0xF0>").unwrap();
    let a = tok.token_id("a").unwrap();
    let mut dec = tok.stream_decoder().keep_leading_space();
    assert_eq!(dec.push(ff), "\u{FFFD}");
    assert_eq!(dec.push(f0), "");
    assert_eq!(dec.push(a), "\u{FFFD}a");
    assert_eq!(dec.push(f0), "");
    assert_eq!(dec.finish(), "\u{FFFD}");
}

const TEXTS: &[&str] = &[
    "Hello, world! It's 2024-06-01 and we're testing.",
    "  leading spaces, trailing spaces   \n\n\n\ttabs\t\t and \r\n CRLF",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n",
    "中文文本，日本語のかな、한국어 — mixed with English.",
    "emoji 🦙🚀😶\u{200d}🌫\u{fe0f} and combining e\u{301} a\u{300}",
    "numbers 1234567890 3.14159 -42 1e10 ١٢٣",
    "<|im_start|>user\nnot special when parse_special is off<|im_end|>",
    "\u{a0}\u{3000}\u{2028}odd whitespace\u{85}",
    "",
];

#[test]
fn bpe_round_trips_varied_text() {
    for name in ["qwen2", "qwen35", "starcoder"] {
        let tok = vocab(name);
        for text in TEXTS {
            for parse_special in [false, true] {
                let ids = tok.encode(text, false, parse_special);
                let back =
                    String::from_utf8(tok.detokenize(&ids, false, true)).expect("valid UTF-8");
                assert_eq!(
                    &back, text,
                    "{name}, parse_special={parse_special}: {ids:?}"
                );
            }
        }
    }
}

#[test]
fn special_tokens_are_parsed_only_when_asked() {
    let tok = vocab("qwen2");
    let start = tok.token_id("<|im_start|>").unwrap();
    let end = tok.token_id("<|im_end|>").unwrap();
    let text = "<|im_start|>user\nhi<|im_end|>";
    let on = tok.encode(text, false, true);
    assert_eq!(on.first(), Some(&start));
    assert_eq!(on.last(), Some(&end));
    let off = tok.encode(text, false, false);
    assert!(!off.contains(&start) && !off.contains(&end), "{off:?}");
    // Control tokens vanish from plain decoding and come back when asked for.
    assert_eq!(tok.decode(&on), "user\nhi");
    assert_eq!(tok.detokenize(&on, false, true), text.as_bytes());
    assert_eq!(tok.decode(&off), text);
    assert!(tok.is_eog(end));
    assert!(tok.is_eog(tok.token_id("<|endoftext|>").unwrap()));
    assert!(!tok.is_eog(start));
    assert_eq!(tok.decode_special(end), "<|im_end|>");
}

#[test]
fn spm_adds_bos_and_space_prefix_like_llama_cpp() {
    let tok = vocab("llama-spm");
    assert_eq!(tok.kind(), VocabKind::Spm);
    assert!(tok.add_bos() && tok.add_space_prefix());
    let ids = tok.encode("Hello", true, false);
    assert_eq!(ids[0], tok.bos_id().unwrap());
    assert_eq!(tok.token_text(ids[1]), Some("▁Hello"));
    assert_eq!(tok.decode(&ids), " Hello"); // BOS takes the space-stripping turn
    assert_eq!(tok.decode(&ids[1..]), "Hello");
    assert_eq!(tok.detokenize(&ids, true, false), b" Hello");
    assert_eq!(tok.encode("", true, false), [tok.bos_id().unwrap()]);
}

#[test]
fn out_of_range_ids_decode_to_nothing() {
    let tok = vocab("gpt-2");
    let n = tok.vocab_size() as u32;
    assert_eq!(tok.token_to_piece(n), b"");
    assert_eq!(tok.token_to_piece(u32::MAX), b"");
    let hi = tok.encode("hi", false, false);
    let ids = [hi[0], n, u32::MAX];
    assert_eq!(tok.decode(&ids), "hi");
    let mut dec = tok.stream_decoder();
    assert_eq!(dec.push(u32::MAX), "");
    assert!(!tok.is_eog(u32::MAX));
    assert_eq!(tok.token_text(u32::MAX), None);
}

#[test]
fn arbitrary_text_and_ids_never_panic() {
    let toks: Vec<Tokenizer> = ["gpt-2", "llama-bpe", "llama-spm", "qwen2", "qwen35"]
        .iter()
        .map(|n| vocab(n))
        .collect();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..200 {
        let len = (next() % 64) as usize;
        let text: String = (0..len)
            .map(|_| {
                let r = next();
                match r % 4 {
                    0 => char::from(b" \n\t'<|>a1"[(r >> 8) as usize % 9]),
                    1 => char::from_u32((r >> 8) as u32 % 0x80).unwrap(),
                    _ => char::from_u32((r >> 8) as u32 % 0x11_0000).unwrap_or('\u{FFFD}'),
                }
            })
            .collect();
        for tok in &toks {
            for flags in [(false, false), (true, true)] {
                let ids = tok.encode(&text, flags.0, flags.1);
                let _ = tok.decode(&ids);
            }
            let ids: Vec<u32> = (0..8)
                .map(|_| next() as u32 % (tok.vocab_size() as u32 + 10))
                .collect();
            let _ = tok.decode(&ids);
            let (chunks, rest) = stream(tok, &ids);
            let _ = (chunks, rest);
        }
    }
}

#[test]
fn metadata_errors_name_the_key() {
    let mut m = Metadata::new();
    m.insert("tokenizer.ggml.tokens", vec!["a", "b"]).unwrap();
    let e = Tokenizer::from_metadata(&m).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.model"), "{e}");

    m.insert("tokenizer.ggml.model", "gpt2").unwrap();
    let e = Tokenizer::from_metadata(&m).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.merges"), "{e}");

    m.set("tokenizer.ggml.model", "bert");
    let e = Tokenizer::from_metadata(&m).unwrap_err();
    assert!(matches!(e, TokenizerError::UnsupportedModel { .. }), "{e}");

    m.set("tokenizer.ggml.model", "gpt2");
    m.insert("tokenizer.ggml.merges", vec!["a b"]).unwrap();
    m.insert("tokenizer.ggml.pre", "no-such-pre").unwrap();
    let e = Tokenizer::from_metadata(&m).unwrap_err().to_string();
    assert!(
        e.contains("tokenizer.ggml.pre") && e.contains("no-such-pre"),
        "{e}"
    );

    m.set("tokenizer.ggml.pre", "qwen2");
    m.insert("tokenizer.ggml.scores", vec![0.0f32]).unwrap();
    let e = Tokenizer::from_metadata(&m).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.scores"), "{e}");
}

#[test]
fn tokenizer_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tokenizer>();
}
