//! The block-type traits (candle's `GgmlType` idea, split by capability) and the helpers every
//! block format shares: byte casting, f16 conversion and ggml's rounding.
//!
//! A ggml tensor row is a sequence of fixed-size blocks. Every block struct in this crate is
//! `#[repr(C)]` with only byte-array fields, so its alignment is 1, it has no padding and every
//! bit pattern is a valid value: a row can be viewed in place from any `&[u8]` (an mmapped GGUF
//! file included) with [`cast_blocks`].

use strata_gguf::GgmlType;

/// A ggml block format: its type id, geometry and reference dequantization.
///
/// # Safety
///
/// Implementors must be `#[repr(C)]` structs of `u8`/`i8` arrays only (alignment 1, no padding,
/// valid for every bit pattern) whose size is `Self::TYPE.type_size()`. [`cast_blocks`] relies on
/// this to reinterpret bytes as blocks.
pub unsafe trait Block: Copy + Send + Sync + 'static {
    /// The ggml type this block encodes.
    const TYPE: GgmlType;
    /// Elements per block (32 for the legacy formats and IQ4_NL, 256 for k- and i-quants).
    const BLOCK_SIZE: usize;

    /// Dequantizes one block into `out`, which must hold exactly `BLOCK_SIZE` values
    /// (panics otherwise). The scalar reference: bit-identical to gguf-py where it has the type.
    fn dequantize_block(&self, out: &mut [f32]);

    /// Dequantizes `blocks` into `dst` (`dst.len() == blocks.len() * BLOCK_SIZE`, panics otherwise).
    #[inline]
    fn to_float(blocks: &[Self], dst: &mut [f32]) {
        assert_eq!(
            dst.len(),
            blocks.len() * Self::BLOCK_SIZE,
            "{} to_float",
            Self::TYPE
        );
        for (block, out) in blocks.iter().zip(dst.chunks_exact_mut(Self::BLOCK_SIZE)) {
            block.dequantize_block(out);
        }
    }

    /// A block of zero bytes (a valid block of every format; it dequantizes to zeros).
    #[inline]
    fn zeroed() -> Self {
        // SAFETY: the trait contract says every bit pattern, all zeros included, is a valid Self.
        unsafe { std::mem::zeroed() }
    }
}

/// A block format this crate can produce from f32 values.
pub trait FromFloat: Block {
    /// Quantizes `src` (exactly `BLOCK_SIZE` values, panics otherwise) into one block.
    fn quantize_block(src: &[f32]) -> Self;

    /// Quantizes `src` into `dst` (`src.len() == dst.len() * BLOCK_SIZE`, panics otherwise).
    #[inline]
    fn from_float(src: &[f32], dst: &mut [Self]) {
        assert_eq!(
            src.len(),
            dst.len() * Self::BLOCK_SIZE,
            "{} from_float",
            Self::TYPE
        );
        for (block, x) in dst.iter_mut().zip(src.chunks_exact(Self::BLOCK_SIZE)) {
            *block = Self::quantize_block(x);
        }
    }
}

/// A weight block format with a dot-product kernel against a quantized activation row, as in
/// ggml's `type_traits_cpu[...].vec_dot` / `.vec_dot_type`.
pub trait VecDot: Block {
    /// The activation format the kernel consumes: one `VecDotType` block per `Self` block,
    /// covering the same elements (Q8_0, Q8_1 or Q8_K).
    type VecDotType: FromFloat;

    /// Σ over all elements of dequantized `lhs` times dequantized `rhs`, computed in the integer
    /// domain per block as ggml's `ggml_vec_dot_*_generic` does. `lhs.len() == rhs.len()`
    /// (panics otherwise).
    fn vec_dot(lhs: &[Self], rhs: &[Self::VecDotType]) -> f32;
}

/// Views `bytes` as a slice of blocks in place; `None` when the length is not a whole number of
/// blocks.
#[inline]
pub fn cast_blocks<B: Block>(bytes: &[u8]) -> Option<&[B]> {
    let size = std::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size) {
        return None;
    }
    // SAFETY: `Block`'s contract makes B alignment 1, padding-free and valid for every bit
    // pattern, so any `len / size * size` initialized bytes form `len / size` valid Bs; the
    // lifetime and shared borrow carry over from `bytes`.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<B>(), bytes.len() / size) })
}

/// Views `bytes` as a mutable slice of blocks in place; `None` when the length is not a whole
/// number of blocks.
#[inline]
pub fn cast_blocks_mut<B: Block>(bytes: &mut [u8]) -> Option<&mut [B]> {
    let size = std::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size) {
        return None;
    }
    // SAFETY: as in `cast_blocks`; the exclusive borrow of `bytes` becomes the exclusive borrow
    // of the blocks, and any bytes written through a B are valid u8s.
    Some(unsafe {
        std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<B>(), bytes.len() / size)
    })
}

/// The bytes of `blocks`, as they are stored in a GGUF file.
#[inline]
pub fn blocks_as_bytes<B: Block>(blocks: &[B]) -> &[u8] {
    // SAFETY: B has no padding (Block's contract), so all size_of_val(blocks) bytes are
    // initialized; u8 has alignment 1.
    unsafe {
        std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), std::mem::size_of_val(blocks))
    }
}

/// IEEE half (binary16) bits to f32, exactly (subnormals, infinities and NaN payloads included).
///
/// Branch-light so it vectorizes: the 15 magnitude bits are placed in an f32 and rescaled by
/// 2^112, which is exact for normal and subnormal halves alike; Inf/NaN only need the exponent
/// forced to all ones.
#[inline(always)]
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = ((bits as u32) & 0x8000) << 16;
    let magnitude = ((bits as u32) & 0x7fff) << 13;
    let value = if magnitude >= 0x7c00 << 13 {
        f32::from_bits(magnitude | 0x7f80_0000)
    } else {
        // 2^112 moves the half exponent bias (15) to the f32 bias (127).
        f32::from_bits(magnitude) * f32::from_bits(0x7780_0000)
    };
    f32::from_bits(value.to_bits() | sign)
}

/// f32 to IEEE half bits, rounding to nearest even with overflow to ±Inf, exactly as numpy's
/// `astype(np.float16)` (and ggml's `GGML_FP32_TO_FP16` for non-NaN input). A NaN keeps its sign
/// and top 10 payload bits, a payload that would vanish becoming 1 (numpy's rule).
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    if x.is_nan() {
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let payload = (((bits & 0x007f_ffff) >> 13) as u16).max(1);
        return sign | 0x7c00 | payload;
    }
    half::f16::from_f32(x).to_bits()
}

/// Reads a little-endian f16 field (`ggml_half`) as f32.
#[inline(always)]
pub(crate) fn read_f16(bytes: [u8; 2]) -> f32 {
    f16_to_f32(u16::from_le_bytes(bytes))
}

/// Encodes `x` as a little-endian f16 field.
#[inline]
pub(crate) fn write_f16(x: f32) -> [u8; 2] {
    f32_to_f16(x).to_le_bytes()
}

/// ggml's `nearest_int`: round half to even. ggml adds 1.5·2^23 and reads the mantissa, which
/// is the same for |x| <= 4194303 (its asserted range); outside it this saturates instead.
#[inline(always)]
pub(crate) fn nearest_int(x: f32) -> i32 {
    x.round_ties_even() as i32
}

/// Declares the size a block struct must have and that its alignment is 1, checked at compile
/// time (lib.rs's tests compare the sizes with `GgmlType::type_size`).
macro_rules! assert_block_layout {
    ($block:ty, $size:expr) => {
        const _: () =
            assert!(std::mem::size_of::<$block>() == $size && std::mem::align_of::<$block>() == 1);
    };
}
pub(crate) use assert_block_layout;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_to_f32_is_exact_for_every_half() {
        for bits in 0..=u16::MAX {
            let ours = f16_to_f32(bits);
            let theirs = half::f16::from_bits(bits).to_f32();
            if theirs.is_nan() {
                // `half` quiets signalling NaNs; we keep the payload as numpy does.
                assert!(ours.is_nan(), "{bits:#06x}");
                assert_eq!(ours.to_bits() & 0x803f_ffff, theirs.to_bits() & 0x803f_ffff);
            } else {
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{bits:#06x}");
            }
        }
    }

    #[test]
    fn cast_blocks_needs_whole_blocks_and_round_trips() {
        use crate::BlockQ4_0;
        let bytes: Vec<u8> = (0..36u8).collect();
        assert!(cast_blocks::<BlockQ4_0>(&bytes[..35]).is_none());
        let blocks = cast_blocks::<BlockQ4_0>(&bytes[1..19]).unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].d, [1, 2]);
        assert_eq!(blocks_as_bytes(blocks), &bytes[1..19]);
    }

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(2.4999), 2);
        assert_eq!(nearest_int(-7.6), -8);
    }
}
