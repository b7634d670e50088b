//! Cutting special tokens out of the input before pre-tokenization.
//!
//! Mirrors `llama_vocab::impl::tokenizer_st_partition` in llama.cpp `src/llama-vocab.cpp`:
//! special tokens are taken one after another, longest text first; each claims every
//! non-overlapping occurrence, left to right, that lies wholly inside text no earlier token
//! has claimed. Control and unknown tokens take part only with `parse_special`; user-defined
//! tokens always do. A token with the lstrip (rstrip) attribute also swallows the ASCII
//! whitespace before (after) it.
//!
//! llama.cpp rescans the text once per special token; here one Aho-Corasick pass finds every
//! occurrence of every special token and the claims are then replayed in the same order, which
//! gives the same fragments in time linear in the text (plus the occurrences).

use std::collections::BTreeMap;
use std::ops::Range;

use aho_corasick::AhoCorasick;

use super::vocab::{attr, Vocab};

/// A piece of the input: text still to tokenize, or a special token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(Range<usize>),
    Token(u32),
}

/// The special tokens of one vocabulary, ready to search.
#[derive(Debug)]
pub(crate) struct SpecialMatcher {
    /// Patterns in claiming order; pattern `i` is token `ids[i]`.
    ac: Option<AhoCorasick>,
    ids: Vec<u32>,
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t'..=b'\r')
}

impl SpecialMatcher {
    /// Builds the matcher over `vocab.special_cache`.
    pub fn new(vocab: &Vocab) -> SpecialMatcher {
        let ids = vocab.special_cache.clone();
        let texts = ids.iter().map(|&id| vocab.texts[id as usize].as_str());
        // Building fails only for pathological sizes; then nothing is cut out.
        let ac = AhoCorasick::new(texts).ok();
        SpecialMatcher { ac, ids }
    }

    /// Splits `text` into fragments (empty text gives none).
    pub fn partition(&self, vocab: &Vocab, text: &str, parse_special: bool) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let whole = vec![Fragment::Text(0..text.len())];
        let Some(ac) = &self.ac else { return whole };
        let eligible =
            |id: u32| parse_special || vocab.attr(id) & (attr::CONTROL | attr::UNKNOWN) == 0;
        let mut hits: Vec<(u32, usize, usize)> = ac
            .find_overlapping_iter(text)
            .filter(|m| eligible(self.ids[m.pattern().as_usize()]))
            .map(|m| (m.pattern().as_u32(), m.start(), m.end()))
            .collect();
        if hits.is_empty() {
            return whole;
        }
        hits.sort_unstable();

        let bytes = text.as_bytes();
        let mut raw: BTreeMap<usize, usize> = BTreeMap::from([(0, text.len())]);
        let mut tokens: Vec<(usize, u32)> = Vec::new();
        for (pattern, s, e) in hits {
            let Some((&fs, &fe)) = raw.range(..=s).next_back() else {
                continue;
            };
            if e > fe {
                continue; // crosses a claimed token, or s is inside one
            }
            let id = self.ids[pattern as usize];
            let a = vocab.attr(id);
            raw.remove(&fs);
            let mut left_end = s;
            if a & attr::LSTRIP != 0 {
                while left_end > fs && is_c_space(bytes[left_end - 1]) {
                    left_end -= 1;
                }
            }
            if left_end > fs {
                raw.insert(fs, left_end);
            }
            tokens.push((s, id));
            let mut right_start = e;
            if a & attr::RSTRIP != 0 {
                while right_start < fe && is_c_space(bytes[right_start]) {
                    right_start += 1;
                }
            }
            if right_start < fe {
                raw.insert(right_start, fe);
            }
        }
        let mut out: Vec<(usize, Fragment)> = raw
            .into_iter()
            .map(|(s, e)| (s, Fragment::Text(s..e)))
            .chain(tokens.into_iter().map(|(s, id)| (s, Fragment::Token(id))))
            .collect();
        out.sort_unstable_by_key(|(s, _)| *s);
        out.into_iter().map(|(_, f)| f).collect()
    }
}
