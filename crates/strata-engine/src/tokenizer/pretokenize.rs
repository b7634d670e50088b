//! Splitting text into words before byte-level BPE.
//!
//! Mirrors `unicode_regex_split` in llama.cpp `src/unicode.cpp`: the stages of a [`PreType`]
//! run in order, each splitting every piece of the previous stage, so no word crosses an
//! earlier boundary. The GPT-2 and llama3/qwen2 patterns are hand-written scanners (as in
//! llama.cpp, whose quirks they keep: look-ahead stops at the end of the current piece); any
//! other pattern goes through [`RegexStage`].

use std::ops::Range;

use super::pre_types::{PreType, Stage};
use super::regex_split::{CollapsedText, RegexStage};
use super::unicode::CpFlags;
use super::TokenizerError;

/// A compiled pre-tokenizer.
#[derive(Debug)]
pub(crate) struct PreTokenizer {
    stages: Vec<CompiledStage>,
}

#[derive(Debug)]
enum CompiledStage {
    Gpt2,
    Words { max_digits: usize, marks: bool },
    Newlines,
    Regex(RegexStage),
}

/// The code points of one text with their classes and byte offsets.
pub(crate) struct Chars<'a> {
    pub text: &'a str,
    pub cps: Vec<char>,
    pub flags: Vec<CpFlags>,
    /// Byte offset of each code point, plus the text length at the end.
    pub offsets: Vec<usize>,
}

impl<'a> Chars<'a> {
    fn new(text: &'a str) -> Self {
        let mut cps = Vec::with_capacity(text.len());
        let mut offsets = Vec::with_capacity(text.len() + 1);
        for (i, c) in text.char_indices() {
            cps.push(c);
            offsets.push(i);
        }
        offsets.push(text.len());
        let flags = cps.iter().map(|&c| CpFlags::of(c)).collect();
        Chars {
            text,
            cps,
            flags,
            offsets,
        }
    }
}

impl PreTokenizer {
    /// Compiles the stages of `pre` (named `name` in errors).
    pub fn new(name: &str, pre: &PreType) -> Result<Self, TokenizerError> {
        let stages = pre
            .stages
            .iter()
            .map(|s| {
                Ok(match *s {
                    Stage::Gpt2 => CompiledStage::Gpt2,
                    Stage::Words { max_digits, marks } => {
                        CompiledStage::Words { max_digits, marks }
                    }
                    Stage::Newlines => CompiledStage::Newlines,
                    Stage::Regex(p) => CompiledStage::Regex(RegexStage::new(p).map_err(|e| {
                        TokenizerError::Regex {
                            pre: name.to_string(),
                            pattern: p.to_string(),
                            reason: e,
                        }
                    })?),
                })
            })
            .collect::<Result<_, TokenizerError>>()?;
        Ok(PreTokenizer { stages })
    }

    /// The byte ranges of the words of `text`, in order, covering it exactly.
    pub fn split(&self, text: &str) -> Vec<Range<usize>> {
        let chars = Chars::new(text);
        let n = chars.cps.len();
        let mut ends = if n == 0 { vec![] } else { vec![n] };
        let mut collapsed: [Option<CollapsedText>; 2] = [None, None];
        for stage in &self.stages {
            let mut next = Vec::with_capacity(ends.len() * 2);
            let mut start = 0;
            for &end in &ends {
                match stage {
                    CompiledStage::Gpt2 => split_gpt2(&chars, start..end, &mut next),
                    CompiledStage::Words { max_digits, marks } => {
                        split_words(&chars, start..end, *max_digits, *marks, &mut next)
                    }
                    CompiledStage::Newlines => split_newlines(&chars, start..end, &mut next),
                    CompiledStage::Regex(re) => {
                        let slot = &mut collapsed[usize::from(re.uses_categories())];
                        let view = slot.get_or_insert_with(|| {
                            CollapsedText::new(&chars, re.uses_categories())
                        });
                        re.split(view, start..end, &mut next)
                    }
                }
                start = end;
            }
            ends = next;
        }
        let mut start = 0;
        ends.into_iter()
            .map(|end| {
                let r = chars.offsets[start]..chars.offsets[end];
                start = end;
                r
            })
            .collect()
    }
}

/// A view of one piece `[ini, end)`: outside it, code points read as `None` and flags as NONE.
struct Piece<'c, 'a> {
    chars: &'c Chars<'a>,
    ini: usize,
    end: usize,
}

impl Piece<'_, '_> {
    fn cp(&self, pos: usize) -> Option<char> {
        (self.ini <= pos && pos < self.end).then(|| self.chars.cps[pos])
    }
    fn flags(&self, pos: usize) -> CpFlags {
        if self.ini <= pos && pos < self.end {
            self.chars.flags[pos]
        } else {
            CpFlags::NONE
        }
    }
    /// Length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`) at `pos`.
    fn contraction(&self, pos: usize, any_case: bool) -> usize {
        if self.cp(pos) != Some('\'') {
            return 0;
        }
        let low = |p: usize| {
            self.cp(p)
                .map(|c| if any_case { c.to_ascii_lowercase() } else { c })
        };
        match low(pos + 1) {
            Some('s' | 't' | 'm' | 'd') => 2,
            Some(a) => match (a, low(pos + 2)) {
                ('r', Some('e')) | ('v', Some('e')) | ('l', Some('l')) => 3,
                _ => 0,
            },
            None => 0,
        }
    }
    fn whitespace_run(&self, pos: usize) -> usize {
        (pos..self.end)
            .take_while(|&p| self.chars.flags[p].is_whitespace())
            .count()
    }
}

fn is_cr_lf(c: Option<char>) -> bool {
    matches!(c, Some('\r' | '\n'))
}

/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
fn split_gpt2(chars: &Chars, range: Range<usize>, out: &mut Vec<usize>) {
    let p = Piece {
        chars,
        ini: range.start,
        end: range.end,
    };
    let other = |f: CpFlags| !(f.is_whitespace() || f.is_letter() || f.is_number() || f.is_none());
    let mut pos = p.ini;
    while pos < p.end {
        let start = pos;
        let space = p.cp(pos) == Some(' ');
        let f2 = if space {
            p.flags(pos + 1)
        } else {
            p.flags(pos)
        };
        let n = p.contraction(pos, false);
        if n > 0 {
            pos += n;
        } else if f2.is_letter() || f2.is_number() || other(f2) {
            let class = |f: CpFlags| {
                if f2.is_letter() {
                    f.is_letter()
                } else if f2.is_number() {
                    f.is_number()
                } else {
                    other(f)
                }
            };
            pos += usize::from(space);
            while class(p.flags(pos)) {
                pos += 1;
            }
        } else {
            let ws = p.whitespace_run(pos);
            pos += match ws {
                0 => 1,
                // `\s+(?!\S)`: leave the last space to the word that follows
                _ if ws > 1 && pos + ws < p.end => ws - 1,
                _ => ws,
            };
        }
        debug_assert!(pos > start);
        out.push(pos);
    }
}

/// The llama3 (`max_digits` 3), qwen2 (1) and qwen35 (1, `marks`) patterns; see [`Stage::Words`].
fn split_words(
    chars: &Chars,
    range: Range<usize>,
    max_digits: usize,
    marks: bool,
    out: &mut Vec<usize>,
) {
    let p = Piece {
        chars,
        ini: range.start,
        end: range.end,
    };
    let letter = |f: CpFlags| f.is_letter() || (marks && f.is_mark());
    let other = |f: CpFlags| !(f.is_whitespace() || letter(f) || f.is_number() || f.is_none());
    let mut pos = p.ini;
    while pos < p.end {
        let cp = p.cp(pos);
        let flags = p.flags(pos);
        let n = p.contraction(pos, true);
        if n > 0 {
            pos += n;
            out.push(pos);
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(is_cr_lf(cp) || flags.is_number()) && (letter(flags) || letter(p.flags(pos + 1))) {
            pos += 1;
            while letter(p.flags(pos)) {
                pos += 1;
            }
            out.push(pos);
            continue;
        }
        // \p{N}{1,max_digits}
        if flags.is_number() {
            let mut run = 0;
            while p.flags(pos).is_number() {
                pos += 1;
                run += 1;
                if run == max_digits {
                    out.push(pos);
                    run = 0;
                }
            }
            if run > 0 {
                out.push(pos);
            }
            continue;
        }
        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        let space = cp == Some(' ');
        let f2 = if space { p.flags(pos + 1) } else { flags };
        if !(f2.is_whitespace() || letter(f2) || f2.is_number() || flags.is_none()) {
            pos += usize::from(space);
            while other(p.flags(pos)) {
                pos += 1;
            }
            while is_cr_lf(p.cp(pos)) {
                pos += 1;
            }
            out.push(pos);
            continue;
        }
        let ws = p.whitespace_run(pos);
        let last_newline = (pos..pos + ws).rev().find(|&q| is_cr_lf(p.cp(q)));
        pos = match last_newline {
            // \s*[\r\n]+
            Some(q) => q + 1,
            None if ws == 0 => pos + 1,
            // \s+(?!\S)
            None if ws > 1 && pos + ws < p.end => pos + ws - 1,
            None => pos + ws,
        };
        out.push(pos);
    }
}

/// `[^\n]+|[\n]+`
fn split_newlines(chars: &Chars, range: Range<usize>, out: &mut Vec<usize>) {
    let mut pos = range.start;
    while pos < range.end {
        let nl = chars.cps[pos] == '\n';
        while pos < range.end && (chars.cps[pos] == '\n') == nl {
            pos += 1;
        }
        out.push(pos);
    }
}

#[cfg(test)]
mod tests {
    use super::super::pre_types::{lookup, ALL_STAGE_LISTS};
    use super::*;

    fn words(pre: &str, text: &str) -> Vec<String> {
        let p = PreTokenizer::new(pre, &lookup(pre).unwrap()).unwrap();
        p.split(text)
            .into_iter()
            .map(|r| text[r].to_string())
            .collect()
    }

    #[test]
    fn every_pattern_compiles() {
        for stages in ALL_STAGE_LISTS {
            let pre = PreType {
                stages,
                ..lookup("default").unwrap()
            };
            PreTokenizer::new("test", &pre).unwrap();
        }
    }

    #[test]
    fn llama3_splits_digits_by_three_and_keeps_newline_runs() {
        assert_eq!(
            words("llama-bpe", "Hello world's 1234567\n\n  x"),
            ["Hello", " world", "'s", " ", "123", "456", "7", "\n\n", " ", " x"]
        );
    }

    #[test]
    fn gpt2_and_starcoder_differ_on_digits() {
        assert_eq!(words("gpt-2", "ab 123  c"), ["ab", " 123", " ", " c"]);
        assert_eq!(words("smollm", "ab 123"), ["ab", " ", "1", "2", "3"]);
    }

    #[test]
    fn qwen35_keeps_marks_with_letters() {
        assert_eq!(
            words("qwen35", "e\u{301}x 12"),
            ["e\u{301}x", " ", "1", "2"]
        );
        assert_eq!(words("qwen2", "e\u{301}x"), ["e", "\u{301}x"]);
    }
}
