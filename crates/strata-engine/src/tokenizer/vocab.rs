//! The vocabulary: token texts, scores, attributes, special ids and the flags that steer
//! tokenization, with llama.cpp's defaults applied.
//!
//! Mirrors `llama_vocab::impl::load` in llama.cpp `src/llama-vocab.cpp` (defaults per
//! tokenizer model and pre-tokenizer, empty-token renaming, special-id validation).

use super::hash::FxHashMap;
use super::pre_types::{self, PreType};
use super::special_tokens;
use super::TokenizerError;

/// Token attribute bits (llama.cpp `llama_token_attr`).
pub(crate) mod attr {
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;

    /// The attribute of a `tokenizer.ggml.token_type` value (1 normal, 2 unknown, 3 control,
    /// 4 user-defined, 5 unused, 6 byte; anything else undefined).
    pub fn from_token_type(t: i32) -> u16 {
        match t {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => 0,
        }
    }
}

/// Which tokenization algorithm the vocabulary uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabKind {
    /// SentencePiece (`tokenizer.ggml.model` = `"llama"`): score-ordered merges, byte fallback.
    Spm,
    /// Byte-level BPE (`tokenizer.ggml.model` = `"gpt2"`): ranked merges after pre-tokenization.
    Bpe,
}

/// The `tokenizer.ggml.*` values a vocabulary is built from, as read from the file.
#[derive(Clone, Debug, Default)]
pub(crate) struct VocabConfig {
    pub model: String,
    pub pre: Option<String>,
    /// `general.name`, which selects per-model token attributes (phi-3).
    pub model_name: Option<String>,
    pub tokens: Vec<String>,
    pub scores: Option<Vec<f32>>,
    pub token_types: Option<Vec<i32>>,
    pub merges: Vec<String>,
    /// `(key suffix, value)` of the special-id keys present, e.g. `("bos", 1)`.
    pub ids: Vec<(&'static str, i128)>,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    pub add_space_prefix: Option<bool>,
}

/// Special token ids (llama.cpp `special_*_id`); `None` where the vocabulary has none.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

impl SpecialIds {
    /// The slot for a key suffix (`bos` for `tokenizer.ggml.bos_token_id`, ...), deprecated
    /// `prefix`/`suffix`/`middle` included.
    fn slot(&mut self, key: &str) -> Option<&mut Option<u32>> {
        Some(match key {
            "bos" => &mut self.bos,
            "eos" => &mut self.eos,
            "eot" => &mut self.eot,
            "eom" => &mut self.eom,
            "unknown" => &mut self.unk,
            "seperator" => &mut self.sep,
            "padding" => &mut self.pad,
            "mask" => &mut self.mask,
            "fim_pre" | "prefix" => &mut self.fim_pre,
            "fim_suf" | "suffix" => &mut self.fim_suf,
            "fim_mid" | "middle" => &mut self.fim_mid,
            "fim_pad" => &mut self.fim_pad,
            "fim_rep" => &mut self.fim_rep,
            "fim_sep" => &mut self.fim_sep,
            _ => return None,
        })
    }
}

/// The special-id key suffixes in llama.cpp's processing order (deprecated ones last).
pub(crate) const SPECIAL_ID_KEYS: &[&str] = &[
    "bos",
    "eos",
    "eot",
    "eom",
    "unknown",
    "seperator",
    "padding",
    "mask",
    "fim_pre",
    "fim_suf",
    "fim_mid",
    "fim_pad",
    "fim_rep",
    "fim_sep",
    "prefix",
    "suffix",
    "middle",
];

/// A loaded vocabulary; see the module docs.
#[derive(Debug)]
pub(crate) struct Vocab {
    pub kind: VocabKind,
    pub pre_name: String,
    pub pre: Option<PreType>,
    pub texts: Vec<String>,
    pub scores: Vec<f32>,
    pub attrs: Vec<u16>,
    pub ids_by_text: FxHashMap<String, u32>,
    pub special: SpecialIds,
    /// End-of-generation ids, sorted.
    pub eog: Vec<u32>,
    /// Control, user-defined and unknown tokens, longest text first: the order in which they
    /// are cut out of the input.
    pub special_cache: Vec<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    pub clean_spaces: bool,
    pub ignore_merges: bool,
}

impl Vocab {
    /// Applies llama.cpp's defaults and overrides to `cfg`.
    ///
    /// # Errors
    /// An unsupported model or pre-tokenizer, an empty token list, or scores / token types
    /// shorter than the token list.
    pub fn new(cfg: VocabConfig) -> Result<Vocab, TokenizerError> {
        let n = cfg.tokens.len();
        if n == 0 || n > u32::MAX as usize / 2 {
            return Err(TokenizerError::BadValue {
                key: "tokenizer.ggml.tokens",
                reason: format!("{n} tokens"),
            });
        }
        let mut special = SpecialIds::default();
        let (kind, pre_name, pre) = match cfg.model.as_str() {
            "llama" => {
                (special.bos, special.eos, special.unk) = (Some(1), Some(2), Some(0));
                (VocabKind::Spm, "default".to_string(), None)
            }
            "gpt2" => {
                // llama.cpp's BPE default for both (GPT-2's `<|endoftext|>` is not 11; files
                // without the keys get it anyway).
                (special.bos, special.eos) = (Some(11), Some(11));
                let name = cfg.pre.clone().unwrap_or_else(|| "default".to_string());
                let pre = pre_types::lookup(&name)
                    .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer { pre: name.clone() })?;
                if pre.no_default_bos {
                    special.bos = None;
                }
                (VocabKind::Bpe, name, Some(pre))
            }
            other => {
                return Err(TokenizerError::UnsupportedModel {
                    model: other.to_string(),
                })
            }
        };
        let (add_bos, add_space_prefix, clean_spaces) = match pre {
            Some(p) => (p.add_bos, false, p.clean_spaces),
            None => (true, true, false),
        };

        let scores = match cfg.scores {
            Some(s) if s.len() < n => return Err(short("tokenizer.ggml.scores", s.len(), n)),
            Some(mut s) => {
                s.truncate(n);
                s
            }
            None => vec![0.0; n],
        };
        let attrs = match cfg.token_types {
            Some(t) if t.len() < n => return Err(short("tokenizer.ggml.token_type", t.len(), n)),
            Some(t) => t[..n].iter().map(|&t| attr::from_token_type(t)).collect(),
            None => vec![attr::NORMAL; n],
        };
        let mut texts = cfg.tokens;
        let mut ids_by_text = FxHashMap::default();
        ids_by_text.reserve(n);
        for (i, t) in texts.iter_mut().enumerate() {
            if t.is_empty() {
                *t = format!("[EMPTY_{i}]");
            }
            ids_by_text.insert(t.clone(), i as u32);
        }

        for key in SPECIAL_ID_KEYS {
            let slot = special.slot(key).expect("every listed key has a slot");
            if slot.is_some_and(|id| id as usize >= n) {
                *slot = None;
            }
            let given = cfg
                .ids
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|&(_, v)| v);
            if let Some(id) = given.filter(|&v| v >= 0 && (v as u128) < n as u128) {
                *slot = Some(id as u32);
            }
        }

        let mut vocab = Vocab {
            kind,
            pre_name,
            pre,
            texts,
            scores,
            attrs,
            ids_by_text,
            special,
            eog: Vec::new(),
            special_cache: Vec::new(),
            add_bos: cfg.add_bos.unwrap_or(add_bos),
            add_eos: cfg.add_eos.unwrap_or(false),
            add_space_prefix: cfg.add_space_prefix.unwrap_or(add_space_prefix),
            clean_spaces,
            ignore_merges: pre.is_some_and(|p| p.ignore_merges),
        };
        special_tokens::resolve(&mut vocab, cfg.model_name.as_deref());
        Ok(vocab)
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// The id of the token whose text is exactly `text`.
    pub fn id(&self, text: &str) -> Option<u32> {
        self.ids_by_text.get(text).copied()
    }

    /// The attribute bits of `id` (0 when out of range).
    pub fn attr(&self, id: u32) -> u16 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }

    /// The SPM byte-fallback token for `b`: `<0xNN>`, else the one-byte token.
    pub fn byte_token(&self, b: u8) -> Option<u32> {
        self.id(&format!("<0x{b:02X}>"))
            .or_else(|| std::str::from_utf8(&[b]).ok().and_then(|s| self.id(s)))
    }
}

fn short(key: &'static str, got: usize, n: usize) -> TokenizerError {
    TokenizerError::BadValue {
        key,
        reason: format!("{got} entries for {n} tokens"),
    }
}
