//! Dot products of quantized rows: against an f32 vector ([`dot_f32_blocks`]) and against a
//! quantized activation row (the [`VecDot`](crate::VecDot) impls in the submodules).
//!
//! The kernels here are the scalar references. The SIMD versions sit beside them in `x86/`
//! (AVX2, AVX-VNNI, AVX-512) and `aarch64/` (NEON with dotprod), chosen at run time by
//! [`crate::dispatch`] over the byte-row API (`vec_dot`, `quantize`, `dot_f32`); the `VecDot`
//! trait impls stay scalar, and tests/simd.rs compares every path against them.

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
mod iq;
mod k_quants;
mod legacy;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use crate::block::Block;

/// Largest block this crate knows (`QK_K`): the stack buffer of [`dot_f32_blocks`].
const MAX_BLOCK: usize = 256;

/// Number of independent f32 accumulators in [`Lanes`].
pub(crate) const LANES: usize = 16;

/// `LANES` f32 accumulators: enough independent sums to fill several vector registers, so the
/// adds are not serialized on one register's latency (a single accumulator would serialize
/// every add under strict IEEE semantics).
#[derive(Clone, Copy)]
pub(crate) struct Lanes([f32; LANES]);

impl Default for Lanes {
    fn default() -> Self {
        Lanes([0.0; LANES])
    }
}

impl Lanes {
    /// Adds `Σ a[i] * b[i]`; `a.len() == b.len()`, a multiple of `LANES` (any rest is ignored).
    #[inline(always)]
    pub(crate) fn add_dot(&mut self, a: &[f32], b: &[f32]) {
        for (a, b) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
            for ((s, &a), &b) in self.0.iter_mut().zip(a).zip(b) {
                *s += a * b;
            }
        }
    }

    /// The total, summed pairwise.
    #[inline(always)]
    pub(crate) fn sum(self) -> f32 {
        let mut s = self.0;
        let mut width = LANES / 2;
        while width > 0 {
            for k in 0..width {
                s[k] += s[k + width];
            }
            width /= 2;
        }
        s[0]
    }
}

/// Σ dequantized(`blocks`) · `x`, dequantizing one block at a time into a stack buffer (no
/// allocation). `x.len() == blocks.len() * B::BLOCK_SIZE` (panics otherwise).
pub fn dot_f32_blocks<B: Block>(blocks: &[B], x: &[f32]) -> f32 {
    assert_eq!(x.len(), blocks.len() * B::BLOCK_SIZE, "{} dot_f32", B::TYPE);
    let mut buf = [0.0f32; MAX_BLOCK];
    let buf = &mut buf[..B::BLOCK_SIZE];
    let mut acc = Lanes::default();
    for (block, x) in blocks.iter().zip(x.chunks_exact(B::BLOCK_SIZE)) {
        block.dequantize_block(buf);
        acc.add_dot(buf, x);
    }
    acc.sum()
}

/// Σ `a[i] * b[i]` for f32 slices of equal length (any length).
pub fn dot_f32_f32(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot_f32_f32 lengths");
    let split = a.len() / LANES * LANES;
    let mut acc = Lanes::default();
    acc.add_dot(&a[..split], &b[..split]);
    let tail: f32 = a[split..].iter().zip(&b[split..]).map(|(x, y)| x * y).sum();
    acc.sum() + tail
}

/// Σ `a[i] * b[i]` over i8 slices of equal length, exactly, in i32.
#[inline(always)]
pub(crate) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}
