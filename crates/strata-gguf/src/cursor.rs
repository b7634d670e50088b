//! Bounds-checked little-endian reads over a byte slice.
//!
//! Every read checks the bytes that remain before touching them, so a length or count taken
//! from the file can never drive an allocation larger than the file itself.

use crate::GgufError;

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Byte offset of the next read.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes; `field` names what is being read for the error.
    pub(crate) fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::malformed(
                self.pos,
                field,
                format!(
                    "truncated: needs {n} bytes, {} left in the file",
                    self.remaining()
                ),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], GgufError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u32(&mut self, field: &str) -> Result<u32, GgufError> {
        self.array(field).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, field: &str) -> Result<u64, GgufError> {
        self.array(field).map(u64::from_le_bytes)
    }

    /// A count or length that must fit in the remaining bytes when each item takes at least
    /// `min_item_bytes`. Returns it as `usize`.
    pub(crate) fn count(&mut self, min_item_bytes: usize, field: &str) -> Result<usize, GgufError> {
        let at = self.pos;
        let n = self.u64(field)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(min_item_bytes.max(1)))
            .is_some_and(|bytes| bytes <= self.remaining());
        if !fits {
            return Err(GgufError::malformed(
                at,
                field,
                format!(
                    "{n} is impossible: only {} bytes are left in the file (at least {min_item_bytes} per item)",
                    self.remaining()
                ),
            ));
        }
        Ok(n as usize)
    }

    /// A GGUF string: `u64` length then UTF-8 bytes.
    pub(crate) fn string(&mut self, field: &str) -> Result<String, GgufError> {
        let at = self.pos;
        let len = self.count(1, field)?;
        let bytes = self.take(len, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => Err(GgufError::malformed(
                at,
                field,
                format!("invalid UTF-8 at string byte {}", e.valid_up_to()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded() {
        let mut c = Cursor::new(&[1, 0, 0, 0, 0xff]);
        assert_eq!(c.u32("x").unwrap(), 1);
        assert!(c.u32("y").is_err());
        assert_eq!(c.u8("z").unwrap(), 0xff);
        let mut c = Cursor::new(&[0xff; 16]);
        let e = c.string("name").unwrap_err().to_string();
        assert!(e.starts_with("byte 0: name: "), "{e}");
    }
}
