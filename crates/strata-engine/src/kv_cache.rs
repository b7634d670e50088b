//! Per-layer key/value cache of attention layers.
//!
//! Layout: one buffer per layer and per K/V, `[position][n_kv_head · head_dim]`, sized for
//! the session's context once at creation (no growth, no per-token allocation).

use half::f16;
use half::slice::HalfFloatSliceExt;

/// Element type of cached keys and values (`--kv f32|f16`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvType {
    F32,
    /// llama.cpp's default cache type.
    #[default]
    F16,
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

enum Store {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

impl Store {
    fn new(ty: KvType, len: usize) -> Store {
        match ty {
            KvType::F32 => Store::F32(vec![0.0; len]),
            KvType::F16 => Store::F16(vec![f16::ZERO; len]),
        }
    }

    fn write(&mut self, at: usize, src: &[f32]) {
        match self {
            Store::F32(v) => v[at..at + src.len()].copy_from_slice(src),
            Store::F16(v) => v[at..at + src.len()].convert_from_f32_slice(src),
        }
    }

    fn read(&self, at: usize, dst: &mut [f32]) {
        match self {
            Store::F32(v) => dst.copy_from_slice(&v[at..at + dst.len()]),
            Store::F16(v) => v[at..at + dst.len()].convert_to_f32_slice(dst),
        }
    }
}

/// One layer's keys or values in their storage type, `[position][n_kv_head · head_dim]`
/// (bulk reads: attention converts a tile of positions at a time).
#[derive(Clone, Copy)]
pub enum KvRows<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
}

impl Store {
    fn rows(&self) -> KvRows<'_> {
        match self {
            Store::F32(v) => KvRows::F32(v),
            Store::F16(v) => KvRows::F16(v),
        }
    }
}

/// Keys and values of one attention layer.
pub struct LayerKv {
    k: Store,
    v: Store,
    /// `n_kv_head · head_dim`: elements per position.
    row: usize,
}

impl LayerKv {
    /// Stores the key and value rows (`row` elements each) of position `pos`.
    pub fn write(&mut self, pos: usize, k: &[f32], v: &[f32]) {
        self.k.write(pos * self.row, k);
        self.v.write(pos * self.row, v);
    }

    /// True when keys and values are stored as f16.
    pub fn is_f16(&self) -> bool {
        matches!(self.k, Store::F16(_))
    }

    /// Reads `dst.len()` key elements of position `pos` starting at element `offset` of its row.
    #[inline]
    pub fn read_k(&self, pos: usize, offset: usize, dst: &mut [f32]) {
        self.k.read(pos * self.row + offset, dst);
    }

    /// Reads `dst.len()` value elements of position `pos` starting at element `offset`.
    #[inline]
    pub fn read_v(&self, pos: usize, offset: usize, dst: &mut [f32]) {
        self.v.read(pos * self.row + offset, dst);
    }

    /// All cached keys, `[position][row_len()]`, in the storage type.
    pub fn k_rows(&self) -> KvRows<'_> {
        self.k.rows()
    }

    /// All cached values, `[position][row_len()]`, in the storage type.
    pub fn v_rows(&self) -> KvRows<'_> {
        self.v.rows()
    }

    /// Elements per position (`n_kv_head · head_dim`).
    pub fn row_len(&self) -> usize {
        self.row
    }
}

/// The KV cache of a session: one [`LayerKv`] per layer.
pub struct KvCache {
    pub layers: Vec<LayerKv>,
    n_ctx: usize,
    ty: KvType,
}

impl KvCache {
    /// A cache of `n_ctx` positions for `n_layer` layers with `row` elements per position.
    /// Memory: `2 · n_layer · n_ctx · row · sizeof(ty)` bytes.
    pub fn new(n_layer: usize, n_ctx: usize, row: usize, ty: KvType) -> KvCache {
        let layers = (0..n_layer)
            .map(|_| LayerKv {
                k: Store::new(ty, n_ctx * row),
                v: Store::new(ty, n_ctx * row),
                row,
            })
            .collect();
        KvCache { layers, n_ctx, ty }
    }

    /// Positions the cache can hold.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Element type of the cache.
    pub fn kv_type(&self) -> KvType {
        self.ty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_both_types() {
        for ty in [KvType::F32, KvType::F16] {
            let mut c = KvCache::new(2, 4, 3, ty);
            c.layers[1].write(2, &[1.0, 2.0, 3.0], &[-1.0, 0.5, 0.25]);
            let mut k = [0.0f32; 2];
            c.layers[1].read_k(2, 1, &mut k);
            assert_eq!(k, [2.0, 3.0]);
            let mut v = [0.0f32; 3];
            c.layers[1].read_v(2, 0, &mut v);
            assert_eq!(v, [-1.0, 0.5, 0.25]);
        }
        assert_eq!("F16".parse::<KvType>(), Ok(KvType::F16));
        assert!("q9".parse::<KvType>().is_err());
    }
}
