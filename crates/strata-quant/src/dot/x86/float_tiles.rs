//! The tile loop of the float-weight products ([`crate::gemm_f32`]): `R` rows × 4 tokens at a
//! time, rows and tokens left over at the edges as 1-row and 1-token tiles. Each path's
//! `float.rs` supplies the tile ([`FloatTile`]), which mirrors that path's `dot_f32` kernel.

use std::array;

/// One path's register tile of `dot_f32`.
pub(crate) trait FloatTile<W> {
    /// `dot_f32` of rows × tokens of `n` elements, bit for bit: `[row][token]`.
    ///
    /// # Safety
    /// The path's CPU features are available; every row and token holds `n` elements.
    unsafe fn tile<const R: usize, const T: usize>(
        rows: &[W; R],
        toks: &[*const f32; T],
        n: usize,
    ) -> [[f32; T]; R];
}

/// A float product: `n_rows` weight rows of `n` elements (`w`, back to back), `n_tok` token
/// rows (`x`), results at `out[t·stride + r]`. The caller checked the lengths.
pub(crate) struct Operands<'a> {
    pub w: &'a [u8],
    pub n_rows: usize,
    pub x: &'a [f32],
    pub n: usize,
    pub n_tok: usize,
    pub out: &'a mut [f32],
    pub stride: usize,
}

/// Tokens per tile.
const T: usize = 4;

impl<'a> Operands<'a> {
    /// Every (row, token) pair in tiles of `R` rows × [`T`] tokens, each row read through
    /// `make` (its element type's loader).
    ///
    /// # Safety
    /// As for [`FloatTile::tile`]; `out` holds `(n_tok − 1)·stride + n_rows` floats.
    #[inline(always)]
    pub unsafe fn run<W, K: FloatTile<W>, const R: usize>(self, make: fn(&'a [u8]) -> W) {
        let rb = self.w.len() / self.n_rows;
        let (rows_r, toks_t) = (self.n_rows / R * R, self.n_tok / T * T);
        let row = |r: usize| make(&self.w[r * rb..(r + 1) * rb]);
        let tok = |t: usize| self.x.as_ptr().add(t * self.n);
        let (n, stride, n_tok) = (self.n, self.stride, self.n_tok);
        let out = self.out.as_mut_ptr();
        // No closure runs the kernels (it would not inherit the caller's target features).
        for r in (0..rows_r).step_by(R) {
            let rows: [W; R] = array::from_fn(|i| row(r + i));
            for t in (0..toks_t).step_by(T) {
                let toks: [*const f32; T] = array::from_fn(|j| tok(t + j));
                store(out, stride, r, t, K::tile(&rows, &toks, n));
            }
            for t in toks_t..n_tok {
                store(out, stride, r, t, K::tile(&rows, &[tok(t)], n));
            }
        }
        for r in rows_r..self.n_rows {
            let rows = [row(r)];
            for t in (0..toks_t).step_by(T) {
                let toks: [*const f32; T] = array::from_fn(|j| tok(t + j));
                store(out, stride, r, t, K::tile(&rows, &toks, n));
            }
            for t in toks_t..n_tok {
                store(out, stride, r, t, K::tile(&rows, &[tok(t)], n));
            }
        }
    }
}

/// `out[(t0 + j)·stride + r0 + i] = sums[i][j]`.
///
/// # Safety
/// Every such index is inside `out`'s allocation.
#[inline(always)]
unsafe fn store<const R: usize, const T: usize>(
    out: *mut f32,
    stride: usize,
    r0: usize,
    t0: usize,
    sums: [[f32; T]; R],
) {
    for (i, sums) in sums.iter().enumerate() {
        for (j, &s) in sums.iter().enumerate() {
            *out.add((t0 + j) * stride + r0 + i) = s;
        }
    }
}
