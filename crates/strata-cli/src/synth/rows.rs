//! Random tensor bytes, fast enough for 30-billion-parameter files.
//!
//! Quantizing 30 G floats on two cores takes hours, so weight matrices are not drawn element by
//! element. For each (row length, type) a pool of `pool_rows` distinct rows is drawn once
//! (elements ~ N(0, 1/row_len), so a matrix–vector product keeps unit scale) and encoded once.
//! Row `i` of a tensor is then pool row `h % pool_rows` with its blocks rotated left by
//! `(h >> 32) % blocks` (every ggml block is self-contained, so a rotated row is a valid row),
//! where `h` hashes (seed, tensor name, i). Writing a row is a hash and two copies. Rows repeat
//! across and within tensors — harmless for speed and memory measurements, which is what these
//! files are for; the output is deterministic in `--seed`.

use std::collections::HashMap;

use anyhow::Result;
use rayon::prelude::*;
use strata_gguf::GgmlType;

use super::tensors::{Fill, Planned};

/// SplitMix64: the hash behind every draw.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a name, to seed per-tensor streams.
fn hash_name(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Deterministic standard-normal draws (SplitMix64 counter + Box–Muller).
pub struct Normal {
    state: u64,
    spare: Option<f32>,
}

impl Normal {
    pub fn new(seed: u64) -> Normal {
        Normal {
            state: mix(seed),
            spare: None,
        }
    }

    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(1);
        // 53 random bits in (0, 1].
        ((mix(self.state) >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// The next N(0, 1) draw.
    pub fn next(&mut self) -> f32 {
        if let Some(s) = self.spare.take() {
            return s;
        }
        let (u1, u2) = (self.uniform(), self.uniform());
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        self.spare = Some((r * t.sin()) as f32);
        (r * t.cos()) as f32
    }
}

/// Encoded random rows of one (row length, type).
struct Pool {
    row_bytes: usize,
    block_bytes: usize,
    rows: usize,
    bytes: Vec<u8>,
}

impl Pool {
    /// `rows` rows of `row_len` elements ~ N(0, 1/row_len), encoded as `ty` on all cores.
    fn new(seed: u64, ty: GgmlType, row_len: usize, rows: usize) -> Result<Pool> {
        let row_bytes = ty
            .row_bytes(row_len as u64)
            .expect("planned rows are whole blocks") as usize;
        let std = 1.0 / (row_len as f32).sqrt();
        let mut bytes = vec![0u8; rows * row_bytes];
        bytes
            .par_chunks_mut(row_bytes)
            .enumerate()
            .try_for_each(|(r, dst)| {
                // The float rows depend on the length only: every type encodes the same values.
                let row_seed = seed ^ mix(row_len as u64) ^ mix(r as u64 + 1);
                super::blocks::encode_row(ty, row_seed, row_len, std, dst)
            })?;
        Ok(Pool {
            row_bytes,
            block_bytes: ty.type_size(),
            rows,
            bytes,
        })
    }

    /// Writes pool row `h % rows`, rotated left by `(h >> 32) % blocks` blocks, into `dst`.
    fn write_row(&self, h: u64, dst: &mut [u8]) {
        let p = (h % self.rows as u64) as usize;
        let src = &self.bytes[p * self.row_bytes..(p + 1) * self.row_bytes];
        let blocks = self.row_bytes / self.block_bytes;
        let cut = ((h >> 32) % blocks as u64) as usize * self.block_bytes;
        let tail = self.row_bytes - cut;
        dst[..tail].copy_from_slice(&src[cut..]);
        dst[tail..].copy_from_slice(&src[..cut]);
    }
}

/// Produces the bytes of every planned tensor, chunk by chunk.
pub struct RowSource {
    seed: u64,
    pool_rows: usize,
    pools: HashMap<(usize, GgmlType), Pool>,
}

impl RowSource {
    /// A source for `--seed` with at most `pool_rows` distinct rows per (length, type).
    pub fn new(seed: u64, pool_rows: usize) -> RowSource {
        RowSource {
            seed,
            pool_rows: pool_rows.max(1),
            pools: HashMap::new(),
        }
    }

    /// Calls `write` with consecutive chunks (whole rows, about `chunk_bytes` each) that
    /// together make the bytes of `t`. `max_rows` (rows of the tallest tensor with this row
    /// length and type) bounds the pool: a small model gets no more pool rows than it uses.
    ///
    /// Errors: whatever `write` returns; a type strata-quant cannot quantize.
    pub fn stream(
        &mut self,
        t: &Planned,
        max_rows: u64,
        chunk_bytes: usize,
        mut write: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let row_len = t.shape[0] as usize;
        let row_bytes = t.ty.row_bytes(t.shape[0]).expect("validated by the plan") as usize;
        let rows = t.rows() as usize;
        let per_chunk = (chunk_bytes / row_bytes).clamp(1, rows);
        let mut buf = vec![0u8; per_chunk * row_bytes];
        let name_seed = self.seed ^ hash_name(&t.name);
        match t.fill {
            Fill::Pooled => {
                let key = (row_len, t.ty);
                if !self.pools.contains_key(&key) {
                    let n = (max_rows as usize).clamp(1, self.pool_rows);
                    self.pools
                        .insert(key, Pool::new(self.seed, t.ty, row_len, n)?);
                }
                let pool = &self.pools[&key];
                for start in (0..rows).step_by(per_chunk) {
                    let n = per_chunk.min(rows - start);
                    let chunk = &mut buf[..n * row_bytes];
                    for (j, dst) in chunk.chunks_exact_mut(row_bytes).enumerate() {
                        pool.write_row(mix(name_seed ^ mix((start + j) as u64)), dst);
                    }
                    write(chunk)?;
                }
            }
            Fill::Direct { mean, std } => {
                let mut normal = Normal::new(name_seed);
                let mut src = vec![0f32; row_len];
                for start in (0..rows).step_by(per_chunk) {
                    let n = per_chunk.min(rows - start);
                    let chunk = &mut buf[..n * row_bytes];
                    for dst in chunk.chunks_exact_mut(row_bytes) {
                        src.iter_mut().for_each(|x| *x = mean + std * normal.next());
                        strata_quant::quantize(t.ty, &src, dst)?;
                    }
                    write(chunk)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_draws_have_unit_variance() {
        let mut n = Normal::new(7);
        let xs: Vec<f32> = (0..20_000).map(|_| n.next()).collect();
        let mean = xs.iter().sum::<f32>() / xs.len() as f32;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / xs.len() as f32;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
    }

    #[test]
    fn pooled_rows_are_rotated_valid_rows_with_the_right_scale() {
        let t = Planned {
            name: "w".into(),
            shape: vec![512, 64],
            ty: GgmlType::Q8_0,
            fill: Fill::Pooled,
        };
        let mut src = RowSource::new(1, 16);
        let mut bytes = Vec::new();
        src.stream(&t, 64, 1000, |c| {
            bytes.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
        assert_eq!(bytes.len(), 64 * 544);
        let mut x = vec![0f32; 512 * 64];
        for (r, o) in bytes.chunks(544).zip(x.chunks_mut(512)) {
            strata_quant::dequantize(GgmlType::Q8_0, r, o).unwrap();
        }
        let var = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
        assert!((var * 512.0 - 1.0).abs() < 0.1, "{var}");
        // Same seed, same bytes.
        let mut again = Vec::new();
        RowSource::new(1, 16)
            .stream(&t, 64, 1 << 20, |c| {
                again.extend_from_slice(c);
                Ok(())
            })
            .unwrap();
        assert_eq!(bytes, again);
    }
}
