//! The tiles of the float-weight products ([`crate::gemm_f32`]): `R` rows × 4 tokens at a
//! time, rows and tokens left over at the edges as 1-row and 1-token tiles. Each path's
//! `float.rs` supplies its vectors ([`Lanes`]) and row loads ([`RowLanes`]); the tile mirrors
//! that path's `dot_f32` kernel, which tests/gemm_f32.rs checks bit for bit.

use std::array;

/// One path's vectors as its `dot_f32` kernel uses them: `WIDTH` f32 lanes, four
/// accumulators over steps of `4 · WIDTH` elements (accumulator `k` takes vector `k` of each
/// step), the `WIDTH`-element steps after the last whole one into accumulator 0, and the
/// reduction `reduce((a0 + a1) + (a2 + a3))`.
pub(crate) trait Lanes {
    /// A vector of `WIDTH` f32 lanes.
    type V: Copy;
    /// Lanes per vector.
    const WIDTH: usize;
    /// All lanes zero.
    ///
    /// # Safety
    /// The path's CPU features are available (as for every method here).
    unsafe fn zero() -> Self::V;
    /// `a · b + c`, rounded once.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `WIDTH` floats at `p`.
    unsafe fn load(p: *const f32) -> Self::V;
    /// The kernel's sum of its four accumulators.
    unsafe fn reduce(acc: [Self::V; 4]) -> f32;
}

/// A weight row read `WIDTH` elements at a time as f32 lanes of path `L`.
pub(crate) trait RowLanes<L: Lanes> {
    /// Elements `i .. i + WIDTH`.
    ///
    /// # Safety
    /// As for [`Lanes`]; the elements lie in the row.
    unsafe fn lanes(&self, i: usize) -> L::V;
}

/// Elements of a row a tile's accumulators pass over before the next block (1 KiB of f32).
const K_BLOCK: usize = 256;

/// The path's `dot_f32` of `R` rows × `T` tokens of `n` elements (a multiple of `WIDTH`),
/// `[row][token]`, bit for bit: each of its four accumulators passes over a block of
/// [`K_BLOCK`] elements in turn for all pairs (the block of every row and token stays in L1
/// meanwhile), the steps after the last whole one go to the first, and the four are reduced as
/// the kernel reduces them.
///
/// # Safety
/// As for [`Lanes`]; every row and token holds `n` elements.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // indices into several [row][token] arrays at once
unsafe fn tile<L: Lanes, W: RowLanes<L>, const R: usize, const T: usize>(
    rows: &[W; R],
    toks: &[*const f32; T],
    n: usize,
) -> [[f32; T]; R] {
    let step = 4 * L::WIDTH;
    let whole = n / step * step;
    let mut chains = [[[L::zero(); 4]; T]; R];
    let mut start = 0;
    while start < whole {
        let end = (start + K_BLOCK).min(whole);
        for k in 0..4 {
            let mut acc = [[L::zero(); T]; R];
            for i in 0..R {
                for j in 0..T {
                    acc[i][j] = chains[i][j][k];
                }
            }
            let mut at = start + L::WIDTH * k;
            while at < end {
                for i in 0..R {
                    let w = rows[i].lanes(at);
                    for j in 0..T {
                        acc[i][j] = L::fma(w, L::load(toks[j].add(at)), acc[i][j]);
                    }
                }
                at += step;
            }
            for i in 0..R {
                for j in 0..T {
                    chains[i][j][k] = acc[i][j];
                }
            }
        }
        start = end;
    }
    let mut at = whole;
    while at < n {
        for i in 0..R {
            let w = rows[i].lanes(at);
            for j in 0..T {
                chains[i][j][0] = L::fma(w, L::load(toks[j].add(at)), chains[i][j][0]);
            }
        }
        at += L::WIDTH;
    }
    let mut sums = [[0.0; T]; R];
    for i in 0..R {
        for j in 0..T {
            sums[i][j] = L::reduce(chains[i][j]);
        }
    }
    sums
}

/// A float product: `n_rows` weight rows of `n` elements (`w`, back to back), `n_tok` token
/// rows (`x`), results at `out[t·stride + r]`. The caller checked the lengths.
pub(crate) struct Operands<'a> {
    w: &'a [u8],
    n_rows: usize,
    x: &'a [f32],
    n: usize,
    n_tok: usize,
    out: &'a mut [f32],
    stride: usize,
}

/// Tokens per tile.
const T: usize = 4;

impl<'a> Operands<'a> {
    /// The operands of a product whose rows path `L` tiles: `None` unless `n` is a whole
    /// number of its vectors (the tiles have no tail).
    #[allow(clippy::too_many_arguments)]
    pub fn whole<L: Lanes>(
        w: &'a [u8],
        n_rows: usize,
        x: &'a [f32],
        n: usize,
        n_tok: usize,
        out: &'a mut [f32],
        stride: usize,
    ) -> Option<Self> {
        (n > 0 && n.is_multiple_of(L::WIDTH)).then_some(Operands {
            w,
            n_rows,
            x,
            n,
            n_tok,
            out,
            stride,
        })
    }

    /// Every (row, token) pair in tiles of `R` rows × [`T`] tokens, each row read through
    /// `make` (its element type's loader).
    ///
    /// # Safety
    /// As for [`Lanes`]; `out` holds `(n_tok − 1)·stride + n_rows` floats.
    #[inline(always)]
    pub unsafe fn run<L: Lanes, W: RowLanes<L>, const R: usize>(self, make: fn(&'a [u8]) -> W) {
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
                store(out, stride, r, t, tile::<L, W, R, T>(&rows, &toks, n));
            }
            for t in toks_t..n_tok {
                store(out, stride, r, t, tile::<L, W, R, 1>(&rows, &[tok(t)], n));
            }
        }
        for r in rows_r..self.n_rows {
            let rows = [row(r)];
            for t in (0..toks_t).step_by(T) {
                let toks: [*const f32; T] = array::from_fn(|j| tok(t + j));
                store(out, stride, r, t, tile::<L, W, 1, T>(&rows, &toks, n));
            }
            for t in toks_t..n_tok {
                store(out, stride, r, t, tile::<L, W, 1, 1>(&rows, &[tok(t)], n));
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
