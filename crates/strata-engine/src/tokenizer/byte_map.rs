//! GPT-2's reversible byte <-> printable-character mapping used by byte-level BPE vocabularies.
//!
//! Bytes `!`..`~`, `¡`..`¬` and `®`..`ÿ` stand for themselves; the other 68 bytes map, in
//! order, to U+0100, U+0101, ... (so a space is `Ġ` and a newline `Ċ`). Mirrors
//! `unicode_byte_to_utf8_map` / `unicode_utf8_to_byte_map` in llama.cpp `src/unicode.cpp`.

const fn is_printable_self(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The character each byte stands for.
pub(crate) const BYTE_TO_CHAR: [char; 256] = {
    let mut t = ['\0'; 256];
    let mut next = 256u32;
    let mut b = 0usize;
    while b < 256 {
        let cp = if is_printable_self(b as u8) {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        t[b] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    t
};

/// The bytes that U+0100.. stand for, in order.
const HIGH_TO_BYTE: [u8; 68] = {
    let mut t = [0u8; 68];
    let mut n = 0;
    let mut b = 0usize;
    while b < 256 {
        if !is_printable_self(b as u8) {
            t[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    t
};

/// The byte a character stands for, or `None` when it is not one of the 256 byte characters.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if cp < 256 && is_printable_self(cp as u8) {
        return Some(cp as u8);
    }
    cp.checked_sub(256)
        .and_then(|i| HIGH_TO_BYTE.get(i as usize))
        .copied()
}

/// Appends the byte-level encoding of `bytes` (one character per byte) to `out`.
pub(crate) fn encode_bytes(bytes: &[u8], out: &mut String) {
    out.extend(bytes.iter().map(|&b| BYTE_TO_CHAR[b as usize]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_is_a_bijection_with_gpt2_landmarks() {
        assert_eq!(BYTE_TO_CHAR[b' ' as usize], 'Ġ');
        assert_eq!(BYTE_TO_CHAR[b'\n' as usize], 'Ċ');
        assert_eq!(BYTE_TO_CHAR[b'a' as usize], 'a');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(BYTE_TO_CHAR[b as usize]), Some(b));
        }
        assert_eq!(char_to_byte('中'), None);
    }
}
