//! `Kernels::matmul` against the CPU: weights quantized (or, for types strata-quant cannot
//! quantize, random bytes with sane scales) in their ggml block layout, the reference
//! dequantized by strata-quant and summed in f64. Measure: max |Δ| / max |y|.

mod common;

use strata_quant::GgmlType;
use strata_vulkan::{transfer, Buffer, Location, QMatrix, Recorder, MATMUL_TYPES};

/// Tolerance of max |Δ| / max |y|: both sides multiply the same dequantized f32 weights, so
/// only the order of the f32 sums differs (the GPU's partial sums per 32-element chunk, or
/// one running sum per output in the tiled kernel).
fn tolerance(ty: GgmlType) -> f32 {
    match ty {
        GgmlType::F32 => 1e-5,
        _ => 1e-4,
    }
}

/// `rows` rows of `cols` elements of `ty`, in block layout.
fn weights(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let vals = common::values(rows * cols, seed);
    let row_bytes = cols / ty.block_size() * ty.type_size();
    let mut bytes = vec![0u8; rows * row_bytes];
    match ty {
        GgmlType::F32 => {
            for (b, v) in bytes.chunks_exact_mut(4).zip(&vals) {
                b.copy_from_slice(&v.to_le_bytes());
            }
        }
        _ if !strata_quant::supports_quantize(ty) => {
            // No quantizer here: random bytes, with every f16 scale of a block set to a
            // small finite value (the byte offsets of `d`/`dmin` in ggml's block structs;
            // IQ1_M keeps its scale's four nibbles in the top bits of its last four u16).
            let scales: &[usize] = match ty {
                GgmlType::Q2_K => &[80, 82],
                GgmlType::Q3_K => &[108],
                GgmlType::IQ1_M => &[],
                _ => &[0],
            };
            let noise = common::values(bytes.len(), seed ^ 0x55);
            for (b, v) in bytes.iter_mut().zip(&noise) {
                *b = ((v + 1.0) * 127.99) as u8;
            }
            for blk in bytes.chunks_exact_mut(ty.type_size()) {
                for (k, &o) in scales.iter().enumerate() {
                    let d = half::f16::from_f32(0.0123 + 0.004 * k as f32).to_le_bytes();
                    blk[o..o + 2].copy_from_slice(&d);
                }
                if ty == GgmlType::IQ1_M {
                    let d = half::f16::from_f32(0.0123).to_bits();
                    for k in 0..4 {
                        let top = (((d >> (4 * k)) & 15) << 4) as u8;
                        blk[49 + 2 * k] = (blk[49 + 2 * k] & 0x0f) | top;
                    }
                }
            }
        }
        _ => {
            for (src, dst) in vals
                .chunks_exact(cols)
                .zip(bytes.chunks_exact_mut(row_bytes))
            {
                strata_quant::quantize(ty, src, dst).expect("quantizable type");
            }
        }
    }
    bytes
}

/// y[t][r] = Σ x[t][c]·W[r][c] on the CPU, from strata-quant's dequantized rows, in f64.
fn reference(ty: GgmlType, w: &[u8], rows: usize, cols: usize, x: &[f32]) -> Vec<f32> {
    let row_bytes = w.len() / rows;
    let mut wf = vec![0.0f32; rows * cols];
    for (src, dst) in w.chunks_exact(row_bytes).zip(wf.chunks_exact_mut(cols)) {
        strata_quant::dequantize(ty, src, dst).expect("dequantizable type");
    }
    let n_t = x.len() / cols;
    let mut y = vec![0.0f32; n_t * rows];
    for t in 0..n_t {
        for r in 0..rows {
            let xr = &x[t * cols..(t + 1) * cols];
            let wr = &wf[r * cols..(r + 1) * cols];
            y[t * rows + r] = xr
                .iter()
                .zip(wr)
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum::<f64>() as f32;
        }
    }
    y
}

#[test]
fn matmul_matches_cpu_for_every_weight_type() {
    let Some(dev) = common::device() else { return };
    let k = strata_vulkan::Kernels::new(&dev);
    {
        for &ty in MATMUL_TYPES {
            let bs = ty.block_size();
            let kq = if bs == 256 { 256 } else { 32 };
            // (rows, cols, tokens): the matrix-vector kernel at 1 and 8 tokens (one full
            // token group); the tiled kernel (over 8 tokens) with ragged edges everywhere:
            // 70 rows = a 64-row tile and 6, 9 tokens, 33 = a 32-token tile and 1, 70 = two
            // and 6, 130 rows over three row tiles, K over several blocks and 32-wide steps;
            // for float types rows that end inside a chunk, on both kernels.
            let mut shapes = vec![
                (37, 3 * kq, 1),
                (70, 2 * kq, 8),
                (70, 2 * kq, 9),
                (130, 3 * kq, 33),
                (37, kq, 70),
            ];
            if bs == 1 {
                shapes.extend([(9, 100, 3), (9, 100, 12)]);
            }
            for (i, &(rows, cols, n_t)) in shapes.iter().enumerate() {
                let seed = 1000 * i as u64 + ty as u64;
                let wb = weights(ty, rows, cols, seed);
                let x = common::values(n_t * cols, seed + 7);
                let want = reference(ty, &wb, rows, cols, &x);

                let w = QMatrix::upload(&dev, ty, rows, cols, &wb).expect("upload weights");
                let xb = transfer::upload_f32(&dev, &x).expect("upload x");
                let yb =
                    Buffer::new(&dev, 4 * (n_t * rows) as u64, Location::Device).expect("alloc y");
                let mut rec = Recorder::new(&dev).expect("recorder");
                k.matmul(&mut rec, &w, &xb, n_t, &yb, None)
                    .expect("record matmul");
                rec.submit().expect("submit");
                let got = transfer::read_f32(&dev, &yb, n_t * rows).expect("read y");
                let err = common::rel_err(&got, &want);
                eprintln!(
                    "matmul {ty:?} {rows}x{cols} T={n_t} (wg {}): max|Δ|/max|y| = {err:.2e}",
                    k.workgroup_size()
                );
                assert!(
                    err <= tolerance(ty),
                    "{ty:?} {rows}x{cols} T={n_t}: {err:e}"
                );
            }
        }
    }
}

#[test]
fn matmul_rejects_bad_shapes_without_panicking() {
    let Some(dev) = common::device() else { return };
    // 40 columns are not whole Q4_0 blocks; a byte count that does not match the shape.
    assert!(QMatrix::upload(&dev, GgmlType::Q4_0, 2, 40, &[0; 36]).is_err());
    assert!(QMatrix::upload(&dev, GgmlType::Q8_0, 2, 32, &[0; 35]).is_err());
    assert!(QMatrix::upload(&dev, GgmlType::IQ1_M, 1, 256, &[0; 55]).is_err());
    // y too small for the product.
    let k = strata_vulkan::Kernels::new(&dev);
    let w = QMatrix::upload(&dev, GgmlType::F32, 4, 8, &[0; 128]).expect("upload");
    let x = transfer::upload_f32(&dev, &[0.0; 8]).expect("upload x");
    let y = Buffer::new(&dev, 8, Location::Device).expect("alloc y");
    let mut rec = Recorder::new(&dev).expect("recorder");
    assert!(k.matmul(&mut rec, &w, &x, 1, &y, None).is_err());
}

#[test]
fn matmul_gives_a_token_the_same_bits_at_any_token_count() {
    // Batch invariance: 12 tokens at once (the tiled kernel), as 8 + 4 (the matrix-vector
    // kernel, two runs) and tokens 3..12 alone (the tiled kernel, another tile position) must
    // give every token's row bit for bit, for every weight type (70 rows: a ragged row tile;
    // float rows that end inside a chunk).
    let Some(dev) = common::device() else { return };
    let k = strata_vulkan::Kernels::new(&dev);
    for &ty in MATMUL_TYPES {
        let bs = ty.block_size();
        let (rows, n_t) = (70, 12);
        let cols = if bs == 1 { 100 } else { 2 * bs.max(32) };
        let wb = weights(ty, rows, cols, 400 + ty as u64);
        let x = common::values(n_t * cols, 401);
        let w = QMatrix::upload(&dev, ty, rows, cols, &wb).expect("upload weights");
        let xb = transfer::upload_f32(&dev, &x).expect("upload x");
        let runs: [&[(usize, usize)]; 3] = [&[(0, 12)], &[(0, 8), (8, 4)], &[(3, 9)]];
        let mut outs = Vec::new();
        for parts in runs {
            let yb = transfer::upload_f32(&dev, &vec![0.0; n_t * rows]).expect("alloc y");
            let mut rec = Recorder::new(&dev).expect("recorder");
            for &(t_off, n) in parts {
                k.matmul_rows(&mut rec, (&w, 0..rows), &xb, (t_off, n), &yb, (rows, 0))
                    .expect("record matmul_rows");
            }
            rec.submit().expect("submit");
            outs.push(transfer::read_f32(&dev, &yb, n_t * rows).expect("read y"));
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&outs[0]), bits(&outs[1]), "{ty:?}: 12 tokens vs 8 + 4");
        assert_eq!(
            bits(&outs[0][3 * rows..]),
            bits(&outs[2][3 * rows..]),
            "{ty:?}: 12 tokens vs tokens 3..12"
        );
    }
}

#[test]
fn matmul_rows_writes_only_its_block_at_weight_token_and_column_offsets() {
    // One expert's rows of an expert tensor over the tokens routed to it, into some columns
    // of a wider y (Kernels::matmul_rows): rows 40..121 of 150 (ragged tiles), tokens from
    // row 3 of x and y, columns 10..91 of 100. Both kernels: 5 tokens (matrix-vector) and
    // 33 (tiled). Every y value outside the block must keep its sentinel.
    let Some(dev) = common::device() else { return };
    let k = strata_vulkan::Kernels::new(&dev);
    let (rows, w_rows, t_off, y_stride, y_off) = (150, 40..121, 3, 100, 10);
    for (ty, n_t) in [
        (GgmlType::Q4_K, 5),
        (GgmlType::Q4_K, 33),
        (GgmlType::IQ2_XS, 33),
    ] {
        let cols = 2 * ty.block_size();
        let wb = weights(ty, rows, cols, 300 + n_t as u64);
        let total_t = t_off + n_t + 2;
        let x = common::values(total_t * cols, 301);
        let row_bytes = wb.len() / rows;
        let block = &wb[w_rows.start * row_bytes..w_rows.end * row_bytes];
        let x_run = &x[t_off * cols..(t_off + n_t) * cols];
        let part = reference(ty, block, w_rows.len(), cols, x_run);
        let sentinel = 7.25f32;
        let mut want = vec![sentinel; total_t * y_stride];
        for t in 0..n_t {
            for r in 0..w_rows.len() {
                want[(t_off + t) * y_stride + y_off + r] = part[t * w_rows.len() + r];
            }
        }

        let w = QMatrix::upload(&dev, ty, rows, cols, &wb).expect("upload weights");
        let xb = transfer::upload_f32(&dev, &x).expect("upload x");
        let yb = transfer::upload_f32(&dev, &vec![sentinel; total_t * y_stride]).expect("y");
        let mut rec = Recorder::new(&dev).expect("recorder");
        k.matmul_rows(
            &mut rec,
            (&w, w_rows.clone()),
            &xb,
            (t_off, n_t),
            &yb,
            (y_stride, y_off),
        )
        .expect("record matmul_rows");
        rec.submit().expect("submit");
        let got = transfer::read_f32(&dev, &yb, want.len()).expect("read y");
        let outside = got
            .iter()
            .zip(&want)
            .filter(|(_, w)| **w == sentinel)
            .filter(|(g, _)| **g != sentinel)
            .count();
        assert_eq!(
            outside, 0,
            "{ty:?} T={n_t}: values written outside the block"
        );
        let err = common::rel_err(&got, &want);
        eprintln!("matmul_rows {ty:?} rows {w_rows:?} T={n_t}: max|Δ|/max|y| = {err:.2e}");
        assert!(err <= tolerance(ty), "{ty:?} T={n_t}: {err:e}");
    }
}

#[test]
fn matmul_covers_rows_beyond_one_grid_dimension() {
    // 70 000 rows > 65 535 workgroups per dimension (a 248k-token vocabulary's LM head needs
    // the split): rows past the first grid plane must be computed, and no row twice.
    let Some(dev) = common::device() else { return };
    let k = strata_vulkan::Kernels::new(&dev);
    let (ty, rows, cols, n_t) = (GgmlType::Q8_0, 70_000, 32, 2);
    let wb = weights(ty, rows, cols, 77);
    let x = common::values(n_t * cols, 78);
    let want = reference(ty, &wb, rows, cols, &x);
    let w = QMatrix::upload(&dev, ty, rows, cols, &wb).expect("upload weights");
    let xb = transfer::upload_f32(&dev, &x).expect("upload x");
    let yb = Buffer::new(&dev, 4 * (n_t * rows) as u64, Location::Device).expect("alloc y");
    let mut rec = Recorder::new(&dev).expect("recorder");
    k.matmul(&mut rec, &w, &xb, n_t, &yb, None)
        .expect("record matmul");
    rec.submit().expect("submit");
    let got = transfer::read_f32(&dev, &yb, n_t * rows).expect("read y");
    let err = common::rel_err(&got, &want);
    eprintln!("matmul Q8_0 {rows}x{cols} T={n_t}: max|Δ|/max|y| = {err:.2e}");
    assert!(err <= tolerance(ty), "{err:e}");
}

#[test]
fn matmul_adds_its_bias_to_every_token_row() {
    let Some(dev) = common::device() else { return };
    let k = strata_vulkan::Kernels::new(&dev);
    let (ty, rows, cols, n_t) = (GgmlType::Q4_0, 19, 64, 3);
    let wb = weights(ty, rows, cols, 91);
    let x = common::values(n_t * cols, 92);
    let bias = common::values(rows, 93);
    let mut want = reference(ty, &wb, rows, cols, &x);
    for (i, y) in want.iter_mut().enumerate() {
        *y += bias[i % rows];
    }
    let w = QMatrix::upload(&dev, ty, rows, cols, &wb).expect("upload weights");
    let xb = transfer::upload_f32(&dev, &x).expect("upload x");
    let bb = transfer::upload_f32(&dev, &bias).expect("upload bias");
    let yb = Buffer::new(&dev, 4 * (n_t * rows) as u64, Location::Device).expect("alloc y");
    let mut rec = Recorder::new(&dev).expect("recorder");
    k.matmul(&mut rec, &w, &xb, n_t, &yb, Some(&bb))
        .expect("record matmul");
    rec.submit().expect("submit");
    let got = transfer::read_f32(&dev, &yb, n_t * rows).expect("read y");
    let err = common::rel_err(&got, &want);
    eprintln!("matmul Q4_0 + bias: max|Δ|/max|y| = {err:.2e}");
    assert!(err <= tolerance(ty), "{err:e}");
}

#[test]
fn get_rows_dequantizes_table_rows_like_the_cpu() {
    let Some(dev) = common::device() else { return };
    let k = strata_vulkan::Kernels::new(&dev);
    for &ty in MATMUL_TYPES {
        let kq = if ty.block_size() == 256 { 256 } else { 64 };
        let (rows, cols) = (23, 2 * kq);
        let wb = weights(ty, rows, cols, 200 + ty as u64);
        let row_bytes = wb.len() / rows;
        let ids = [3u32, 0, 22, 3, 17];
        let scale = 0.75f32;
        let mut want = vec![0.0f32; ids.len() * cols];
        for (&id, out) in ids.iter().zip(want.chunks_exact_mut(cols)) {
            let src = &wb[id as usize * row_bytes..(id as usize + 1) * row_bytes];
            strata_quant::dequantize(ty, src, out).expect("dequantize");
            out.iter_mut().for_each(|v| *v *= scale);
        }
        let table = QMatrix::upload(&dev, ty, rows, cols, &wb).expect("upload table");
        let out = Buffer::new(&dev, 4 * want.len() as u64, Location::Device).expect("alloc");
        let mut rec = Recorder::new(&dev).expect("recorder");
        k.get_rows(&mut rec, &table, &ids, scale, &out)
            .expect("record");
        rec.submit().expect("submit");
        let got = transfer::read_f32(&dev, &out, want.len()).expect("read");
        let err = common::rel_err(&got, &want);
        eprintln!("get_rows {ty:?}: max|Δ|/max|y| = {err:.2e}");
        assert!(err <= 1e-6, "{ty:?}: {err:e}");
        // An id outside the table is an error, recorded nothing.
        assert!(k.get_rows(&mut rec, &table, &[23], 1.0, &out).is_err());
    }
}
