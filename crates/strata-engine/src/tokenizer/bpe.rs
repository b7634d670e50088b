//! Byte-level BPE: merging the bytes of one pre-tokenized word by merge rank.
//!
//! Mirrors `llm_tokenizer_bpe_session::tokenize` in llama.cpp `src/llama-vocab.cpp`: the
//! lowest-ranked adjacent pair merges first (leftmost on ties), over a linked list of symbols
//! with a priority queue, so a word of n bytes costs O(n log n). Merge sides and results are
//! interned to ids once per vocabulary (token ids, or ids past the vocabulary for merge pieces
//! that are not tokens), so a merge lookup is one hash of two integers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::byte_map::{encode_bytes, BYTE_TO_CHAR};
use super::hash::FxHashMap;
use super::vocab::Vocab;

const NO_PIECE: u32 = u32::MAX;

/// Merge table of one vocabulary.
#[derive(Debug)]
pub(crate) struct Bpe {
    /// `(left piece << 32 | right piece)` -> `(rank, merged piece)`.
    merges: FxHashMap<u64, (u32, u32)>,
    /// Texts of pieces that are not tokens; piece `n_vocab + i` is `extra[i]`.
    extra: Vec<String>,
    n_vocab: u32,
    /// The piece of each byte's character, or `NO_PIECE`.
    byte_piece: [u32; 256],
}

/// Reusable buffers for [`Bpe::encode_word`].
#[derive(Default)]
pub(crate) struct Scratch {
    syms: Vec<Symbol>,
    heap: BinaryHeap<Reverse<Bigram>>,
    text: String,
}

#[derive(Clone, Copy)]
struct Symbol {
    len: u32,
    piece: u32,
    prev: u32,
    next: u32,
}

/// Ordered by rank, then by left position: the merge llama.cpp takes first is the smallest.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Bigram {
    rank: u32,
    left: u32,
    right: u32,
    len: u32,
    merged: u32,
}

impl Bpe {
    /// Interns the `tokenizer.ggml.merges` lines (`"left right"`, rank = line number; the
    /// first occurrence of a pair wins).
    pub fn new(vocab: &Vocab, merges: &[String]) -> Bpe {
        let n_vocab = vocab.len() as u32;
        let mut extra_ids: FxHashMap<String, u32> = FxHashMap::default();
        let mut extra = Vec::new();
        let mut intern = |text: &str| -> u32 {
            if let Some(id) = vocab.id(text) {
                return id;
            }
            if let Some(&id) = extra_ids.get(text) {
                return id;
            }
            let id = n_vocab + extra.len() as u32;
            extra.push(text.to_string());
            extra_ids.insert(text.to_string(), id);
            id
        };
        let mut table = FxHashMap::default();
        table.reserve(merges.len());
        for (rank, line) in merges.iter().enumerate() {
            // llama.cpp splits at the first space after the first byte.
            let bytes = line.as_bytes();
            let Some(pos) = bytes.iter().skip(1).position(|&b| b == b' ').map(|p| p + 1) else {
                continue;
            };
            let (left, right) = (&line[..pos], &line[pos + 1..]);
            if left.is_empty() || right.is_empty() {
                continue;
            }
            let key = (u64::from(intern(left)) << 32) | u64::from(intern(right));
            let merged = intern(&format!("{left}{right}"));
            table.entry(key).or_insert((rank as u32, merged));
        }
        let mut byte_piece = [NO_PIECE; 256];
        let mut buf = [0u8; 4];
        for (b, piece) in byte_piece.iter_mut().enumerate() {
            let s: &str = BYTE_TO_CHAR[b].encode_utf8(&mut buf);
            *piece = vocab
                .id(s)
                .or_else(|| extra_ids.get(s).copied())
                .unwrap_or(NO_PIECE);
        }
        Bpe {
            merges: table,
            extra,
            n_vocab,
            byte_piece,
        }
    }

    fn pair(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        if left == NO_PIECE || right == NO_PIECE {
            return None;
        }
        self.merges
            .get(&((u64::from(left) << 32) | u64::from(right)))
            .copied()
    }

    /// Appends the tokens of one word (raw bytes, before the byte-level mapping) to `out`.
    pub fn encode_word(&self, vocab: &Vocab, word: &[u8], out: &mut Vec<u32>, s: &mut Scratch) {
        if word.is_empty() {
            return;
        }
        if vocab.ignore_merges {
            s.text.clear();
            encode_bytes(word, &mut s.text);
            if let Some(id) = vocab.id(&s.text) {
                out.push(id);
                return;
            }
        }
        let n = word.len() as u32;
        s.syms.clear();
        s.syms.extend(word.iter().enumerate().map(|(i, &b)| Symbol {
            len: 1,
            piece: self.byte_piece[b as usize],
            prev: (i as u32).wrapping_sub(1),
            next: if i as u32 + 1 == n {
                u32::MAX
            } else {
                i as u32 + 1
            },
        }));
        s.heap.clear();
        for i in 1..n {
            self.push_pair(s, i - 1, i);
        }
        while let Some(Reverse(bg)) = s.heap.pop() {
            let (l, r) = (bg.left as usize, bg.right as usize);
            let (ls, rs) = (s.syms[l], s.syms[r]);
            if ls.len == 0 || rs.len == 0 || ls.next != bg.right || ls.len + rs.len != bg.len {
                continue; // stale: one side has merged since
            }
            s.syms[l].len += rs.len;
            s.syms[l].piece = bg.merged;
            s.syms[l].next = rs.next;
            s.syms[r].len = 0;
            if let Some(next) = s.syms.get_mut(rs.next as usize) {
                next.prev = bg.left;
            }
            if ls.prev != u32::MAX {
                self.push_pair(s, ls.prev, bg.left);
            }
            if rs.next != u32::MAX {
                self.push_pair(s, bg.left, rs.next);
            }
        }
        let mut i = 0u32;
        let mut start = 0usize;
        while let Some(sym) = s.syms.get(i as usize) {
            let bytes = &word[start..start + sym.len as usize];
            start += sym.len as usize;
            i = sym.next;
            if sym.piece < self.n_vocab {
                out.push(sym.piece);
                continue;
            }
            // Not a token: llama.cpp looks up each byte of the byte-level text on its own.
            s.text.clear();
            match self
                .extra
                .get(sym.piece.wrapping_sub(self.n_vocab) as usize)
            {
                Some(t) => s.text.push_str(t),
                None => encode_bytes(bytes, &mut s.text),
            }
            for &b in s.text.as_bytes() {
                if let Some(id) = std::str::from_utf8(&[b]).ok().and_then(|c| vocab.id(c)) {
                    out.push(id);
                }
            }
        }
    }

    fn push_pair(&self, s: &mut Scratch, left: u32, right: u32) {
        let (l, r) = (s.syms[left as usize], s.syms[right as usize]);
        if let Some((rank, merged)) = self.pair(l.piece, r.piece) {
            s.heap.push(Reverse(Bigram {
                rank,
                left,
                right,
                len: l.len + r.len,
                merged,
            }));
        }
    }
}
