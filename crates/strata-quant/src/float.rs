//! The unquantized element types F32, F16 and BF16 (block size 1), stored little-endian.
//!
//! Conversions to f32 are exact. F16 encoding rounds to nearest even (numpy's
//! `astype(np.float16)`); BF16 encoding is gguf-py's / ggml's `fp32_to_bf16`: round to nearest
//! even, NaN forced quiet.
//!
//! BF16 is also an activation format: ggml pairs BF16 weights with BF16 activations
//! (`vec_dot_type` in ggml-cpu's `type_traits_cpu`), and [`dot_bf16`] is the scalar reference
//! of that pair's `vec_dot` (ggml-cpu/vec.cpp `ggml_vec_dot_bf16`).

use crate::block::{f16_to_f32, f32_to_f16};
use crate::dot::{Lanes, LANES};

/// Elements converted per stack chunk in [`dot`].
const CHUNK: usize = 256;

/// A little-endian float encoding of `N` bytes per element.
pub(crate) trait FloatCodec<const N: usize> {
    fn decode(bytes: [u8; N]) -> f32;
    fn encode(x: f32) -> [u8; N];
}

/// F32 (`ggml_type` 0).
pub(crate) struct F32;
/// F16, IEEE binary16 (`ggml_type` 1).
pub(crate) struct F16;
/// BF16, the top half of an f32 (`ggml_type` 30).
pub(crate) struct BF16;

impl FloatCodec<4> for F32 {
    #[inline(always)]
    fn decode(bytes: [u8; 4]) -> f32 {
        f32::from_le_bytes(bytes)
    }
    #[inline(always)]
    fn encode(x: f32) -> [u8; 4] {
        x.to_le_bytes()
    }
}

impl FloatCodec<2> for F16 {
    #[inline(always)]
    fn decode(bytes: [u8; 2]) -> f32 {
        f16_to_f32(u16::from_le_bytes(bytes))
    }
    #[inline(always)]
    fn encode(x: f32) -> [u8; 2] {
        f32_to_f16(x).to_le_bytes()
    }
}

impl FloatCodec<2> for BF16 {
    #[inline(always)]
    fn decode(bytes: [u8; 2]) -> f32 {
        f32::from_bits((u16::from_le_bytes(bytes) as u32) << 16)
    }
    #[inline(always)]
    fn encode(x: f32) -> [u8; 2] {
        f32_to_bf16(x).to_le_bytes()
    }
}

/// f32 to bf16 bits: NaN becomes a quiet NaN with the same sign and top payload bits,
/// everything else rounds to nearest even (overflowing to ±Inf).
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    let n = x.to_bits();
    if n & 0x7fff_ffff > 0x7f80_0000 {
        return ((n >> 16) | 0x0040) as u16;
    }
    ((n as u64 + (0x7fff + ((n >> 16) & 1) as u64)) >> 16) as u16
}

/// Decodes `src` (`N` bytes per element, `src.len() == N * dst.len()`) into `dst`.
#[inline]
pub(crate) fn decode<C: FloatCodec<N>, const N: usize>(src: &[u8], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), N * dst.len());
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(N)) {
        *o = C::decode(b.try_into().unwrap());
    }
}

/// Encodes `src` into `dst` (`dst.len() == N * src.len()`).
#[inline]
pub(crate) fn encode<C: FloatCodec<N>, const N: usize>(src: &[f32], dst: &mut [u8]) {
    debug_assert_eq!(dst.len(), N * src.len());
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(N)) {
        b.copy_from_slice(&C::encode(*x));
    }
}

/// Σ decoded(`src`) · `x` without allocating: decodes `CHUNK` elements at a time on the stack.
pub(crate) fn dot<C: FloatCodec<N>, const N: usize>(src: &[u8], x: &[f32]) -> f32 {
    debug_assert_eq!(src.len(), N * x.len());
    let mut buf = [0.0f32; CHUNK];
    let mut acc = Lanes::default();
    let mut tail = 0.0f32;
    for (src, x) in src.chunks(N * CHUNK).zip(x.chunks(CHUNK)) {
        let buf = &mut buf[..x.len()];
        decode::<C, N>(src, buf);
        let split = x.len() / LANES * LANES;
        acc.add_dot(&buf[..split], &x[..split]);
        tail += buf[split..]
            .iter()
            .zip(&x[split..])
            .map(|(a, b)| a * b)
            .sum::<f32>();
    }
    acc.sum() + tail
}

/// Σ bf16(`w`) · bf16(`a`) over two BF16 rows of equal length (`w.len() == a.len()`, even), the
/// scalar reference of ggml's `ggml_vec_dot_bf16`. Each product of two bf16 values is exact in
/// f32 (8-bit significands; barring overflow and underflow), so only the summation order
/// differs from ggml's (which sums in f64 in its scalar loop, in f32 lanes in its SIMD ones).
/// Allocation-free: decodes `CHUNK` elements of each row at a time on the stack.
pub(crate) fn dot_bf16(w: &[u8], a: &[u8]) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let (mut wb, mut ab) = ([0.0f32; CHUNK], [0.0f32; CHUNK]);
    let mut acc = Lanes::default();
    let mut tail = 0.0f32;
    for (w, a) in w.chunks(2 * CHUNK).zip(a.chunks(2 * CHUNK)) {
        let n = w.len() / 2;
        let (wb, ab) = (&mut wb[..n], &mut ab[..n]);
        decode::<BF16, 2>(w, wb);
        decode::<BF16, 2>(a, ab);
        let split = n / LANES * LANES;
        acc.add_dot(&wb[..split], &ab[..split]);
        tail += wb[split..]
            .iter()
            .zip(&ab[split..])
            .map(|(w, a)| w * a)
            .sum::<f32>();
    }
    acc.sum() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even_and_quiets_nan() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to the even one (1.0).
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(f32_to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80);
    }

    #[test]
    fn bf16_dot_is_exact_on_small_integers() {
        // Every product and partial sum is an integer below 2^24: exact in any order.
        let (w, a): (Vec<f32>, Vec<f32>) = (0..1000)
            .map(|i| ((i % 17) as f32 - 8.0, (i % 13) as f32 - 6.0))
            .unzip();
        let bytes = |v: &[f32]| -> Vec<u8> {
            v.iter()
                .flat_map(|x| f32_to_bf16(*x).to_le_bytes())
                .collect()
        };
        let want: f32 = w.iter().zip(&a).map(|(w, a)| w * a).sum();
        assert_eq!(dot_bf16(&bytes(&w), &bytes(&a)), want);
    }
}
