//! Per-layer key/value cache of attention layers, in pages that are allocated as the sequence
//! grows: a session's memory follows the tokens in it, not its context limit.
//!
//! Layout: per layer and per K/V, pages of [`KV_PAGE`] positions, each
//! `[KV_PAGE][n_kv_head · head_dim]` in the storage type. A page is allocated when its first
//! position is written and kept (reused) when the sequence is truncated.
//!
//! A layer with QSA sparse attention (qwen4exp) also keeps its indexer key of every position,
//! raw (before norm and RoPE) and in f32, in pages of its own beside K and V: positional like
//! them, so it is cut back, copied out and restored with them.

use half::f16;
use half::slice::HalfFloatSliceExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Positions per page: a multiple of attention's key tile (64) and segment (256), so a tile
/// of keys never straddles two pages.
pub const KV_PAGE: usize = 256;

/// Element type of cached keys and values (`--kv f32|f16`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvType {
    F32,
    /// llama.cpp's default cache type.
    #[default]
    F16,
}

impl KvType {
    /// Bytes per cached element.
    pub fn bytes(self) -> usize {
        match self {
            KvType::F32 => 4,
            KvType::F16 => 2,
        }
    }
}

impl std::str::FromStr for KvType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(KvType::F32),
            "f16" => Ok(KvType::F16),
            other => Err(format!(
                "unknown KV cache type '{other}' (expected f32 or f16)"
            )),
        }
    }
}

/// Pages of one layer's keys or values.
#[derive(Clone)]
enum Store {
    F32(Vec<Box<[f32]>>),
    F16(Vec<Box<[f16]>>),
}

impl Store {
    fn new(ty: KvType) -> Store {
        match ty {
            KvType::F32 => Store::F32(Vec::new()),
            KvType::F16 => Store::F16(Vec::new()),
        }
    }

    fn n_pages(&self) -> usize {
        match self {
            Store::F32(p) => p.len(),
            Store::F16(p) => p.len(),
        }
    }

    /// Allocates pages until `n_pages` exist.
    fn grow(&mut self, n_pages: usize, row: usize) {
        match self {
            Store::F32(p) => p.resize_with(n_pages.max(p.len()), || {
                vec![0.0; KV_PAGE * row].into_boxed_slice()
            }),
            Store::F16(p) => p.resize_with(n_pages.max(p.len()), || {
                vec![f16::ZERO; KV_PAGE * row].into_boxed_slice()
            }),
        }
    }

    /// Writes `src` (one row) at position `pos`; its page exists.
    fn write(&mut self, pos: usize, row: usize, src: &[f32]) {
        let at = pos % KV_PAGE * row;
        match self {
            Store::F32(p) => p[pos / KV_PAGE][at..at + src.len()].copy_from_slice(src),
            Store::F16(p) => p[pos / KV_PAGE][at..at + src.len()].convert_from_f32_slice(src),
        }
    }

    fn rows(&self, row: usize) -> KvRows<'_> {
        match self {
            Store::F32(pages) => KvRows::F32(Paged { pages, row }),
            Store::F16(pages) => KvRows::F16(Paged { pages, row }),
        }
    }

    /// The first `n_pages` pages only (a snapshot's copy).
    fn prefix(&self, n_pages: usize) -> Store {
        match self {
            Store::F32(p) => Store::F32(p[..n_pages.min(p.len())].to_vec()),
            Store::F16(p) => Store::F16(p[..n_pages.min(p.len())].to_vec()),
        }
    }
}

/// One layer's cached keys or values in their storage type: rows of positions, found through
/// their page (attention reads a tile of positions at a time, always inside one page).
#[derive(Clone, Copy)]
pub struct Paged<'a, T> {
    pages: &'a [Box<[T]>],
    /// Elements per position (`n_kv_head · head_dim`).
    row: usize,
}

impl<'a, T> Paged<'a, T> {
    /// The row of position `pos` (`n_kv_head · head_dim` elements). Panics if `pos` lies past
    /// the allocated pages.
    #[inline(always)]
    pub fn row(&self, pos: usize) -> &'a [T] {
        let at = pos % KV_PAGE * self.row;
        &self.pages[pos / KV_PAGE][at..at + self.row]
    }

    /// The rows from position `pos` to the end of its page, `[position][row]` back to back
    /// (a key tile in place).
    #[inline(always)]
    pub fn from(&self, pos: usize) -> &'a [T] {
        &self.pages[pos / KV_PAGE][pos % KV_PAGE * self.row..]
    }
}

/// One layer's keys or values in the storage type.
#[derive(Clone, Copy)]
pub enum KvRows<'a> {
    F32(Paged<'a, f32>),
    F16(Paged<'a, f16>),
}

/// A QSA layer's pooled block keys (`[n_blocks][di]`, see `ops::qsa::block_keys`), kept
/// between calls so a decode step pools only the blocks completed since the last one. A
/// block's key depends only on its positions' raw indexer keys, so it stays valid until one
/// of them is written again (a rollback that rewrites positions).
#[derive(Clone, Debug, Default)]
pub struct BlockKeyCache {
    /// Keys `[di]` of blocks `0, 1, …`.
    pub keys: Vec<f32>,
    /// Positions below this have not been written since the keys were pooled.
    pub clean: usize,
}

impl BlockKeyCache {
    /// Blocks of `ratio` positions whose cached keys (`di` wide) are still valid.
    pub fn valid(&self, ratio: usize, di: usize) -> usize {
        (self.keys.len() / di.max(1)).min(self.clean / ratio.max(1))
    }
}

/// Keys and values of one attention layer.
pub struct LayerKv {
    /// Unique among the layers of this process, renewed whenever the contents change other
    /// than by [`LayerKv::write`] (a copy, a restore): a device backend that mirrors the cache
    /// keys its copy by it ([`LayerKv::id`]).
    id: u64,
    k: Store,
    v: Store,
    /// `n_kv_head · head_dim`: elements per position.
    row: usize,
    /// Raw indexer keys (always f32), their width and the pooled block keys, on QSA layers.
    idx: Option<(Store, usize, BlockKeyCache)>,
}

/// A fresh [`LayerKv::id`].
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Clone for LayerKv {
    fn clone(&self) -> Self {
        LayerKv {
            id: next_id(),
            k: self.k.clone(),
            v: self.v.clone(),
            row: self.row,
            idx: self.idx.clone(),
        }
    }
}

impl LayerKv {
    /// Identifies these contents: equal ids mean that the two caches are one and the same
    /// layer whose rows changed only by [`LayerKv::write`] since (restores and copies take a
    /// new id). A device mirror of the cache is valid for the positions it wrote under it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Stores the key and value rows (`row` elements each) of position `pos`, allocating its
    /// page if needed.
    pub fn write(&mut self, pos: usize, k: &[f32], v: &[f32]) {
        let pages = pos / KV_PAGE + 1;
        if self.k.n_pages() < pages {
            self.k.grow(pages, self.row);
            self.v.grow(pages, self.row);
        }
        self.k.write(pos, self.row, k);
        self.v.write(pos, self.row, v);
    }

    /// Stores the raw indexer key (`index_key_len()` elements) of position `pos`, allocating
    /// its page if needed. Panics on a layer without indexer keys: a graph writes them only
    /// on the QSA layers the cache was made for ([`KvCache::with_index_keys`]).
    pub fn write_index_key(&mut self, pos: usize, key: &[f32]) {
        let (store, row, blocks) = self
            .idx
            .as_mut()
            .expect("indexer keys are written only on QSA layers");
        let pages = pos / KV_PAGE + 1;
        if store.n_pages() < pages {
            store.grow(pages, *row);
        }
        store.write(pos, *row, key);
        blocks.clean = blocks.clean.min(pos);
    }

    /// The cached raw indexer keys, by position, on a QSA layer.
    pub fn index_keys(&self) -> Option<Paged<'_, f32>> {
        match &self.idx {
            Some((Store::F32(pages), row, _)) => Some(Paged { pages, row: *row }),
            _ => None,
        }
    }

    /// The raw indexer keys and the block-key cache, on a QSA layer.
    pub fn index_keys_and_blocks(&mut self) -> Option<(Paged<'_, f32>, &mut BlockKeyCache)> {
        match &mut self.idx {
            Some((Store::F32(pages), row, blocks)) => Some((Paged { pages, row: *row }, blocks)),
            _ => None,
        }
    }

    /// The pooled block keys, on a QSA layer.
    pub fn block_key_cache(&self) -> Option<&BlockKeyCache> {
        self.idx.as_ref().map(|(_, _, b)| b)
    }

    /// Elements of one position's indexer key (0 without indexer keys).
    pub fn index_key_len(&self) -> usize {
        self.idx.as_ref().map_or(0, |(_, row, _)| *row)
    }

    /// True when keys and values are stored as f16.
    pub fn is_f16(&self) -> bool {
        matches!(self.k, Store::F16(_))
    }

    /// All cached keys, by position, in the storage type.
    pub fn k_rows(&self) -> KvRows<'_> {
        self.k.rows(self.row)
    }

    /// All cached values, by position, in the storage type.
    pub fn v_rows(&self) -> KvRows<'_> {
        self.v.rows(self.row)
    }

    /// Elements per position (`n_kv_head · head_dim`).
    pub fn row_len(&self) -> usize {
        self.row
    }

    /// Bytes of the allocated pages.
    pub fn size_bytes(&self) -> usize {
        let elem = if self.is_f16() { 2 } else { 4 };
        let idx = self.idx.as_ref().map_or(0, |(s, row, b)| {
            s.n_pages() * KV_PAGE * row * 4 + b.keys.len() * 4
        });
        2 * self.k.n_pages() * KV_PAGE * self.row * elem + idx
    }
}

/// The KV cache of a session: one [`LayerKv`] per attention layer.
#[derive(Clone)]
pub struct KvCache {
    pub layers: Vec<LayerKv>,
    n_ctx: usize,
    ty: KvType,
}

impl KvCache {
    /// A cache of at most `n_ctx` positions for `n_layer` layers with `row` elements per
    /// position. Allocates nothing yet: each layer takes
    /// `2 · KV_PAGE · row · sizeof(ty)` bytes per page of positions written.
    pub fn new(n_layer: usize, n_ctx: usize, row: usize, ty: KvType) -> KvCache {
        let layers = (0..n_layer)
            .map(|_| LayerKv {
                id: next_id(),
                k: Store::new(ty),
                v: Store::new(ty),
                row,
                idx: None,
            })
            .collect();
        KvCache { layers, n_ctx, ty }
    }

    /// The cache with indexer keys of `widths[i]` elements per position on layer `i`
    /// (0: none). Allocates nothing yet: `KV_PAGE · width · 4` bytes per page written.
    pub fn with_index_keys(mut self, widths: &[usize]) -> KvCache {
        for (l, w) in self.layers.iter_mut().zip(widths) {
            l.idx = (*w > 0).then(|| (Store::new(KvType::F32), *w, BlockKeyCache::default()));
        }
        self
    }

    /// Positions the cache can hold.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Element type of the cache.
    pub fn kv_type(&self) -> KvType {
        self.ty
    }

    /// Bytes of the allocated pages of every layer.
    pub fn size_bytes(&self) -> usize {
        self.layers.iter().map(LayerKv::size_bytes).sum()
    }

    /// A copy of the pages that hold positions `0..n` (a snapshot).
    pub fn prefix(&self, n: usize) -> KvCache {
        let pages = n.div_ceil(KV_PAGE);
        KvCache {
            layers: self
                .layers
                .iter()
                .map(|l| LayerKv {
                    id: next_id(),
                    k: l.k.prefix(pages),
                    v: l.v.prefix(pages),
                    row: l.row,
                    // Block keys are pooled again from the raw keys when needed.
                    idx: (l.idx.as_ref())
                        .map(|(s, w, _)| (s.prefix(pages), *w, BlockKeyCache::default())),
                })
                .collect(),
            n_ctx: self.n_ctx,
            ty: self.ty,
        }
    }

    /// Takes `other`'s pages (same layout), keeping this cache's context limit.
    pub fn copy_pages_from(&mut self, other: &KvCache) {
        self.layers.clone_from(&other.layers);
    }

    /// Whether `other` has this cache's layer count, row width and element type.
    pub fn same_layout(&self, other: &KvCache) -> bool {
        self.ty == other.ty
            && self.layers.len() == other.layers.len()
            && self
                .layers
                .iter()
                .zip(&other.layers)
                .all(|(a, b)| a.row == b.row && a.index_key_len() == b.index_key_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(rows: KvRows<'_>, pos: usize) -> Vec<f32> {
        match rows {
            KvRows::F32(p) => p.row(pos).to_vec(),
            KvRows::F16(p) => p.row(pos).iter().map(|h| h.to_f32()).collect(),
        }
    }

    #[test]
    fn rows_round_trip_through_both_types_across_pages() {
        for ty in [KvType::F32, KvType::F16] {
            let mut c = KvCache::new(2, 4 * KV_PAGE, 3, ty);
            assert_eq!(c.size_bytes(), 0, "nothing is allocated before a write");
            c.layers[1].write(2, &[1.0, 2.0, 3.0], &[-1.0, 0.5, 0.25]);
            c.layers[1].write(KV_PAGE + 5, &[4.0, 5.0, 6.0], &[7.0, 8.0, 9.0]);
            assert_eq!(read(c.layers[1].k_rows(), 2), [1.0, 2.0, 3.0]);
            assert_eq!(read(c.layers[1].v_rows(), 2), [-1.0, 0.5, 0.25]);
            assert_eq!(read(c.layers[1].k_rows(), KV_PAGE + 5), [4.0, 5.0, 6.0]);
            assert_eq!(c.size_bytes(), 2 * 2 * KV_PAGE * 3 * ty.bytes());
            let snap = c.prefix(3);
            assert_eq!(snap.size_bytes(), 2 * KV_PAGE * 3 * ty.bytes());
            assert!(snap.same_layout(&c));
        }
        let mut c = KvCache::new(2, 4 * KV_PAGE, 3, KvType::F16).with_index_keys(&[0, 2]);
        assert!(c.layers[0].index_keys().is_none());
        c.layers[1].write(KV_PAGE + 1, &[0.0; 3], &[0.0; 3]);
        c.layers[1].write_index_key(KV_PAGE + 1, &[0.1, -7.5]);
        let keys = c.layers[1].index_keys().unwrap();
        assert_eq!(keys.row(KV_PAGE + 1), [0.1, -7.5], "indexer keys stay f32");
        assert_eq!(
            c.size_bytes(),
            2 * 2 * KV_PAGE * 3 * 2 + 2 * KV_PAGE * 2 * 4
        );
        let snap = c.prefix(KV_PAGE + 2);
        assert_eq!(
            snap.layers[1].index_keys().unwrap().row(KV_PAGE + 1),
            [0.1, -7.5]
        );
        assert!(snap.same_layout(&c) && !c.same_layout(&KvCache::new(2, 9, 3, KvType::F16)));
        assert_eq!("F16".parse::<KvType>(), Ok(KvType::F16));
        assert!("q9".parse::<KvType>().is_err());
    }
}
