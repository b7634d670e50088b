//! Tiles of a quantized matrix product: many weight rows times many activation rows at once,
//! so a weight block is decoded once per tile instead of once per token (prefill).
//!
//! The result of every (row, token) pair equals [`crate::vec_dot`] on the same CPU path
//! bit for bit, so a prompt gives the same logits whether it is run in one batch or token by
//! token. The x86-64 SIMD paths run register-blocked tiles (`tile.rs`: up to 4 rows × 4 tokens)
//! of the formats with a SIMD `vec_dot` kernel: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q4_K, Q5_K,
//! Q6_K and IQ4_XS; the other formats, the NEON path and the scalar path loop over `vec_dot`.
//! On AVX-512, Q4_0, Q5_0, Q8_0 and IQ4_NL sum in block order (the scalar reference's float
//! order) with 16 tokens or 16 rows in the lanes of a register (`x86/block_order.rs`).
//! A small batch (2 to 8 tokens: several sequences decoding together, a speculative verify
//! window) runs row by row instead, each weight block decoded once for every token of the batch
//! and the activations prepared once for all rows (`tile::few`).
//!
//! One token (decode) is a loop of `vec_dot` over the rows. On x86-64 it reads two streams (the
//! rows of the two halves alternate) and asks the memory system for the bytes 2 KiB ahead while
//! it computes the current row: decode streams every weight from DRAM once, and the hardware
//! prefetchers alone leave part of the bandwidth unused (they stop at 4 KiB page boundaries
//! and run only a short way ahead).

// The tile machinery has kernels only on x86-64 so far: the NEON path runs `gemm` as a loop
// over its `vec_dot` (no NEON tiles yet).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
mod tile;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use crate::dispatch::{Kernels, Supported};
use crate::{check_len, dot_f32_with, row_bytes, vec_dot_type, vec_dot_with, Isa, Op, QuantError};
use strata_gguf::GgmlType;
pub(crate) use tile::Job;

/// `out[t·out_stride + r] = vec_dot(ty, w_r, a_t)` for `r < n_rows`, `t < n_tok`.
///
/// `w`: `n_rows` encoded rows of `ty`, back to back; `acts`: `n_tok` rows quantized to
/// `vec_dot_type(ty)` by [`crate::quantize`], back to back, covering the same elements;
/// `out`: at least `(n_tok − 1)·out_stride + n_rows` floats, `out_stride >= n_rows` when
/// `n_tok > 1`. Other entries of `out` are left as they are. Allocates only to grow a per-thread
/// scratch for decoded weights (at most 64 KiB, once per thread).
///
/// ```
/// use strata_quant::{gemm, quantize, vec_dot, GgmlType};
///
/// let (n, n_rows, n_tok) = (256, 3, 2);
/// let w: Vec<f32> = (0..n * n_rows).map(|i| (i as f32 * 0.1).sin()).collect();
/// let mut rows = vec![0u8; n_rows * 144];
/// for (src, dst) in w.chunks(n).zip(rows.chunks_mut(144)) {
///     quantize(GgmlType::Q4_K, src, dst)?;
/// }
/// let mut acts = vec![0u8; n_tok * 292];
/// for (t, dst) in acts.chunks_mut(292).enumerate() {
///     quantize(GgmlType::Q8_K, &vec![t as f32 + 1.0; n], dst)?;
/// }
/// let mut out = vec![0.0f32; n_tok * 4]; // stride 4 > n_rows
/// gemm(GgmlType::Q4_K, &rows, n_rows, &acts, n_tok, &mut out, 4)?;
/// let want = vec_dot(GgmlType::Q4_K, &rows[144..288], &acts[292..])?;
/// assert_eq!(out[4 + 1].to_bits(), want.to_bits());
/// # Ok::<(), strata_quant::QuantError>(())
/// ```
///
/// # Errors
/// [`QuantError::Unsupported`] when `ty` has no activation kernel,
/// [`QuantError::LengthMismatch`] when the lengths disagree (nothing is written then).
pub fn gemm(
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), QuantError> {
    gemm_on(Isa::best(), ty, w, n_rows, acts, n_tok, out, out_stride)
}

/// [`gemm`] on the kernels of `isa`: bit-identical to [`crate::vec_dot_on`] with the same `isa`.
///
/// # Errors
/// As [`gemm`], and [`QuantError::IsaUnavailable`] when this CPU lacks `isa`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_on(
    isa: Isa,
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), QuantError> {
    let cpu = Supported::check(isa)?;
    gemm_with(cpu, ty, w, n_rows, acts, n_tok, out, out_stride)
}

/// [`gemm_on`] on the kernels of `cpu`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_with(
    cpu: impl Kernels,
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), QuantError> {
    let Some(act_ty) = vec_dot_type(ty) else {
        return Err(QuantError::Unsupported { ty, op: Op::VecDot });
    };
    if n_rows == 0 || n_tok == 0 {
        return Ok(());
    }
    let n_blocks = w.len() / n_rows / ty.type_size();
    let (wrb, arb) = (n_blocks * ty.type_size(), n_blocks * act_ty.type_size());
    check_len(ty, "weight rows (bytes)", n_rows * wrb, w.len())?;
    check_len(act_ty, "activation rows (bytes)", n_tok * arb, acts.len())?;
    if n_tok > 1 && out_stride < n_rows {
        check_len(ty, "output stride (floats)", n_rows, out_stride)?;
    }
    let needed = (n_tok - 1) * out_stride + n_rows;
    if out.len() < needed {
        check_len(ty, "output (floats)", needed, out.len())?;
    }
    let job = Job {
        w,
        n_rows,
        acts,
        n_tok,
        out: &mut *out,
        out_stride,
    };
    // One token goes to the tiles only where a kernel asks for it (`Tile::ONE_TOKEN`).
    if cpu.gemm_tiles(ty, job) {
        return Ok(());
    }
    if n_tok == 1 {
        return decode_rows(cpu, ty, w, wrb, acts, &mut out[..n_rows]);
    }
    for t in 0..n_tok {
        let a = &acts[t * arb..(t + 1) * arb];
        let o = &mut out[t * out_stride..t * out_stride + n_rows];
        for (r, y) in o.iter_mut().enumerate() {
            *y = vec_dot_with(cpu, ty, &w[r * wrb..(r + 1) * wrb], a)?;
        }
    }
    Ok(())
}

/// `out[r] = vec_dot(ty, w_r, a)` for every row: the SIMD row loop of `cpu` (which
/// prefetches ahead) where `ty` has one, else one `vec_dot` per row.
fn decode_rows(
    cpu: impl Kernels,
    ty: GgmlType,
    w: &[u8],
    wrb: usize,
    a: &[u8],
    out: &mut [f32],
) -> Result<(), QuantError> {
    if cpu.vec_dot_rows(ty, w, a, out) {
        return Ok(());
    }
    for (r, y) in out.iter_mut().enumerate() {
        *y = vec_dot_with(cpu, ty, &w[r * wrb..(r + 1) * wrb], a)?;
    }
    Ok(())
}

/// `out[t·out_stride + r] = dot_f32(ty, w_r, x_t)` for `r < n_rows`, `t < n_tok`, bit for bit
/// (the float-weight products: F32, F16 and BF16 routers and gates, any type's rows against
/// f32 activations). `w`: `n_rows` encoded rows of `ty`, back to back; `x`: `n_tok` rows of
/// `n` floats; `out` as for [`gemm`]. The x86-64 paths run register tiles for F32, F16 and
/// BF16 weights (each weight vector loaded once for 4 tokens); the rest loops over `dot_f32`.
///
/// # Errors
/// As [`crate::dot_f32`], and [`QuantError::LengthMismatch`] when `w`, `x` or `out` do not
/// hold what `n_rows`, `n`, `n_tok` and `out_stride` say (nothing is written then).
#[allow(clippy::too_many_arguments)]
pub fn gemm_f32(
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    x: &[f32],
    n: usize,
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), QuantError> {
    gemm_f32_on(Isa::best(), ty, w, n_rows, x, n, n_tok, out, out_stride)
}

/// [`gemm_f32`] on the kernels of `isa`: bit-identical to [`crate::dot_f32_on`] with the same
/// `isa`.
///
/// # Errors
/// As [`gemm_f32`], and [`QuantError::IsaUnavailable`] when this CPU lacks `isa`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f32_on(
    isa: Isa,
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    x: &[f32],
    n: usize,
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), QuantError> {
    let cpu = Supported::check(isa)?;
    if n_rows == 0 || n_tok == 0 {
        return Ok(());
    }
    let rb = row_bytes(ty, n)?;
    check_len(ty, "weight rows (bytes)", n_rows * rb, w.len())?;
    check_len(
        GgmlType::F32,
        "activation rows (floats)",
        n_tok * n,
        x.len(),
    )?;
    if n_tok > 1 && out_stride < n_rows {
        check_len(ty, "output stride (floats)", n_rows, out_stride)?;
    }
    let needed = (n_tok - 1) * out_stride + n_rows;
    if out.len() < needed {
        check_len(ty, "output (floats)", needed, out.len())?;
    }
    if crate::dispatch::gemm_f32(cpu, ty, w, n_rows, x, n, n_tok, out, out_stride) {
        return Ok(());
    }
    for t in 0..n_tok {
        let xt = &x[t * n..(t + 1) * n];
        for r in 0..n_rows {
            out[t * out_stride + r] = dot_f32_with(cpu, ty, &w[r * rb..(r + 1) * rb], xt)?;
        }
    }
    Ok(())
}
