//! The tokenizer of a synthetic model: every `tokenizer.*` key copied from a real GGUF
//! (`--vocab-from`, by default the known model of the same family), or with `--vocab N` alone
//! a byte-level BPE vocabulary of N tokens that needs no file.

use std::path::Path;

use anyhow::{bail, Context, Result};
use strata_gguf::{GgufModel, GgufWriter};

use super::spec::SynthArch;

/// The known model whose tokenizer `arch` gets when neither `--vocab-from` nor `--vocab` is
/// given.
pub fn default_source(arch: SynthArch) -> &'static str {
    match arch {
        SynthArch::Llama => "smollm2-135m",
        SynthArch::Gemma3 => "gemma3-270m",
        _ => "qwen2.5-coder-0.5b",
    }
}

/// Copies every `tokenizer.*` key of the GGUF at `path` into `w`; returns the vocabulary size
/// (the length of `tokenizer.ggml.tokens`).
///
/// Errors: the file cannot be read, or it has no token list.
pub fn copy_from(path: &Path, w: &mut GgufWriter) -> Result<usize> {
    let src = GgufModel::open(path).with_context(|| format!("reading {}", path.display()))?;
    let md = src.metadata();
    let n = md
        .string_array("tokenizer.ggml.tokens")
        .with_context(|| format!("{} has no vocabulary", path.display()))?
        .len();
    for (k, v) in md.iter().filter(|(k, _)| k.starts_with("tokenizer.")) {
        w.set(k, v.clone());
    }
    Ok(n)
}

/// GPT-2's byte-to-unicode map: the token text of byte `b`.
fn byte_token(b: u8) -> char {
    let printable =
        |c: u32| (33..=126).contains(&c) || (161..=172).contains(&c) || (174..=255).contains(&c);
    let c = u32::from(b);
    if printable(c) {
        return char::from_u32(c).expect("latin-1");
    }
    let shifted = (0..c).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + shifted).expect("below 512")
}

/// Writes a `gpt2` vocabulary of `n` tokens: the 256 bytes, `<|endoftext|>` (id 256: BOS, EOS
/// and padding), then `<|synth_K|>` fillers up to `n`; no merges, so text tokenizes to its
/// bytes.
///
/// Errors: `n` below 258.
pub fn write_bytes_vocab(n: usize, w: &mut GgufWriter) -> Result<()> {
    if n < 258 {
        bail!("--vocab {n} is too small: a byte vocabulary needs at least 258 tokens");
    }
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_token(b).to_string()).collect();
    tokens.push("<|endoftext|>".into());
    tokens.extend((257..n).map(|i| format!("<|synth_{i}|>")));
    let mut types = vec![1i32; n];
    types[256..].iter_mut().for_each(|t| *t = 3);
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.pre", "default");
    w.set("tokenizer.ggml.tokens", tokens);
    w.set("tokenizer.ggml.token_type", types);
    w.set("tokenizer.ggml.merges", Vec::<&str>::new());
    w.set("tokenizer.ggml.bos_token_id", 256u32);
    w.set("tokenizer.ggml.eos_token_id", 256u32);
    w.set("tokenizer.ggml.padding_token_id", 256u32);
    w.set("tokenizer.ggml.add_bos_token", true);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_follow_gpt2() {
        assert_eq!(byte_token(b'a'), 'a');
        assert_eq!(byte_token(b' '), 'Ġ');
        assert_eq!(byte_token(b'\n'), 'Ċ');
        let mut w = GgufWriter::new();
        write_bytes_vocab(300, &mut w).unwrap();
        assert_eq!(
            w.metadata()
                .string_array("tokenizer.ggml.tokens")
                .unwrap()
                .len(),
            300
        );
        assert!(write_bytes_vocab(100, &mut GgufWriter::new()).is_err());
    }
}
