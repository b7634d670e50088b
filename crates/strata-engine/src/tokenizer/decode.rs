//! Token ids back to bytes: per-token pieces and whole-sequence detokenization.
//!
//! Mirrors `llama_vocab::impl::token_to_piece` and `llama_vocab::impl::detokenize` in llama.cpp
//! `src/llama-vocab.cpp`: control and unknown tokens render only when asked; user-defined
//! tokens render as their text; SPM turns `▁` into a space and `<0xNN>` into the byte;
//! byte-level BPE maps each character back to its byte. Detokenizing SPM text drops the
//! leading space of the first piece, and vocabularies with `clean_spaces` get llama.cpp's
//! clean-up of spaces before punctuation and around apostrophes.

use super::byte_map::char_to_byte;
use super::vocab::{attr, Vocab, VocabKind};

/// The piece of every token as llama.cpp caches it (rendered with `special = true`).
#[derive(Debug)]
pub(crate) struct PieceCache {
    bytes: Vec<u8>,
    /// Piece `i` is `bytes[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
}

impl PieceCache {
    pub fn new(vocab: &Vocab) -> PieceCache {
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(vocab.len() + 1);
        for (i, text) in vocab.texts.iter().enumerate() {
            offsets.push(bytes.len());
            render(vocab, vocab.attrs[i], text, &mut bytes);
        }
        offsets.push(bytes.len());
        PieceCache { bytes, offsets }
    }

    /// The piece of `id`; control and unknown tokens are empty unless `special`; an id
    /// outside the vocabulary is empty.
    pub fn piece(&self, vocab: &Vocab, id: u32, special: bool) -> &[u8] {
        let i = id as usize;
        if i >= vocab.len() || (!special && vocab.attrs[i] & (attr::CONTROL | attr::UNKNOWN) != 0) {
            return &[];
        }
        &self.bytes[self.offsets[i]..self.offsets[i + 1]]
    }
}

fn render(vocab: &Vocab, a: u16, text: &str, out: &mut Vec<u8>) {
    if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
        out.extend_from_slice(text.as_bytes());
    } else if a & attr::NORMAL != 0 {
        match vocab.kind {
            VocabKind::Spm => out.extend_from_slice(text.replace('▁', " ").as_bytes()),
            VocabKind::Bpe => decode_byte_level(text, out),
        }
    } else if a & attr::BYTE != 0 {
        out.push(parse_byte_token(text));
    }
}

/// Byte-level characters back to bytes; a character outside the map becomes llama.cpp's
/// `[UNK_BYTE_0x..<token>]` marker.
fn decode_byte_level(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
}

/// The byte of a `<0xNN>` token (`strtol` on the two characters after `<0x`; 0 if invalid).
fn parse_byte_token(text: &str) -> u8 {
    let hex = text.get(3..).unwrap_or("");
    let digits: String = hex
        .chars()
        .take(2)
        .take_while(char::is_ascii_hexdigit)
        .collect();
    u8::from_str_radix(&digits, 16).unwrap_or(0)
}

/// Concatenated pieces of `ids`; see [`super::Tokenizer::detokenize`].
pub(crate) fn detokenize(
    vocab: &Vocab,
    cache: &PieceCache,
    mut ids: &[u32],
    remove_special: bool,
    unparse_special: bool,
) -> Vec<u8> {
    let mut remove_space = vocab.add_space_prefix;
    let is = |id: Option<&u32>, special: Option<u32>| id.is_some() && id.copied() == special;
    if remove_special && vocab.add_bos && is(ids.first(), vocab.special.bos) {
        remove_space = false;
        ids = &ids[1..];
    }
    if remove_special && vocab.add_eos && is(ids.last(), vocab.special.eos) {
        ids = &ids[..ids.len() - 1];
    }
    let mut out = Vec::with_capacity(ids.len() * 4);
    for &id in ids {
        let piece = cache.piece(vocab, id, unparse_special);
        let piece = match piece {
            [b' ', rest @ ..] if remove_space => rest,
            _ => piece,
        };
        remove_space = false;
        out.extend_from_slice(piece);
    }
    if vocab.clean_spaces {
        clean_up_spaces(&mut out);
    }
    out
}

/// llama.cpp's three in-place passes: drop the space in ` ?`, ` !`, ` .`, ` ,`; turn ` ' `
/// into `'`; drop the space in ` 's`, ` 'm`, ` 're`, ` 've`.
fn clean_up_spaces(t: &mut Vec<u8>) {
    // Pass 1.
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
    // Pass 2 (llama.cpp overwrites the skipped space with NUL, which later reads see).
    let n = t.len();
    let mut total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = t[i];
        if x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            total -= 1;
            i += 1;
            t[i] = 0;
        }
        t[total] = x;
        total += 1;
        i += 1;
    }
    t.truncate(total);
    // Pass 3.
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            let x2 = t.get(i + 2).copied().filter(|_| i + 2 < n);
            let drop = matches!(x1, b's' | b'm')
                || (!matches!(x1, b't' | b'd')
                    && matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e'))));
            if drop {
                total -= 1;
            }
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        clean_up_spaces(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn clean_up_matches_llama_cpp_rules() {
        assert_eq!(clean("Hello , world !"), "Hello, world!");
        assert_eq!(clean("a ' b"), "a'b");
        assert_eq!(
            clean("it 's we 're I 'm you 'll don 't"),
            "it's we're I'm you 'll don 't"
        );
        assert_eq!(parse_byte_token("<0x0A>"), 10);
        assert_eq!(parse_byte_token("<0x"), 0);
    }
}
