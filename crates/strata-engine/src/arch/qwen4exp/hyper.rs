//! A hyper-connection mixer (`Qwen4ExpTextGatedResidual.forward`; llama.cpp `build_hc_mix`):
//! reads the `hc` residual streams into one hidden row for a block, and computes the weights
//! with which the block's output goes back into each stream ([`Backend::hc_expand_add`]).
//!
//! ```text
//! Rn = rms_norm per stream(R) · gamma            [T][hc·H]
//! g  = W_up · silu((W_down · Rn) / hc)           [T][hc·H]
//! x  = (1/hc) · Σ_s σ(g_s) ⊙ Rn_s                [T][H]
//! w  = W_inj · Rn                                [T][hc]  (combine: R_s += 2σ(w_s / hc) · y)
//! ```

use super::weights::HcWeights;
use crate::backend::{Backend, Buf, MatmulTo, Memory};
use crate::config::ModelConfig;
use crate::error::EngineError;

/// Buffers of [`mix`], grown to the largest run and reused.
#[derive(Default)]
pub struct HcScratch<M: Memory> {
    /// Normed streams `[T][hc·H]`.
    rn: M::Buf,
    /// Low-rank activations `[T][rank]`.
    lo: M::Buf,
    /// Stream gate logits `[T][hc·H]`.
    g: M::Buf,
    /// Injection logits `[T][hc]` of the last mixer with an injection.
    pub(super) inj: M::Buf,
}

/// `x` (`[T][H]`, resized) from the residual streams `r` (`[T][hc·H]`) through mixer `w`,
/// and, when `w` has one, the injection logits in `s.inj`.
///
/// Errors: unsupported weight types.
pub(super) fn mix<B: Backend>(
    be: &B,
    cfg: &ModelConfig,
    w: &HcWeights,
    r: &Buf<B>,
    s: &mut HcScratch<B::Mem>,
    x: &mut Buf<B>,
) -> Result<(), EngineError> {
    let hc = cfg.hyper.map_or(1, |h| h.n_streams);
    be.rms_norm_grouped(r, &w.norm, cfg.n_embd, cfg.rms_eps, &mut s.rn);
    // The low-rank down projection and the injection weights read the same normed rows.
    match &w.inject {
        Some(inj) => {
            let mut outs = [
                MatmulTo::new(&w.down, &mut s.lo),
                MatmulTo::new(inj, &mut s.inj),
            ];
            be.matmuls(&mut s.rn, &mut outs)?;
        }
        None => be.matmul(&w.down, None, &mut s.rn, &mut s.lo)?,
    }
    be.scale(&mut s.lo, 1.0 / hc as f32);
    be.silu(&mut s.lo);
    be.matmul(&w.up, None, &mut s.lo, &mut s.g)?;
    be.hc_collapse(&s.rn, &s.g, hc, x);
    Ok(())
}
