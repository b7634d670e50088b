//! Code point classes used by the pre-tokenizers, exactly as llama.cpp classifies them.
//!
//! Mirrors `unicode_cpt_flags` in llama.cpp `src/unicode.h` / `src/unicode.cpp`: one general
//! category bit per code point (from [`super::unicode_table`]) plus a whitespace bit for the
//! 25 code points of Unicode's `White_Space` property.

use super::unicode_table::RANGES;

/// Category and whitespace bits of one code point; `CpFlags::NONE` (all zero) stands for
/// "outside the text" so that look-ahead past the end of a chunk matches no class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpFlags(u16);

impl CpFlags {
    /// Outside the text being split.
    pub const NONE: CpFlags = CpFlags(0);
    pub const UNDEFINED: u16 = 0x01;
    pub const NUMBER: u16 = 0x02;
    pub const LETTER: u16 = 0x04;
    // 0x08 separator (\p{Z}) and 0x80 control (\p{C}) are never tested on their own.
    pub const MARK: u16 = 0x10;
    pub const PUNCTUATION: u16 = 0x20;
    pub const SYMBOL: u16 = 0x40;
    pub const WHITESPACE: u16 = 0x100;
    const CATEGORIES: u16 = 0xFF;

    /// The flags of `c`.
    pub fn of(c: char) -> CpFlags {
        let cp = c as u32;
        if cp < 128 {
            return CpFlags(ASCII[cp as usize]);
        }
        CpFlags(
            category(cp)
                | if is_whitespace(cp) {
                    Self::WHITESPACE
                } else {
                    0
                },
        )
    }

    /// True for [`CpFlags::NONE`].
    pub fn is_none(self) -> bool {
        self.0 == 0
    }
    pub fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    pub fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    pub fn is_mark(self) -> bool {
        self.0 & Self::MARK != 0
    }
    pub fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }

    /// The single category bit (llama.cpp `category_flag()`).
    pub fn category(self) -> u16 {
        self.0 & Self::CATEGORIES
    }
}

/// Flags of the 128 ASCII code points, computed at compile time from the same table.
const ASCII: [u16; 128] = {
    let mut t = [0u16; 128];
    let mut cp = 0;
    while cp < 128 {
        let mut i = 0;
        while i + 1 < RANGES.len() && RANGES[i + 1].0 <= cp as u32 {
            i += 1;
        }
        let ws = matches!(cp, 0x09..=0x0D | 0x20);
        t[cp] = RANGES[i].1 as u16 | if ws { CpFlags::WHITESPACE } else { 0 };
        cp += 1;
    }
    t
};

fn category(cp: u32) -> u16 {
    // RANGES[0] starts at 0, so the partition point is at least 1.
    let i = RANGES.partition_point(|&(start, _)| start <= cp);
    RANGES
        .get(i.wrapping_sub(1))
        .map_or(CpFlags::UNDEFINED, |r| r.1 as u16)
}

/// The non-ASCII members of llama.cpp's `unicode_set_whitespace`.
fn is_whitespace(cp: u32) -> bool {
    matches!(
        cp,
        0x85 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_llama_cpp_tables() {
        assert!(CpFlags::of('a').is_letter());
        assert!(CpFlags::of('Ж').is_letter());
        assert!(CpFlags::of('中').is_letter());
        assert!(CpFlags::of('7').is_number());
        assert!(CpFlags::of('٣').is_number());
        assert!(CpFlags::of(' ').is_whitespace());
        assert!(CpFlags::of('\u{3000}').is_whitespace());
        assert!(CpFlags::of('\u{301}').is_mark());
        assert_eq!(CpFlags::of('!').category(), CpFlags::PUNCTUATION);
        assert_eq!(CpFlags::of('$').category(), CpFlags::SYMBOL);
        assert_eq!(CpFlags::of('🦙').category(), CpFlags::SYMBOL);
        assert!(!CpFlags::of('\u{10FFFF}').is_none());
    }
}
