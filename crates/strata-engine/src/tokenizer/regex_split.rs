//! General pre-tokenizer patterns, run the way llama.cpp runs them through `std::regex`.
//!
//! Mirrors the fallback path of `unicode_regex_split` in llama.cpp `src/unicode.cpp`. A pattern
//! that uses `\p{N}`, `\p{L}`, `\p{P}`, `\p{M}`, `\p{S}` (or `\p{Lu}` etc., all read as
//! letters) runs on a "collapsed" text: ASCII stays as is, non-ASCII whitespace becomes `\x0B`,
//! and every other non-ASCII code point becomes one stand-in character per category; each
//! `\p{..}` becomes a class of that stand-in plus the ASCII members of the category. Other
//! patterns run on the text with non-ASCII whitespace turned into `\x0B`. A stage splits each
//! piece into its matches and the unmatched gaps between them.

use std::ops::Range;

use fancy_regex::Regex;

use super::pretokenize::Chars;
use super::unicode::CpFlags;

/// Stand-ins for the categories (llama.cpp uses the bytes 0xD0..0xD5; private-use code points
/// keep the text valid UTF-8 here).
const OTHER: char = '\u{E0D0}';

fn stand_in(category: u16) -> char {
    match category {
        CpFlags::NUMBER => '\u{E0D1}',
        CpFlags::LETTER => '\u{E0D2}',
        CpFlags::PUNCTUATION => '\u{E0D3}',
        CpFlags::MARK => '\u{E0D4}',
        CpFlags::SYMBOL => '\u{E0D5}',
        _ => OTHER,
    }
}

/// `\p{..}` names llama.cpp rewrites, with their category.
const CATEGORIES: &[(&str, u16)] = &[
    (r"\p{N}", CpFlags::NUMBER),
    (r"\p{L}", CpFlags::LETTER),
    (r"\p{P}", CpFlags::PUNCTUATION),
    (r"\p{M}", CpFlags::MARK),
    (r"\p{S}", CpFlags::SYMBOL),
    (r"\p{Lu}", CpFlags::LETTER),
    (r"\p{Ll}", CpFlags::LETTER),
    (r"\p{Lt}", CpFlags::LETTER),
    (r"\p{Lm}", CpFlags::LETTER),
    (r"\p{Lo}", CpFlags::LETTER),
];

/// The ASCII members of each category, as class contents.
fn ascii_members(category: u16) -> &'static str {
    match category {
        CpFlags::NUMBER => "0-9",
        CpFlags::LETTER => "A-Za-z",
        CpFlags::PUNCTUATION => r"!-#%-*,-/:-;?-@\[-\]_\{\}",
        CpFlags::SYMBOL => r"\$\+<->\^`\|~",
        _ => "",
    }
}

/// One compiled general pattern.
#[derive(Debug)]
pub(crate) struct RegexStage {
    re: Regex,
    collapsed: bool,
}

impl RegexStage {
    /// Compiles `pattern`, rewriting its unicode categories when it uses any; the error is
    /// the regex compiler's message.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let collapsed = CATEGORIES.iter().any(|(name, _)| pattern.contains(name));
        let source = if collapsed {
            rewrite_categories(pattern)
        } else {
            pattern.to_string()
        };
        Ok(RegexStage {
            re: Regex::new(&source).map_err(|e| e.to_string())?,
            collapsed,
        })
    }

    /// True when the pattern runs on the collapsed text.
    pub fn uses_categories(&self) -> bool {
        self.collapsed
    }

    /// Pushes the ends (code point indices) of the matches and gaps of `range` onto `out`.
    pub fn split(&self, text: &CollapsedText, range: Range<usize>, out: &mut Vec<usize>) {
        let base = text.offsets[range.start];
        let hay = &text.text[base..text.offsets[range.end]];
        let mut done = range.start;
        for m in self.re.find_iter(hay) {
            // A pattern too costly to finish leaves the rest of the piece whole.
            let Ok(m) = m else { break };
            let (s, e) = (text.index(base + m.start()), text.index(base + m.end()));
            if s > done {
                out.push(s);
            }
            if e > s {
                out.push(e);
            }
            done = e;
        }
        if done < range.end {
            out.push(range.end);
        }
    }
}

/// llama.cpp's rewrite: `\p{X}` becomes `[stand-in ascii]`, or just `stand-in ascii` inside
/// a bracket expression.
fn rewrite_categories(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut inside = false;
    let mut rest = pattern;
    let mut prev = '\0';
    while let Some(c) = rest.chars().next() {
        if let Some(&(name, cat)) = CATEGORIES
            .iter()
            .filter(|(name, _)| rest.starts_with(name))
            .max_by_key(|(name, _)| name.len())
        {
            if !inside {
                out.push('[');
            }
            out.push(stand_in(cat));
            out.push_str(ascii_members(cat));
            if !inside {
                out.push(']');
            }
            rest = &rest[name.len()..];
            prev = '}';
            continue;
        }
        if c == '[' && prev != '\\' {
            inside = true;
        } else if c == ']' && inside && prev != '\\' {
            inside = false;
        }
        out.push(c);
        prev = c;
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The text a [`RegexStage`] searches, with a map back to code point indices.
pub(crate) struct CollapsedText {
    text: String,
    /// Byte offset in `text` of each code point, plus the end.
    offsets: Vec<usize>,
}

impl CollapsedText {
    /// The collapsed view (`categories`) or the whitespace-only view of `chars`.
    pub fn new(chars: &Chars, categories: bool) -> Self {
        let mut text = String::with_capacity(chars.text.len());
        let mut offsets = Vec::with_capacity(chars.cps.len() + 1);
        for (&c, &f) in chars.cps.iter().zip(&chars.flags) {
            offsets.push(text.len());
            text.push(if (c as u32) < 128 {
                c
            } else if f.is_whitespace() {
                '\u{0B}'
            } else if categories {
                stand_in(f.category())
            } else {
                c
            });
        }
        offsets.push(text.len());
        CollapsedText { text, offsets }
    }

    /// The code point index at byte offset `byte` (always a code point boundary).
    fn index(&self, byte: usize) -> usize {
        self.offsets.partition_point(|&o| o < byte)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_rewritten_inside_and_outside_classes() {
        assert_eq!(rewrite_categories(r"\p{N}+"), "[\u{E0D1}0-9]+");
        assert_eq!(rewrite_categories(r"[^\s\p{L}]"), "[^\\s\u{E0D2}A-Za-z]");
        assert_eq!(rewrite_categories(r"\p{Lu}"), "[\u{E0D2}A-Za-z]");
    }
}
