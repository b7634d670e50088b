//! x86-64 SIMD kernels: AVX2 (with AVX-VNNI or AVX-512 VNNI for the integer dots where present)
//! and AVX-512. [`crate::dispatch`] picks one path per process; the scalar kernels in
//! `dot/` are the references every path here is tested against (tests/simd.rs).
//!
//! Layout of the code: each kernel is an `#[inline(always)]` function generic over [`IntDot`]
//! (how u8 × i8 and i16 × i16 products are accumulated), and the `#[target_feature]` entry points
//! at the bottom of this file instantiate them once per instruction set, so every intrinsic is
//! inlined into a function compiled for that set.

pub(crate) mod avx2;
pub(crate) mod avx512;
mod float_tiles;

use std::arch::x86_64::*;

use strata_gguf::GgmlType;

/// Accumulation of 8-bit and 16-bit integer products into i32 lanes, the inner operation of every
/// quantized dot: AVX2's `vpmaddubsw` + `vpmaddwd`, or one VNNI instruction.
pub(crate) trait IntDot {
    /// `acc[i] + Σ_{k<4} a[4i+k] · b[4i+k]`, `a` unsigned, `b` signed bytes. Exact when every
    /// pair sum `a·b + a'·b'` fits i16 (AVX2 saturates there): true for `a <= 128`, `|b| <= 127`.
    unsafe fn dot_u8i8(acc: __m256i, a: __m256i, b: __m256i) -> __m256i;
    /// `acc[i] + a[2i] · b[2i] + a[2i+1] · b[2i+1]` over i16 lanes.
    unsafe fn madd_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i;
    /// For every (row `i`, token `j`) pair of an `R × T` tile, `Σ_r Σ_{k<4} a[i][r][4l+k] ·
    /// b[j][r][4l+k]` in i32 lane `l`: eight registers of products summed per lane. Exact when
    /// `a <= 15` (the bytes of 4-bit quants): then the 16-bit partial sums of AVX2's version
    /// stay within ±30720. The pairs' instructions are interleaved register by register: one
    /// register of every row and every token live at a time, where pair-by-pair sums would
    /// keep a row's or a token's eight registers live at once (more than AVX2's sixteen, so
    /// they spill). `R = T = 1` is one pair's sum.
    ///
    /// A tile of fewer than [`SPLIT_CHAINS_BELOW`] pairs (decode: two rows, one token) sums
    /// each pair's even and odd registers in two chains added at the end: a VNNI instruction's
    /// 5-cycle latency would otherwise bind eight dependent ones a block. Integer sums are
    /// exact in any order, so the lanes are the same.
    #[inline(always)]
    unsafe fn sum8_u8i8_tile<const R: usize, const T: usize>(
        a: [&[__m256i; 8]; R],
        b: [&[__m256i; 8]; T],
    ) -> [[__m256i; T]; R] {
        let mut acc = [[_mm256_setzero_si256(); T]; R];
        if R * T < SPLIT_CHAINS_BELOW {
            let mut odd = [[_mm256_setzero_si256(); T]; R];
            for r in (0..8).step_by(2) {
                for i in 0..R {
                    for j in 0..T {
                        acc[i][j] = Self::dot_u8i8(acc[i][j], a[i][r], b[j][r]);
                        odd[i][j] = Self::dot_u8i8(odd[i][j], a[i][r + 1], b[j][r + 1]);
                    }
                }
            }
            for i in 0..R {
                for j in 0..T {
                    acc[i][j] = _mm256_add_epi32(acc[i][j], odd[i][j]);
                }
            }
            return acc;
        }
        for r in 0..8 {
            for i in 0..R {
                for j in 0..T {
                    acc[i][j] = Self::dot_u8i8(acc[i][j], a[i][r], b[j][r]);
                }
            }
        }
        acc
    }
    /// `Σ_{k<4} a[4i+k]·b[4i+k] + c[4i+k]·d[4i+k]` for each i32 lane `i`, as the path's
    /// *narrow* sums: i32 lanes with VNNI; with AVX2's `vpmaddubsw`, two i16 halves per i32
    /// lane (4 products each) that [`IntDot::widen_narrow`] adds. Narrow sums add lane by lane
    /// ([`IntDot::add_narrow`]) and may be moved between i32 lanes, and stay exact while no i16
    /// half passes ±32767: for `a, c <= 15` and `|b|, |d| <= 128`, up to four narrow sums
    /// added together (16 products a half, at most ±30720).
    #[inline(always)]
    unsafe fn dot2_u8i8_narrow(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        Self::dot_u8i8(Self::dot_u8i8(_mm256_setzero_si256(), a, b), c, d)
    }
    /// The lane-wise sum of two narrow sums ([`IntDot::dot2_u8i8_narrow`]).
    #[inline(always)]
    unsafe fn add_narrow(x: __m256i, y: __m256i) -> __m256i {
        _mm256_add_epi32(x, y)
    }
    /// Narrow sums ([`IntDot::dot2_u8i8_narrow`]) as i32 lanes.
    #[inline(always)]
    unsafe fn widen_narrow(x: __m256i) -> __m256i {
        x
    }
    /// Whether the lattice kernels fetch 4-byte grid points with `vpgatherdd` rather than
    /// scalar loads. Only the AVX-512 path does: built with AVX-512, LLVM turns the scalar loads
    /// into slower split gathers itself, while on AVX2-only CPUs (Intel parts with the GDS
    /// microcode fix) gathers are much slower than loads.
    const GATHER: bool = false;
    /// Whether [`IntDot::dot_u8i8`] saturates its 16-bit pair sums (AVX2's `vpmaddubsw`); the
    /// VNNI instructions sum in 32 bits and do not.
    const SATURATES: bool = false;
}

/// Pairs from which [`IntDot::sum8_u8i8_tile`] keeps one chain a pair: from 4 pairs the
/// tile's independent chains cover the VNNI latency, and twice as many accumulators would
/// not fit AVX2's sixteen registers beside the operands.
const SPLIT_CHAINS_BELOW: usize = 4;

/// AVX2 without VNNI.
pub(crate) struct Madd;
/// AVX-VNNI (VEX-encoded `vpdpbusd` / `vpdpwssd`).
pub(crate) struct AvxVnni;
/// AVX-512 VNNI on 256-bit registers (needs AVX512VL).
pub(crate) struct Avx512Vnni;
/// [`AvxVnni`] with the EVEX encodings of its two instructions (AVX-512 VNNI + VL), which
/// compute the same lanes: the AVX-VNNI path's test twin (`crate::testing::AvxVnniTwin`), for
/// CPUs that cannot run the VEX encodings. Everything else must stay as in `AvxVnni`.
pub(crate) struct AvxVnniEvex;

impl IntDot for Madd {
    const SATURATES: bool = true;
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        let pairs = _mm256_maddubs_epi16(a, b);
        _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
    }
    #[inline(always)]
    unsafe fn madd_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
    }
    #[inline(always)]
    unsafe fn dot2_u8i8_narrow(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        _mm256_add_epi16(_mm256_maddubs_epi16(a, b), _mm256_maddubs_epi16(c, d))
    }
    #[inline(always)]
    unsafe fn add_narrow(x: __m256i, y: __m256i) -> __m256i {
        _mm256_add_epi16(x, y)
    }
    #[inline(always)]
    unsafe fn widen_narrow(x: __m256i) -> __m256i {
        _mm256_madd_epi16(x, _mm256_set1_epi16(1))
    }
    /// Each pair's sums of all eight registers added in i16 (|sum| ≤ 8 · 2 · 15 · 128), then
    /// one `vpmaddwd`: 16 instructions a pair instead of 24.
    #[inline(always)]
    unsafe fn sum8_u8i8_tile<const R: usize, const T: usize>(
        a: [&[__m256i; 8]; R],
        b: [&[__m256i; 8]; T],
    ) -> [[__m256i; T]; R] {
        let mut pairs = [[_mm256_setzero_si256(); T]; R];
        for i in 0..R {
            for j in 0..T {
                pairs[i][j] = _mm256_maddubs_epi16(a[i][0], b[j][0]);
            }
        }
        for r in 1..8 {
            for i in 0..R {
                for j in 0..T {
                    let p = _mm256_maddubs_epi16(a[i][r], b[j][r]);
                    pairs[i][j] = _mm256_add_epi16(pairs[i][j], p);
                }
            }
        }
        // No closures (`map`): they would not inherit the caller's target features.
        for row in pairs.iter_mut() {
            for p in row.iter_mut() {
                *p = _mm256_madd_epi16(*p, _mm256_set1_epi16(1));
            }
        }
        pairs
    }
}

impl IntDot for AvxVnni {
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(acc, a, b)
    }
    #[inline(always)]
    unsafe fn madd_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpwssd_avx_epi32(acc, a, b)
    }
}

impl IntDot for AvxVnniEvex {
    const GATHER: bool = <AvxVnni as IntDot>::GATHER;
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, a, b)
    }
    #[inline(always)]
    unsafe fn madd_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpwssd_epi32(acc, a, b)
    }
}

impl IntDot for Avx512Vnni {
    const GATHER: bool = true;
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, a, b)
    }
    #[inline(always)]
    unsafe fn madd_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpwssd_epi32(acc, a, b)
    }
}

/// Σ of the 8 lanes.
#[inline(always)]
pub(crate) unsafe fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Σ of the 4 lanes.
#[inline(always)]
pub(crate) unsafe fn hsum_ps128(s: __m128) -> f32 {
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// An f16 field as f32, exactly (`read_f16`), by integer bit operations: for fields too close
/// to the end of a row for [`f16x4`].
#[inline(always)]
pub(crate) fn f16(bytes: [u8; 2]) -> f32 {
    crate::block::f16_to_f32(u16::from_le_bytes(bytes))
}

/// The 4 halves at `p` as f32 lanes (F16C; exact): lane 0 is the half at `p`. `p` must have 8
/// readable bytes. A whole 64-bit load on purpose: converting one lane lets LLVM insert the half
/// into an arbitrary live register (`vpinsrw`), often an FMA accumulator, which chains every
/// block onto the previous block's sum.
#[inline(always)]
pub(crate) unsafe fn f16x4(p: *const u8) -> __m128 {
    _mm_cvtph_ps(_mm_loadl_epi64(p.cast()))
}

/// The first byte of a block (where most formats keep their f16 scale).
#[inline(always)]
pub(crate) fn block_ptr<T>(block: &T) -> *const u8 {
    (block as *const T).cast()
}

/// 32 bytes from `p` (any alignment; the caller guarantees 32 readable bytes).
#[inline(always)]
pub(crate) unsafe fn load32<T>(p: *const T) -> __m256i {
    _mm256_loadu_si256(p.cast())
}

/// The 32 nibbles of 16 bytes in ggml's legacy order: byte `j`'s low nibble in lane `j`, its
/// high nibble in lane `j + 16`.
#[inline(always)]
pub(crate) unsafe fn nibbles32(qs: &[u8; 16]) -> __m256i {
    // Both halves hold the 16 bytes; the upper half's dwords shift right by 4 (one variable
    // shift instead of a 128-bit shift and an insert).
    let both = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs.as_ptr().cast()));
    let shifted = _mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f))
}

/// 32 bits (little-endian) as 32 bytes: 0xff where the bit is set, 0 elsewhere.
#[inline(always)]
pub(crate) unsafe fn bytes_from_bits(bits: [u8; 4]) -> __m256i {
    let v = _mm256_set1_epi32(i32::from_le_bytes(bits));
    // Lane j takes byte j / 8 of the word, then keeps only bit j % 8.
    let spread = _mm256_shuffle_epi8(
        v,
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit)
}

/// `x · y` for signed bytes as (|x|, y · sign(x)), the operands `IntDot::dot_u8i8` takes.
#[inline(always)]
pub(crate) unsafe fn sign_split(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
    (_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// How far ahead of the row being computed the row loops prefetch, in bytes. Chosen by
/// measurement (`strata bench --local` on a 17 GB Q4_K MoE file, 2 Zen 4 cores): 2 KiB ahead
/// gave about 10 % more decode speed than none; 1 KiB and 4 KiB were within noise of it.
pub(crate) const PREFETCH_BYTES: usize = 2048;

/// Asks for the cache lines of `w[from..to]` (clipped to `w`) to be brought into L1. A hint
/// only: no fault, no effect on results.
#[inline(always)]
pub(crate) unsafe fn prefetch(w: &[u8], from: usize, to: usize) {
    prefetch_lines::<_MM_HINT_T0>(w, from, to);
}

/// Asks for the cache lines of `w[from..to]` (clipped to `w`) to be brought into L2, leaving
/// L1 to the data being computed on. A hint only: no fault, no effect on results.
#[inline(always)]
pub(crate) unsafe fn prefetch_l2(w: &[u8], from: usize, to: usize) {
    prefetch_lines::<_MM_HINT_T1>(w, from, to);
}

/// `_mm_prefetch` with `STRATEGY` (an `_MM_HINT_*`) for each 64-byte line of `w[from..to]`,
/// clipped to `w`.
#[inline(always)]
unsafe fn prefetch_lines<const STRATEGY: i32>(w: &[u8], from: usize, to: usize) {
    let end = to.min(w.len());
    let mut at = from;
    while at < end {
        _mm_prefetch::<STRATEGY>(w.as_ptr().add(at).cast());
        at += 64;
    }
}

macro_rules! entry_points {
    ($vec_dot:ident, $vec_dot_rows:ident, $quantize:ident, $dot_f32:ident, $features:literal,
     |$ty:ident, $row:ident, $act:ident| $vd:expr,
     |$qty:ident, $src:ident, $dst:ident| $q:expr,
     |$fty:ident, $frow:ident, $x:ident| $f:expr) => {
        /// `vec_dot` on this path; `None` when the type has no kernel here.
        ///
        /// # Safety
        /// The CPU supports every feature in the `target_feature` list; `row` and `act` hold the
        /// same whole number of blocks of `ty` and `vec_dot_type(ty)`.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $vec_dot($ty: GgmlType, $row: &[u8], $act: &[u8]) -> Option<f32> {
            $vd
        }

        /// `out[r]` = `vec_dot` of row `r` of `w` (`out.len()` rows back to back) and `act`.
        /// Decode streams the weights from DRAM, so the loop keeps two streams going (rows of
        /// the first and second half alternate, from 8 rows up) and prefetches the bytes
        /// [`PREFETCH_BYTES`] past each row before computing it: on 2 Zen 4 cores each of the
        /// two gave a few percent more decode speed. `false` when the type has no kernel here
        /// (nothing written).
        ///
        /// # Safety
        /// As for the `vec_dot` entry, for every row; `out` is not empty.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $vec_dot_rows(
            $ty: GgmlType,
            w: &[u8],
            $act: &[u8],
            out: &mut [f32],
        ) -> bool {
            let n = out.len();
            let wrb = w.len() / n;
            // Two streams: rows i and h + i alternate, each prefetched ahead within its half.
            let h = if n >= 8 { n / 2 } else { 0 };
            let (wa, wb) = w.split_at(h * wrb);
            for i in 0..n - h {
                // The second half (from row h) has n - h >= h rows; the first only h.
                for (k, (half, base)) in [(wb, h), (wa, 0)].into_iter().enumerate() {
                    if k == 1 && i >= h {
                        break;
                    }
                    prefetch(
                        half,
                        i * wrb + PREFETCH_BYTES,
                        (i + 1) * wrb + PREFETCH_BYTES,
                    );
                    let $row = &half[i * wrb..(i + 1) * wrb];
                    match $vd {
                        Some(v) => out[base + i] = v,
                        None => return false,
                    }
                }
            }
            true
        }

        /// `quantize` on this path; `false` when the type has no kernel here (nothing written).
        ///
        /// # Safety
        /// As for the `vec_dot` entry; `dst` holds exactly the blocks of `src`.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $quantize($qty: GgmlType, $src: &[f32], $dst: &mut [u8]) -> bool {
            $q
        }

        /// `dot_f32` on this path; `None` when the type has no kernel here.
        ///
        /// # Safety
        /// As for the `vec_dot` entry; `row` holds exactly `x.len()` elements of `ty`.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $dot_f32($fty: GgmlType, $frow: &[u8], $x: &[f32]) -> Option<f32> {
            $f
        }
    };
}

entry_points!(
    vec_dot_avx2,
    vec_dot_rows_avx2,
    quantize_avx2,
    dot_f32_avx2,
    "avx2,fma,f16c",
    |ty, row, act| avx2::vec_dot::<Madd>(ty, row, act),
    |ty, src, dst| avx2::quantize(ty, src, dst),
    |ty, row, x| avx2::dot_f32(ty, row, x)
);

/// The AVX-VNNI path's entry points with `$int_dot` as the integer dot, compiled for
/// `$features`: one definition for the production path and its test twin, so the twin runs the
/// same kernels.
macro_rules! avxvnni_entry_points {
    ($vec_dot:ident, $vec_dot_rows:ident, $quantize:ident, $dot_f32:ident, $features:literal,
     $int_dot:ty) => {
        entry_points!(
            $vec_dot,
            $vec_dot_rows,
            $quantize,
            $dot_f32,
            $features,
            // The lattice types in block order, as the GEMM kernels (`gemm/x86/iq3_xxs_lanes.rs`,
            // `lattice_lanes.rs`).
            |ty, row, act| {
                use crate::{blocks, iq2::BlockIQ2_S, iq3::BlockIQ3_S, iq3::BlockIQ3_XXS};
                use avx2::iq3::block_order;
                match ty {
                    GgmlType::IQ3_XXS => Some(block_order::<BlockIQ3_XXS, $int_dot>(
                        blocks(row),
                        blocks(act),
                    )),
                    GgmlType::IQ3_S => Some(block_order::<BlockIQ3_S, $int_dot>(
                        blocks(row),
                        blocks(act),
                    )),
                    GgmlType::IQ2_S => Some(block_order::<BlockIQ2_S, $int_dot>(
                        blocks(row),
                        blocks(act),
                    )),
                    _ => avx2::vec_dot::<$int_dot>(ty, row, act),
                }
            },
            |ty, src, dst| avx2::quantize(ty, src, dst),
            |ty, row, x| avx2::dot_f32(ty, row, x)
        );
    };
}

avxvnni_entry_points!(
    vec_dot_avxvnni,
    vec_dot_rows_avxvnni,
    quantize_avxvnni,
    dot_f32_avxvnni,
    "avx2,fma,f16c,avxvnni",
    AvxVnni
);

// The AVX-VNNI path again with AVX-512 VNNI's encodings of its two VNNI instructions, for the
// tests only (`crate::testing::AvxVnniTwin`): no CPU the tests run on (nor QEMU) has AVX-VNNI.
avxvnni_entry_points!(
    vec_dot_avxvnni_evex,
    vec_dot_rows_avxvnni_evex,
    quantize_avxvnni_evex,
    dot_f32_avxvnni_evex,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    AvxVnniEvex
);

entry_points!(
    vec_dot_avx512,
    vec_dot_rows_avx512,
    quantize_avx512,
    dot_f32_avx512,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    |ty, row, act| match avx512::vec_dot(ty, row, act) {
        Some(v) => Some(v),
        None => avx2::vec_dot::<Avx512Vnni>(ty, row, act),
    },
    |ty, src, dst| avx2::quantize(ty, src, dst),
    |ty, row, x| match avx512::dot_f32(ty, row, x) {
        Some(v) => Some(v),
        None => avx2::dot_f32(ty, row, x),
    }
);

macro_rules! float_gemm_entry_point {
    ($name:ident, $features:literal, $path:ident) => {
        /// `gemm_f32` on this path: `out[t·stride + r]` = its `dot_f32` of row `r` of `w` and
        /// token `t` of `x`, bit for bit; `false` (nothing written) when the path has no tile
        /// for `ty` or `n`.
        ///
        /// # Safety
        /// The CPU supports every feature in the `target_feature` list; `w` holds `n_rows`
        /// rows of `n` elements of `ty`, `x` `n_tok · n` floats, `out` at least
        /// `(n_tok − 1)·stride + n_rows` floats.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn $name(
            ty: GgmlType,
            w: &[u8],
            n_rows: usize,
            x: &[f32],
            n: usize,
            n_tok: usize,
            out: &mut [f32],
            stride: usize,
        ) -> bool {
            $path::float::gemm(ty, w, n_rows, x, n, n_tok, out, stride)
        }
    };
}

float_gemm_entry_point!(gemm_f32_avx2, "avx2,fma,f16c", avx2);
float_gemm_entry_point!(gemm_f32_avxvnni, "avx2,fma,f16c,avxvnni", avx2);
float_gemm_entry_point!(
    gemm_f32_avx512,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    avx512
);
