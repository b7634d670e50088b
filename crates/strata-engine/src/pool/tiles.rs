//! A row-major output `[rows][stride]` cut into rectangular tiles that pool tasks fill in
//! parallel: tile `i` covers a range of columns (`col_tile` wide) and a range of rows
//! (`row_tile` high). Used for `y = x·Wᵀ` (`[tokens][out features]`, tiles of weight rows ×
//! tokens), attention (`[tokens][heads·head_dim]`, tiles of KV-head groups × query blocks) and
//! batched quantization (`[tokens][row bytes]`).
//!
//! Tiles are disjoint, and [`super::Pool::for_each_tile`] hands each index to exactly one task,
//! so each task gets exclusive access to its tile without any locking.

use std::marker::PhantomData;
use std::ops::Range;

/// An output split into tiles; build with [`Tiles::new`], fill with
/// [`super::Pool::for_each_tile`].
pub struct Tiles<'a, T> {
    ptr: *mut T,
    n_rows: usize,
    stride: usize,
    col_tile: usize,
    row_tile: usize,
    n_col_tiles: usize,
    _out: PhantomData<&'a mut [T]>,
}

// SAFETY: a Tiles is a `&mut [T]` cut into disjoint pieces; each piece is handed to one task
// (see `tile`), so sharing it across threads is like sending the pieces, which needs T: Send.
unsafe impl<T: Send> Sync for Tiles<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Tiles<'_, T> {}

impl<'a, T> Tiles<'a, T> {
    /// Tiles of `col_tile` columns × `row_tile` rows over `out` (`[out.len() / stride][stride]`).
    /// The last tile of each direction may be smaller. Panics if a size is zero or `out.len()`
    /// is not a multiple of `stride`.
    pub fn new(out: &'a mut [T], stride: usize, col_tile: usize, row_tile: usize) -> Self {
        assert!(
            stride > 0 && col_tile > 0 && row_tile > 0,
            "empty tile shape"
        );
        assert_eq!(out.len() % stride, 0, "output is not whole rows");
        Tiles {
            ptr: out.as_mut_ptr(),
            n_rows: out.len() / stride,
            stride,
            col_tile,
            row_tile,
            n_col_tiles: stride.div_ceil(col_tile),
            _out: PhantomData,
        }
    }

    /// Number of tiles. Index `i` is column tile `i / row_tiles`, row tile `i % row_tiles`, so
    /// consecutive indices share a column range (a weight tile stays in cache).
    pub fn count(&self) -> usize {
        self.n_col_tiles * self.n_rows.div_ceil(self.row_tile)
    }

    /// Tile `i`.
    ///
    /// # Safety
    /// While the returned tile lives, no other call may return the same `i` (distinct indices
    /// never overlap).
    pub(super) unsafe fn tile(&self, i: usize) -> Tile<'_, T> {
        let n_row_tiles = self.n_rows.div_ceil(self.row_tile);
        let (c, r) = (i / n_row_tiles, i % n_row_tiles);
        assert!(c < self.n_col_tiles, "tile {i} out of range");
        let c0 = c * self.col_tile;
        let r0 = r * self.row_tile;
        Tile {
            ptr: self.ptr,
            stride: self.stride,
            cols: c0..(c0 + self.col_tile).min(self.stride),
            rows: r0..(r0 + self.row_tile).min(self.n_rows),
            _out: PhantomData,
        }
    }
}

/// One tile: exclusive access to `rows × cols` of the output.
pub struct Tile<'t, T> {
    ptr: *mut T,
    stride: usize,
    /// Columns covered (e.g. weight rows, or a KV head's query heads × head_dim).
    pub cols: Range<usize>,
    /// Rows covered (tokens).
    pub rows: Range<usize>,
    _out: PhantomData<&'t mut [T]>,
}

impl<T> Tile<'_, T> {
    /// Row `k` of the tile (absolute row `rows.start + k`): `cols.len()` elements.
    pub fn row_mut(&mut self, k: usize) -> &mut [T] {
        assert!(k < self.rows.len(), "row {k} outside the tile");
        let at = (self.rows.start + k) * self.stride + self.cols.start;
        // SAFETY: `at .. at + cols.len()` lies inside row `rows.start + k` of the output, within
        // this tile, which no other task can reach; `&mut self` keeps rows of one tile unaliased.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), self.cols.len()) }
    }

    /// The whole tile as one slice with the output's stride, when that slice covers nothing
    /// outside the tile: the tile spans full rows, or is one row high.
    pub fn contiguous_mut(&mut self) -> Option<&mut [T]> {
        if self.rows.len() != 1 && self.cols.len() != self.stride {
            return None;
        }
        let start = self.rows.start * self.stride + self.cols.start;
        let len = (self.rows.len() - 1) * self.stride + self.cols.len();
        // SAFETY: with full rows (or a single row) `start .. start + len` is exactly this
        // tile's elements, which belong to this task alone.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) })
    }
}
