//! Incremental detokenization for streaming generated text.

use super::Tokenizer;

/// Turns token ids, fed one at a time, into text that is always complete UTF-8.
///
/// A token can end inside a multi-byte character (byte-level BPE splits emoji across tokens;
/// SPM emits `<0xF0>` `<0x9F>` ...). [`StreamDecoder::push`] returns only whole characters and
/// keeps an unfinished one until the bytes that complete it arrive; bytes that can never form a
/// character come out as U+FFFD. The first token loses its leading space when the vocabulary
/// adds a space prefix (SPM), as in llama.cpp `llama_vocab::impl::detokenize`, so the chunks
/// concatenate to [`Tokenizer::decode`]'s text for vocabularies without space clean-up.
///
/// ```no_run
/// # fn demo(tok: &strata_engine::tokenizer::Tokenizer, ids: &[u32]) {
/// let mut dec = tok.stream_decoder();
/// let mut text = String::new();
/// for &id in ids {
///     text.push_str(&dec.push(id));
/// }
/// text.push_str(&dec.finish());
/// # }
/// ```
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    pending: Vec<u8>,
    strip_space: bool,
    special: bool,
}

impl<'a> StreamDecoder<'a> {
    pub(crate) fn new(tok: &'a Tokenizer) -> Self {
        StreamDecoder {
            tok,
            pending: Vec::new(),
            strip_space: tok.add_space_prefix(),
            special: false,
        }
    }

    /// Also render control tokens (`<|im_end|>`, ...) as their text; off by default.
    pub fn with_special(mut self, special: bool) -> Self {
        self.special = special;
        self
    }

    /// Keep the first token's leading space (for text that continues a prompt).
    pub fn keep_leading_space(mut self) -> Self {
        self.strip_space = false;
        self
    }

    /// Adds `id` and returns the text that is now complete (often empty mid-character).
    /// An id outside the vocabulary adds nothing.
    pub fn push(&mut self, id: u32) -> String {
        let mut out = String::new();
        self.push_into(id, &mut out);
        out
    }

    /// As [`push`](Self::push), appending the completed text to `out` (no allocation once
    /// `out` has grown: the decode loop reuses one buffer).
    pub fn push_into(&mut self, id: u32, out: &mut String) {
        let piece = self.tok.token_to_piece_with(id, self.special);
        let piece = match piece {
            [b' ', rest @ ..] if self.strip_space => rest,
            _ => piece,
        };
        self.strip_space = false;
        self.pending.extend_from_slice(piece);
        self.take_complete(out);
    }

    /// Returns whatever is still held back (an unfinished character becomes U+FFFD).
    pub fn finish(mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }

    fn take_complete(&mut self, out: &mut String) {
        let mut done = 0;
        loop {
            match std::str::from_utf8(&self.pending[done..]) {
                Ok(s) => {
                    out.push_str(s);
                    done = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = done + e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[done..valid]).unwrap_or(""));
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            done = valid + bad;
                        }
                        None => {
                            done = valid; // an unfinished character: wait for more bytes
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..done);
    }
}
