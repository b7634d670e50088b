//! Special tokens found by their text: end-of-turn, fill-in-the-middle, unused and
//! end-of-generation tokens, and the attribute fixes llama.cpp applies to them.
//!
//! Mirrors the "auto-detect special tokens by text" part of `llama_vocab::impl::load` in
//! llama.cpp `src/llama-vocab.cpp`. Where llama.cpp walks a hash map (so the first of several
//! candidates it meets is arbitrary) this walks ids in ascending order.

use super::vocab::{attr, Vocab};

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

/// Texts that end generation whatever the metadata says.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// gpt-oss tokens llama.cpp always renders (made user-defined).
const ALWAYS_RENDERED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// Fills the unset end-of-turn / FIM ids, fixes attributes, and builds the end-of-generation
/// set and the special-token cache of `v`. `model_name` is `general.name`.
pub(crate) fn resolve(v: &mut Vocab, model_name: Option<&str>) {
    let n = v.len() as u32;
    for id in 0..n {
        let text = v.texts[id as usize].as_str();
        let mut found = false;
        let s = &mut v.special;
        for (slot, texts) in [
            (&mut s.eot, EOT_TEXTS),
            (&mut s.eom, EOM_TEXTS),
            (&mut s.fim_pre, FIM_PRE_TEXTS),
            (&mut s.fim_suf, FIM_SUF_TEXTS),
            (&mut s.fim_mid, FIM_MID_TEXTS),
            (&mut s.fim_pad, FIM_PAD_TEXTS),
            (&mut s.fim_rep, FIM_REP_TEXTS),
            (&mut s.fim_sep, FIM_SEP_TEXTS),
        ] {
            if slot.is_none() && texts.contains(&text) {
                *slot = Some(id);
                found = true;
            }
        }
        if found {
            v.attrs[id as usize] |= attr::CONTROL;
        }
    }

    for (a, t) in v.attrs.iter_mut().zip(&v.texts) {
        if *a & attr::CONTROL != 0 && t.contains("unused") {
            *a |= attr::UNUSED;
        }
    }

    let s = v.special;
    let mut eog: Vec<u32> = [s.fim_pad, s.fim_rep, s.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for id in 0..n {
        let i = id as usize;
        if EOG_TEXTS.contains(&v.texts[i].as_str()) {
            eog.push(id);
            v.attrs[i] |= attr::CONTROL;
        }
        if ALWAYS_RENDERED.contains(&v.texts[i].as_str()) {
            v.attrs[i] = attr::USER_DEFINED;
        }
    }
    eog.extend([s.eos, s.eot, s.eom].into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();

    // o200k_harmony / solar-open: `<|end|>` ends a message, not the generation.
    let has = |eog: &[u32], t: &str| eog.iter().any(|&id| v.texts[id as usize] == t);
    let calls = has(&eog, "<|call|>") || has(&eog, "<|calls|>");
    if calls && (has(&eog, "<|return|>") || has(&eog, "<|flush|>")) {
        if let Some(pos) = eog.iter().position(|&id| v.texts[id as usize] == "<|end|>") {
            v.attrs[eog.remove(pos) as usize] = attr::USER_DEFINED;
        }
    }
    // gemma4 / plamo2: `</s>` is an ordinary token there.
    if has(&eog, "<|tool_response>") || has(&eog, "<|plamo:eos|>") {
        if let Some(pos) = eog.iter().position(|&id| v.texts[id as usize] == "</s>") {
            v.attrs[eog.remove(pos) as usize] = attr::NORMAL;
        }
    }
    v.eog = eog;

    let mut cache: Vec<u32> = (0..n)
        .filter(|&id| {
            v.attrs[id as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
        })
        .collect();
    cache.sort_by_key(|&id| std::cmp::Reverse(v.texts[id as usize].len()));
    v.special_cache = cache;

    let name = model_name.unwrap_or("").to_lowercase();
    if name.contains("phi-3") || name.contains("phi3") {
        for &id in &v.special_cache {
            v.attrs[id as usize] |= attr::RSTRIP;
        }
        for (text, on) in [
            ("</s>", true),
            ("<unk>", false),
            ("<s>", false),
            ("<|endoftext|>", false),
        ] {
            if let Some(id) = v.id(text) {
                let a = &mut v.attrs[id as usize];
                *a = if on {
                    *a | attr::RSTRIP
                } else {
                    *a & !attr::RSTRIP
                };
            }
        }
    }
}
