//! `gemm` against `vec_dot`: for every weight type with an activation kernel and every
//! instruction-set path this CPU has, each (row, token) entry is bit-identical to `vec_dot_on`
//! the same path, on tile-unfriendly shapes (row and token counts that are not multiples of the
//! tile, odd block counts, output strides wider than the row count), random and edge data. The
//! AVX-VNNI path runs here as its EVEX twin (`strata_quant::testing::AvxVnniTwin`) on CPUs with
//! AVX-512 VNNI but not AVX-VNNI: its gemm against its own `vec_dot`.

mod common;

use common::{Path, Rng};
use strata_quant::testing::{self, AvxVnniTwin};
use strata_quant::{f32_to_f16, gemm, gemm_on, quantize, vec_dot_type, GgmlType, Isa, QuantError};

fn paths() -> Vec<Path> {
    common::available_paths(true)
}

fn vec_dot_types() -> impl Iterator<Item = GgmlType> {
    strata_gguf::ALL_TYPES
        .into_iter()
        .filter(|&ty| vec_dot_type(ty).is_some())
}

/// Byte offsets of the f16 scale fields in a block of `ty`.
fn f16_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType as T;
    match ty {
        T::Q4_1 | T::Q5_1 | T::Q4_K | T::Q5_K => &[0, 2],
        T::Q2_K => &[80, 82],
        T::Q3_K => &[108],
        T::Q6_K => &[208],
        // No scale fields: every BF16 element is a value of its own.
        T::IQ1_M | T::BF16 => &[],
        _ => &[0],
    }
}

/// How the weight bytes and f16 scale fields are filled.
#[derive(Clone, Copy, Debug)]
enum Weights {
    /// Random bytes, scales spread over 2^-10 .. 2^2, either sign.
    Random,
    /// Every byte `fill`, every scale field `scale`.
    Edge { fill: u8, scale: f32 },
}

fn weight_rows(rng: &mut Rng, ty: GgmlType, n_rows: usize, n: usize, how: Weights) -> Vec<u8> {
    let size = ty.type_size();
    let blocks = n_rows * n / ty.block_size();
    let mut w: Vec<u8> = (0..blocks * size)
        .map(|_| match how {
            Weights::Random => rng.next_u64() as u8,
            Weights::Edge { fill, .. } => fill,
        })
        .collect();
    for block in w.chunks_exact_mut(size) {
        for &at in f16_fields(ty) {
            let v = match how {
                Weights::Random => {
                    let sign = if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
                    sign * 2f32.powf(rng.uniform() as f32 * 12.0 - 10.0)
                }
                Weights::Edge { scale, .. } => scale,
            };
            block[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
        }
    }
    w
}

/// Activation rows of one of several kinds, quantized to `vec_dot_type(ty)`.
fn act_rows(rng: &mut Rng, ty: GgmlType, n_tok: usize, n: usize, kind: usize) -> Vec<u8> {
    let act_ty = vec_dot_type(ty).unwrap();
    let row_bytes = act_ty.row_bytes(n as u64).unwrap() as usize;
    let mut acts = vec![0u8; n_tok * row_bytes];
    for (t, dst) in acts.chunks_exact_mut(row_bytes).enumerate() {
        let x: Vec<f32> = match (kind + t) % 6 {
            0 => rng.normals(n, 1.0),
            1 => rng.normals(n, 300.0),
            // All quants ±127: the largest products.
            2 => (0..n)
                .map(|i| if i % 3 == 0 { -5.0 } else { 5.0 })
                .collect(),
            3 => vec![-1e4; n],
            4 => vec![0.0; n],
            _ => (0..n)
                .map(|i| if i % 97 == 0 { 1e3 } else { rng.normal() })
                .collect(),
        };
        quantize(act_ty, &x, dst).unwrap();
    }
    acts
}

/// Runs `path`'s gemm and checks every entry against its `vec_dot` bit for bit, and that the
/// entries outside the output rows are untouched.
#[allow(clippy::too_many_arguments)]
fn check(
    path: Path,
    ty: GgmlType,
    w: &[u8],
    n_rows: usize,
    acts: &[u8],
    n_tok: usize,
    stride: usize,
    what: &str,
) {
    const UNTOUCHED: f32 = 12345.5;
    let mut out = vec![UNTOUCHED; (n_tok - 1) * stride + n_rows + 3];
    path.gemm(ty, w, n_rows, acts, n_tok, &mut out, stride)
        .unwrap();
    let (wrb, arb) = (w.len() / n_rows, acts.len() / n_tok);
    for t in 0..n_tok {
        for r in 0..n_rows {
            let want = path
                .vec_dot(ty, &w[r * wrb..][..wrb], &acts[t * arb..][..arb])
                .unwrap();
            let got = out[t * stride + r];
            // A NaN (random BF16 bytes hold some) matches a NaN: IEEE 754 leaves open which
            // input NaN's payload a sum passes on, and LLVM may swap an add's operands.
            let nan = got.is_nan() && want.is_nan();
            assert!(
                got.to_bits() == want.to_bits() || nan,
                "{ty} on {path}, {what}: row {r} token {t}: gemm {got} ({:#x}), vec_dot {want} \
                 ({:#x})",
                got.to_bits(),
                want.to_bits()
            );
        }
        let gap_end = ((t + 1) * stride).min(out.len());
        for (i, v) in out[t * stride + n_rows..gap_end].iter().enumerate() {
            assert_eq!(
                *v, UNTOUCHED,
                "{ty} on {path}, {what}: token {t} wrote past row {i}"
            );
        }
    }
}

/// (rows, tokens, blocks per row, output stride): odd and tile-sized shapes.
const SHAPES: [(usize, usize, usize, usize); 21] = [
    (1, 1, 1, 1),
    // Decode (one token): the prefetching row loop, prefetches running past the last row.
    (37, 1, 16, 37),
    (3, 1, 1, 5),
    // One token over 7 blocks: steps of several blocks and the blocks after them.
    (21, 1, 7, 21),
    // One token, 11 rows a half and the odd last row, over two whole steps and a block.
    (23, 1, 9, 25),
    (4, 4, 2, 4),
    (5, 7, 3, 9),
    (9, 6, 8, 12),
    (3, 9, 5, 3),
    (8, 8, 4, 11),
    (13, 5, 16, 13),
    // Small batches (several sequences decoding together): 2 and 3 tokens; 12 tokens take
    // the tiles again.
    (6, 2, 3, 6),
    (7, 3, 5, 9),
    (20, 12, 4, 21),
    // AVX-512's block-order formats with 16 tokens in the lanes: a whole token group, one
    // and a bit, and three groups with 16-row groups and their tail.
    (19, 16, 3, 19),
    (9, 17, 5, 11),
    (35, 40, 2, 37),
    // Tokens in lanes with a few tokens after the last whole group (2 × 8 + 5 on AVX2, which
    // take the few-token path; AVX-512 takes row quads here).
    (6, 21, 2, 7),
    // AVX-512's row pairs with 8 tokens in the lanes (block order, IQ3_XXS): two whole
    // register tiles of pairs and an odd last row, whose pair repeats it.
    (33, 7, 5, 35),
    // AVX-512's row quads with 4 tokens in the lanes (9 to 12 tokens and the like): four
    // whole groups of 16 rows and 3 more, a last token group of 2, an odd block count. On
    // plain AVX2 the block-order formats' row pairs (4 tokens a register): a last group of
    // 2, an odd last row.
    (67, 10, 3, 69),
    // Past the row quads' range (48 tokens): three groups of 16 in the lanes and 3 tokens
    // after them, which take the few-token path. On plain AVX2 row pairs again, the last
    // group of 3.
    (5, 51, 2, 6),
];

#[test]
fn gemm_matches_vec_dot_bit_for_bit_on_random_data() {
    let paths = paths();
    let mut rng = Rng::new(21);
    for ty in vec_dot_types() {
        for (i, &(n_rows, n_tok, blocks, stride)) in SHAPES.iter().enumerate() {
            let n = blocks * ty.block_size();
            let w = weight_rows(&mut rng, ty, n_rows, n, Weights::Random);
            let acts = act_rows(&mut rng, ty, n_tok, n, i);
            for &path in &paths {
                let what = format!("{n_rows}×{n_tok}×{blocks} blocks, stride {stride}");
                check(path, ty, &w, n_rows, &acts, n_tok, stride, &what);
            }
        }
    }
}

#[test]
fn gemm_matches_vec_dot_bit_for_bit_on_edge_values() {
    let paths = paths();
    let mut rng = Rng::new(22);
    let fills = [0, 0xff, 0x80, 0x7f, 0x88];
    // f16 max, min normal, a subnormal, zero, negative.
    let scales = [65504.0, 6.1035156e-5, 5.9604645e-8, 0.0, -1.0];
    // Rows with and without blocks after the last whole tile step; 10 tokens: plain AVX2's
    // row pairs for the block-order formats, an odd last row.
    for (n_rows, n_tok, blocks, stride) in [(5, 6, 3, 7), (8, 9, 4, 9), (7, 10, 3, 9)] {
        for ty in vec_dot_types() {
            let n = blocks * ty.block_size();
            for fill in fills {
                for scale in scales {
                    let w = weight_rows(&mut rng, ty, n_rows, n, Weights::Edge { fill, scale });
                    let acts = act_rows(&mut rng, ty, n_tok, n, fill as usize);
                    for &path in &paths {
                        let what = format!("{blocks} blocks, bytes {fill:#x}, scales {scale}");
                        check(path, ty, &w, n_rows, &acts, n_tok, stride, &what);
                    }
                }
            }
        }
    }
}

/// IQ3_XXS on AVX-512 without VBMI (Cascade Lake's kernels, which a CPU with VBMI never
/// runs): its gemm against its own `vec_dot`, on every shape, and both bit-identical to the
/// VBMI kernels' (all of them are in the scalar reference's block order).
#[test]
fn iq3_xxs_without_vbmi_matches_the_vbmi_kernels() {
    if !Isa::Avx512.is_available() {
        eprintln!("no AVX-512 path on this CPU: nothing to compare");
        return;
    }
    let (ty, path) = (GgmlType::IQ3_XXS, Path::Isa(Isa::Avx512));
    let mut rng = Rng::new(24);
    for (i, &(n_rows, n_tok, blocks, stride)) in SHAPES.iter().enumerate() {
        let n = blocks * ty.block_size();
        let w = weight_rows(&mut rng, ty, n_rows, n, Weights::Random);
        let acts = act_rows(&mut rng, ty, n_tok, n, i);
        let what = format!("{n_rows}×{n_tok}×{blocks} blocks, without VBMI");
        testing::without_vbmi(|| check(path, ty, &w, n_rows, &acts, n_tok, stride, &what));
        let run = || {
            let mut out = vec![0.0f32; (n_tok - 1) * stride + n_rows];
            gemm_on(Isa::Avx512, ty, &w, n_rows, &acts, n_tok, &mut out, stride).unwrap();
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(run(), testing::without_vbmi(run), "{ty}, {what}");
    }
}

/// IQ3_XXS's AVX-512 VBMI routes (8-row tiles of 16 tokens in the lanes, and the tails after
/// them through the row pairs or the few-token tile; `gemm/x86/iq3_xxs_vbmi.rs`) against
/// `vec_dot`, bit for bit, on every shape (7, 9 and 11 rows cut the last row group short).
#[cfg(target_arch = "x86_64")]
#[test]
fn iq3_xxs_routes_match_vec_dot() {
    if !Isa::Avx512.is_available() || !testing::vbmi() {
        eprintln!("no AVX-512 VBMI on this CPU: its IQ3_XXS routes cannot run");
        return;
    }
    let (ty, path) = (GgmlType::IQ3_XXS, Path::Isa(Isa::Avx512));
    let mut rng = Rng::new(25);
    // The shapes, plus tails of 1, 3, 4 and 8 tokens after whole groups of 16.
    let extra = [
        (11, 20, 2, 11),
        (9, 24, 3, 10),
        (7, 56, 2, 7),
        (9, 17, 2, 9),
        (11, 35, 2, 11),
    ];
    for (i, &(n_rows, n_tok, blocks, stride)) in SHAPES.iter().chain(&extra).enumerate() {
        let n = blocks * ty.block_size();
        let w = weight_rows(&mut rng, ty, n_rows, n, Weights::Random);
        let acts = act_rows(&mut rng, ty, n_tok, n, i);
        let what = format!("{n_rows}×{n_tok}×{blocks} blocks");
        check(path, ty, &w, n_rows, &acts, n_tok, stride, &what);
    }
}

#[test]
fn gemm_matches_vec_dot_on_model_sized_rows() {
    let paths = paths();
    let mut rng = Rng::new(23);
    for ty in vec_dot_types() {
        // 8192: qwen4exp's attention output width.
        for n in [576, 1536, 4096, 8192] {
            if n % ty.block_size() != 0 {
                continue;
            }
            let w = weight_rows(&mut rng, ty, 6, n, Weights::Random);
            // One token (decode); 5 tokens: a small batch; 8 tokens: a small batch whose
            // prepared activations outgrow the few-token scratch at 4096 columns (the tile
            // loop instead); 130: tiles (for AVX-512's block-order formats, two passes over
            // the rows with 16 tokens in the lanes; for the kernels that prepare every token
            // up front, from 4096 columns, token passes whose prepared steps fit the tile's
            // cache; for plain AVX2's block-order formats, row pairs, 4 tokens a register, in
            // several passes); 133: plain AVX2's block-order formats with 8 tokens in the
            // lanes, in several passes.
            for n_tok in [1, 5, 8, 130, 133] {
                let acts = act_rows(&mut rng, ty, n_tok, n, 0);
                for &path in &paths {
                    check(
                        path,
                        ty,
                        &w,
                        6,
                        &acts,
                        n_tok,
                        6,
                        &format!("{n} columns, {n_tok} tokens"),
                    );
                }
            }
        }
    }
}

#[test]
fn gemm_uses_the_best_path() {
    let mut rng = Rng::new(24);
    let ty = GgmlType::Q4_K;
    let w = weight_rows(&mut rng, ty, 6, 512, Weights::Random);
    let acts = act_rows(&mut rng, ty, 5, 512, 0);
    let (mut a, mut b) = (vec![0.0f32; 30], vec![0.0f32; 30]);
    gemm(ty, &w, 6, &acts, 5, &mut a, 6).unwrap();
    gemm_on(Isa::best(), ty, &w, 6, &acts, 5, &mut b, 6).unwrap();
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
}

#[test]
fn gemm_rejects_bad_shapes_and_types() {
    let ty = GgmlType::Q8_0;
    let (w, acts) = (vec![0u8; 2 * 34], vec![0u8; 3 * 34]);
    let mut out = vec![0.0f32; 6];
    assert!(gemm(ty, &w, 2, &acts, 3, &mut out, 2).is_ok());
    let err = |r: Result<(), QuantError>| matches!(r, Err(QuantError::LengthMismatch { .. }));
    assert!(err(gemm(ty, &w[..67], 2, &acts, 3, &mut out, 2)));
    assert!(err(gemm(ty, &w, 2, &acts[..68], 3, &mut out, 2)));
    assert!(err(gemm(ty, &w, 2, &acts, 3, &mut out[..5], 2)));
    assert!(err(gemm(ty, &w, 2, &acts, 3, &mut out, 1)));
    assert!(matches!(
        gemm(GgmlType::F16, &w, 2, &acts, 3, &mut out, 2),
        Err(QuantError::Unsupported { .. })
    ));
    for isa in Isa::ALL.into_iter().filter(|isa| !isa.is_available()) {
        let got = gemm_on(isa, ty, &w, 2, &acts, 3, &mut out, 2);
        assert_eq!(got, Err(QuantError::IsaUnavailable { isa }));
    }
}

/// Where a CPU has both AVX-VNNI and AVX-512 VNNI, the twin's gemm gives the AVX-VNNI path's
/// bits (prefill tiles and the decode row loop), as its `vec_dot` does (tests/simd.rs).
#[test]
fn avxvnni_twin_gemm_is_bit_identical_to_avxvnni() {
    let (Some(twin), true) = (AvxVnniTwin::new(), Isa::AvxVnni.is_available()) else {
        eprintln!("skipping: this CPU lacks avxvnni or {}", AvxVnniTwin::NAME);
        return;
    };
    let (real, twin) = (Path::Isa(Isa::AvxVnni), Path::AvxVnniTwin(twin));
    let mut rng = Rng::new(25);
    for ty in vec_dot_types() {
        for (i, &(n_rows, n_tok, blocks, stride)) in SHAPES.iter().enumerate() {
            let n = blocks * ty.block_size();
            let w = weight_rows(&mut rng, ty, n_rows, n, Weights::Random);
            let acts = act_rows(&mut rng, ty, n_tok, n, i);
            let len = (n_tok - 1) * stride + n_rows;
            let (mut want, mut got) = (vec![0.0f32; len], vec![0.0f32; len]);
            real.gemm(ty, &w, n_rows, &acts, n_tok, &mut want, stride)
                .unwrap();
            twin.gemm(ty, &w, n_rows, &acts, n_tok, &mut got, stride)
                .unwrap();
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{ty}, {n_rows}×{n_tok}×{blocks} blocks: gemm bits differ"
            );
        }
    }
}
