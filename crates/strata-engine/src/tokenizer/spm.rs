//! SentencePiece (BPE-with-scores) tokenization of one text fragment.
//!
//! Mirrors `llm_tokenizer_spm_session::tokenize` in llama.cpp `src/llama-vocab.cpp`: start from
//! one symbol per UTF-8 character, repeatedly merge the adjacent pair whose concatenation is
//! the token with the highest score (leftmost on ties), then emit each symbol's token, or its
//! bytes as `<0xNN>` tokens when the symbol is not a token. The caller has already replaced
//! spaces with `▁` and added the prefix space.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

const NONE: usize = usize::MAX;

#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

/// Ordered so that the heap's maximum is the highest score, then the leftmost pair.
#[derive(Clone, Copy)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}

/// Appends the tokens of `text` to `out`; `byte_tokens[b]` is the fallback token of byte `b`.
pub(crate) fn encode(
    vocab: &Vocab,
    byte_tokens: &[Option<u32>; 256],
    text: &str,
    out: &mut Vec<u32>,
) {
    let mut syms: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        let k = syms.len();
        syms.push(Symbol {
            start: i,
            len: c.len_utf8(),
            prev: k.wrapping_sub(1),
            next: k + 1,
        });
    }
    let Some(last) = syms.last_mut() else { return };
    last.next = NONE;

    let slice = |syms: &[Symbol], l: usize, r: usize| -> (usize, usize) {
        let (a, b) = (syms[l], syms[r]);
        (a.start, b.start + b.len)
    };
    let mut heap = BinaryHeap::with_capacity(syms.len());
    let try_push = |heap: &mut BinaryHeap<Bigram>, syms: &[Symbol], l: usize, r: usize| {
        if l == NONE || r == NONE {
            return;
        }
        let (a, b) = slice(syms, l, r);
        if let Some(id) = vocab.id(&text[a..b]) {
            heap.push(Bigram {
                score: vocab.scores[id as usize],
                left: l,
                right: r,
                len: b - a,
            });
        }
    };
    for i in 1..syms.len() {
        try_push(&mut heap, &syms, i - 1, i);
    }
    while let Some(bg) = heap.pop() {
        let (ls, rs) = (syms[bg.left], syms[bg.right]);
        if ls.len == 0 || rs.len == 0 || ls.next != bg.right || ls.len + rs.len != bg.len {
            continue; // stale: one side has merged since
        }
        syms[bg.left].len += rs.len;
        syms[bg.left].next = rs.next;
        syms[bg.right].len = 0;
        if let Some(next) = syms.get_mut(rs.next) {
            next.prev = bg.left;
        }
        try_push(&mut heap, &syms, ls.prev, bg.left);
        try_push(&mut heap, &syms, bg.left, rs.next);
    }

    let mut i = 0;
    while let Some(sym) = syms.get(i) {
        let piece = &text[sym.start..sym.start + sym.len];
        match vocab.id(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.bytes().filter_map(|b| byte_tokens[b as usize])),
        }
        i = sym.next;
    }
}
