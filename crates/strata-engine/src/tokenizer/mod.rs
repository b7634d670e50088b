//! Tokenizer built from GGUF `tokenizer.ggml.*` metadata, token for token identical to
//! llama.cpp's `llama_tokenize` / `llama_detokenize` (`src/llama-vocab.cpp`).
//!
//! Two algorithms: byte-level BPE (`tokenizer.ggml.model = "gpt2"`, with the pre-tokenizer
//! named by `tokenizer.ggml.pre`) and SentencePiece (`"llama"`, as Llama 2 and Gemma 3 use).
//! Encoding first cuts special tokens out of the text (`partition.rs`), then tokenizes each
//! remaining fragment; decoding maps ids back to bytes (`decode.rs`, [`StreamDecoder`]).
//!
//! ```no_run
//! use strata_engine::tokenizer::Tokenizer;
//! let file = strata_gguf::GgufFile::open("model.gguf".as_ref())?;
//! let tok = Tokenizer::from_metadata(file.metadata())?;
//! let ids = tok.encode("Hello world", false, false);
//! assert_eq!(tok.decode(&ids), "Hello world");
//! let prompt = tok.encode("<|im_start|>user\nHi<|im_end|>", true, true); // BOS if the model adds one
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bpe;
mod byte_map;
mod decode;
mod error;
mod hash;
mod metadata;
mod partition;
mod pre_types;
mod pretokenize;
mod regex_split;
mod special_tokens;
mod spm;
mod stream;
mod unicode;
mod unicode_table;
mod vocab;

pub use error::TokenizerError;
pub use stream::StreamDecoder;
pub use vocab::VocabKind;

use bpe::Bpe;
use decode::PieceCache;
use partition::{Fragment, SpecialMatcher};
use pretokenize::PreTokenizer;
use vocab::{attr, Vocab};

/// A tokenizer for one model's vocabulary. Cheap to share across threads (`Send + Sync`);
/// all tables are built once by [`Tokenizer::from_metadata`].
#[derive(Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    algo: Algo,
    specials: SpecialMatcher,
    pieces: PieceCache,
}

#[derive(Debug)]
enum Algo {
    Bpe {
        pre: PreTokenizer,
        bpe: Box<Bpe>,
    },
    Spm {
        byte_tokens: Box<[Option<u32>; 256]>,
    },
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's metadata.
    ///
    /// Reads `tokenizer.ggml.model`, `.pre`, `.tokens`, `.scores`, `.token_type`, `.merges`,
    /// the `*_token_id` keys and `.add_bos_token` / `.add_eos_token` / `.add_space_prefix`,
    /// applying llama.cpp's defaults where a key is absent (`llama_vocab::impl::load`).
    ///
    /// # Errors
    /// [`TokenizerError`] naming the key: `tokenizer.ggml.model` or `tokenizer.ggml.tokens`
    /// missing, `tokenizer.ggml.merges` missing for BPE, a model or pre-tokenizer this crate
    /// does not implement, or arrays of the wrong type or length.
    pub fn from_metadata(meta: &strata_gguf::Metadata) -> Result<Tokenizer, TokenizerError> {
        let mut cfg = metadata::read(meta)?;
        let merges = std::mem::take(&mut cfg.merges);
        let vocab = Vocab::new(cfg)?;
        let algo = match (vocab.kind, &vocab.pre) {
            (VocabKind::Bpe, Some(pre)) => Algo::Bpe {
                pre: PreTokenizer::new(&vocab.pre_name, pre)?,
                bpe: Box::new(Bpe::new(&vocab, &merges)),
            },
            _ => {
                let mut byte_tokens = Box::new([None; 256]);
                for (b, slot) in byte_tokens.iter_mut().enumerate() {
                    *slot = vocab.byte_token(b as u8);
                }
                Algo::Spm { byte_tokens }
            }
        };
        let specials = SpecialMatcher::new(&vocab);
        let pieces = PieceCache::new(&vocab);
        Ok(Tokenizer {
            vocab,
            algo,
            specials,
            pieces,
        })
    }

    /// Token ids of `text`, as llama.cpp's `llama_tokenize(text, add_special, parse_special)`.
    ///
    /// `add_special` adds BOS / EOS where the vocabulary asks for them ([`Tokenizer::add_bos`]);
    /// `parse_special` lets control tokens written in the text (`<|im_start|>`) become their
    /// ids; user-defined tokens are matched either way. Never fails; empty text gives no
    /// tokens (or just BOS).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let v = &self.vocab;
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && v.add_bos {
            out.extend(v.special.bos);
        }
        let fragments = self.specials.partition(v, text, parse_special);
        match &self.algo {
            Algo::Spm { byte_tokens } => {
                let mut prev_special = true;
                let mut buf = String::new();
                for f in fragments {
                    match f {
                        Fragment::Text(r) => {
                            buf.clear();
                            if v.add_space_prefix && prev_special {
                                buf.push(' ');
                            }
                            buf.push_str(&text[r]);
                            let escaped = buf.replace(' ', "▁");
                            spm::encode(v, byte_tokens, &escaped, &mut out);
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            Algo::Bpe { pre, bpe } => {
                let mut scratch = bpe::Scratch::default();
                for f in fragments {
                    match f {
                        Fragment::Text(r) => {
                            let frag = &text[r];
                            for w in pre.split(frag) {
                                bpe.encode_word(v, &frag.as_bytes()[w], &mut out, &mut scratch);
                            }
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && v.add_eos {
            out.extend(v.special.eos);
        }
        out
    }

    /// The bytes token `id` stands for, with control and unknown tokens rendered empty
    /// (llama.cpp `llama_token_to_piece(.., lstrip = 0, special = false)`). Not always valid
    /// UTF-8 on its own. An id outside the vocabulary gives an empty slice.
    pub fn token_to_piece(&self, id: u32) -> &[u8] {
        self.token_to_piece_with(id, false)
    }

    /// Like [`Tokenizer::token_to_piece`]; with `special`, control tokens render as their text.
    pub fn token_to_piece_with(&self, id: u32, special: bool) -> &[u8] {
        self.pieces.piece(&self.vocab, id, special)
    }

    /// The text of `ids` (llama.cpp `llama_detokenize(.., remove_special = false,
    /// unparse_special = false)`): control tokens vanish, SPM's leading space is dropped, and
    /// invalid UTF-8 becomes U+FFFD. Ids outside the vocabulary are skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.detokenize(ids, false, false)).into_owned()
    }

    /// The text of one token with control tokens rendered (`"<|im_end|>"`, `"<s>"`), as chat
    /// templates need for `bos_token` / `eos_token`; lossy UTF-8, empty for an unknown id.
    pub fn decode_special(&self, id: u32) -> String {
        String::from_utf8_lossy(self.token_to_piece_with(id, true)).into_owned()
    }

    /// llama.cpp `llama_detokenize` as bytes: `remove_special` drops a leading BOS / trailing
    /// EOS the vocabulary adds; `unparse_special` renders control tokens as their text.
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        decode::detokenize(
            &self.vocab,
            &self.pieces,
            ids,
            remove_special,
            unparse_special,
        )
    }

    /// A decoder for ids arriving one at a time; see [`StreamDecoder`].
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }

    /// Beginning-of-sequence id (`tokenizer.ggml.bos_token_id`, or llama.cpp's default).
    pub fn bos_id(&self) -> Option<u32> {
        self.vocab.special.bos
    }

    /// End-of-sequence id (`tokenizer.ggml.eos_token_id`, or llama.cpp's default).
    pub fn eos_id(&self) -> Option<u32> {
        self.vocab.special.eos
    }

    /// End-of-turn id (`tokenizer.ggml.eot_token_id`, or found by text such as `<|im_end|>`).
    pub fn eot_id(&self) -> Option<u32> {
        self.vocab.special.eot
    }

    /// End-of-message id (`tokenizer.ggml.eom_token_id`, or `<|eom_id|>`).
    pub fn eom_id(&self) -> Option<u32> {
        self.vocab.special.eom
    }

    /// Unknown-token id (`tokenizer.ggml.unknown_token_id`).
    pub fn unk_id(&self) -> Option<u32> {
        self.vocab.special.unk
    }

    /// Padding id (`tokenizer.ggml.padding_token_id`).
    pub fn pad_id(&self) -> Option<u32> {
        self.vocab.special.pad
    }

    /// True when generating `id` ends generation: EOS, EOT, EOM, FIM pad/repo/sep, and tokens
    /// llama.cpp recognizes by text (`<|im_end|>`, `<|endoftext|>`, `<end_of_turn>`,
    /// `<|eot_id|>`, ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.binary_search(&id).is_ok()
    }

    /// All end-of-generation ids, ascending.
    pub fn eog_ids(&self) -> &[u32] {
        &self.vocab.eog
    }

    /// True for control tokens (rendered empty by [`Tokenizer::decode`]).
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attr(id) & attr::CONTROL != 0
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The id of the token whose vocabulary text is exactly `text` (e.g. `"<|im_start|>"`;
    /// byte-level BPE texts use `Ġ` for space).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }

    /// The vocabulary text of `id` (raw, e.g. `"Ġworld"` or `"▁world"`).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.texts.get(id as usize).map(String::as_str)
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }

    /// Whether `encode(.., add_special = true, ..)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.vocab.add_eos
    }

    /// Whether SPM text gets a leading space (`tokenizer.ggml.add_space_prefix`).
    pub fn add_space_prefix(&self) -> bool {
        self.vocab.add_space_prefix
    }

    /// The tokenization algorithm.
    pub fn kind(&self) -> VocabKind {
        self.vocab.kind
    }

    /// The pre-tokenizer name (`tokenizer.ggml.pre`; `"default"` when absent or for SPM).
    pub fn pre_tokenizer(&self) -> &str {
        &self.vocab.pre_name
    }
}
