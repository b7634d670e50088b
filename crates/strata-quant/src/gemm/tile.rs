//! The register-blocked tile loop shared by every SIMD GEMM kernel: `R` weight rows × `T`
//! tokens, each weight step decoded once and applied to the `T` tokens, each activation step
//! prepared once and applied to the `R` rows.
//!
//! A [`Tile`] is one `vec_dot` kernel cut into the parts that depend only on the weights
//! ([`Tile::decode`]), only on the activations ([`Tile::prep`]) and on both ([`Tile::step`]),
//! keeping that kernel's accumulators, their update order and its final reduction, so every
//! (row, token) result is bit-identical to the kernel's.

use std::array;
use std::cell::RefCell;
use std::mem::{align_of, size_of, size_of_val, MaybeUninit};
use std::thread::LocalKey;

use crate::block::{cast_blocks, Block};

/// One `vec_dot` kernel split for tiling.
///
/// The kernel consumes `STEP` blocks per step and, when `CHAINS == 2`, adds even steps into
/// one accumulator and odd steps into another (two FMA chains); blocks after the last whole
/// step go to [`Tile::finish`], which also reduces the accumulators exactly as the kernel does.
pub(crate) trait Tile {
    /// Weight block.
    type W: Block;
    /// Activation block.
    type A: Block;
    /// Blocks per step.
    const STEP: usize;
    /// Accumulators alternating per step: 1 or 2.
    const CHAINS: usize;
    /// The decoded weights of one step.
    type Dec: Copy;
    /// The prepared activations of one step.
    type Prep: Copy;
    /// The float accumulators of one chain for one (row, token) pair.
    type Acc: Copy;

    /// Decodes the `STEP` weight blocks at `w`.
    ///
    /// # Safety
    /// `w` points at `STEP` readable blocks; the kernel's CPU features are available.
    unsafe fn decode(w: *const Self::W) -> Self::Dec;
    /// Prepares the `STEP` activation blocks at `a`, which must stay readable while the result
    /// is used.
    ///
    /// # Safety
    /// As for [`Tile::decode`].
    unsafe fn prep(a: *const Self::A) -> Self::Prep;
    /// Zeroed accumulators.
    ///
    /// # Safety
    /// The kernel's CPU features are available.
    unsafe fn zero() -> Self::Acc;
    /// One step of the kernel's accumulation.
    ///
    /// # Safety
    /// As for [`Tile::zero`].
    unsafe fn step(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc;
    /// [`Tile::step`] of every (row, token) pair of an `R × T` tile: `acc[i][j]` takes row
    /// `w[i]` and token `a[j]`. A kernel whose decoded and prepared steps outgrow the register
    /// file interleaves the pairs' instructions here instead (same operations per pair).
    ///
    /// # Safety
    /// As for [`Tile::zero`].
    #[inline(always)]
    unsafe fn step_tile<const R: usize, const T: usize>(
        acc: &mut [[Self::Acc; T]; R],
        w: [&Self::Dec; R],
        a: [&Self::Prep; T],
    ) {
        for i in 0..R {
            for j in 0..T {
                acc[i][j] = Self::step(acc[i][j], w[i], a[j]);
            }
        }
    }
    /// The kernel's result from its chains (the second is zero when `CHAINS == 1`) and the
    /// blocks after the last whole step.
    ///
    /// # Safety
    /// As for [`Tile::zero`].
    unsafe fn finish(acc: [Self::Acc; 2], w_tail: &[Self::W], a_tail: &[Self::A]) -> f32;
    /// Whether each token's activations are prepared once per product (up front, into a
    /// per-thread scratch) rather than once per group of rows: for kernels whose preparation
    /// costs about as much as a step. Such kernels' tiles also see one-token jobs (through
    /// [`few`]: the activations prepared once, the rows streaming past, where the path's decode
    /// row loop would prepare them again for every row) unless [`Tile::ONE_TOKEN`] says no.
    const PREP_ONCE: bool = false;
    /// Whether one-token jobs run through [`few`] rather than the path's decode row loop: by
    /// default the [`Tile::PREP_ONCE`] kernels, whose row loop would prepare the token once
    /// per row. A kernel whose tiles compute more than its `vec_dot` per product (work moved
    /// out of the step into the decode, paid back only over several tokens) opts out.
    const ONE_TOKEN: bool = Self::PREP_ONCE;
    /// Most tokens [`few`] applies one decoded weight step to while it is in registers: 4, or
    /// 8 for a kernel whose decoding costs several steps and whose accumulators and decoded
    /// step fit the register file eight tokens at a time (the row is then decoded once for a
    /// whole small batch).
    const FEW_GROUP: usize = 4;
    /// Row tiles decoded together, which each token tile then sweeps in turn: its prepared
    /// activations stay in L1 across them, where a single row tile streams every token's
    /// from L2 once per tile. For kernels whose tiles have few rows and large prepared
    /// activations (the 1-row lattice tiles of `gemm/x86/paired_lattice.rs`).
    const ROW_TILES: usize = 1;
    /// Blocks of a *part step*: `0`, or for a kernel with one chain (`CHAINS == 1`) whose
    /// step keeps several blocks' lanes side by side, the first `PART` blocks of a step on
    /// their own. A row with at least `PART` blocks after its whole steps runs them as one
    /// more step ([`Tile::decode_part`], [`Tile::prep_part`], [`Tile::step_part`], the same
    /// lanes and FMAs as the first `PART` blocks of a whole step) instead of through
    /// [`Tile::finish`], which then sees the blocks after the part. Rows whose width is not a
    /// whole number of steps (SmolLM2's 576 columns: 18 Q4_1 blocks, 4 steps of 4 and 2 more)
    /// then decode their last blocks once per row group and prepare them once per token,
    /// where `finish` did both for every (row, token) pair.
    const PART: usize = 0;
    /// Decodes the `PART` weight blocks at `w` (the rest of the value is unspecified).
    ///
    /// # Safety
    /// `w` points at `PART` readable blocks; the kernel's CPU features are available.
    unsafe fn decode_part(w: *const Self::W) -> Self::Dec {
        let _ = w;
        unreachable!("only kernels with PART > 0 have part steps")
    }
    /// Prepares the `PART` activation blocks at `a`, as [`Tile::prep`] does a step's.
    ///
    /// # Safety
    /// As for [`Tile::decode_part`].
    unsafe fn prep_part(a: *const Self::A) -> Self::Prep {
        let _ = a;
        unreachable!("only kernels with PART > 0 have part steps")
    }
    /// The first `PART` blocks of [`Tile::step`], on a part step's decoded weights and
    /// prepared activations.
    ///
    /// # Safety
    /// As for [`Tile::zero`].
    unsafe fn step_part(acc: Self::Acc, w: &Self::Dec, a: &Self::Prep) -> Self::Acc {
        let _ = (acc, w, a);
        unreachable!("only kernels with PART > 0 have part steps")
    }
    /// [`Tile::finish`] of four (row, token) pairs whose rows end on a whole step (no tail
    /// blocks), so a kernel can reduce the four at once.
    ///
    /// # Safety
    /// As for [`Tile::zero`].
    #[inline(always)]
    unsafe fn finish4(acc: [[Self::Acc; 2]; 4]) -> [f32; 4] {
        [
            Self::finish(acc[0], &[], &[]),
            Self::finish(acc[1], &[], &[]),
            Self::finish(acc[2], &[], &[]),
            Self::finish(acc[3], &[], &[]),
        ]
    }
}

/// How a row of `nb` blocks divides among a kernel's steps: `whole` whole steps, then a part
/// step of [`Tile::PART`] blocks where that many are left (`part`), then the blocks
/// `tail..nb`, which [`Tile::finish`] takes.
#[derive(Clone, Copy)]
struct Steps {
    whole: usize,
    part: bool,
    tail: usize,
}

impl Steps {
    #[inline(always)]
    fn of<K: Tile>(nb: usize) -> Steps {
        const { assert!(K::PART == 0 || (K::CHAINS == 1 && K::PART < K::STEP)) };
        let whole = nb / K::STEP;
        let part = K::PART > 0 && nb - whole * K::STEP >= K::PART;
        Steps {
            whole,
            part,
            tail: whole * K::STEP + if part { K::PART } else { 0 },
        }
    }

    /// Decoded or prepared steps a row or token has: the whole steps, then the part step.
    #[inline(always)]
    fn slots(self) -> usize {
        self.whole + usize::from(self.part)
    }
}

/// Step `s` (a whole step, or the part step after them) of the row at `w`, decoded.
///
/// # Safety
/// `s < steps.slots()` for `w`'s row; `K`'s CPU features are available.
#[inline(always)]
unsafe fn decode_slot<K: Tile>(w: *const K::W, s: usize, steps: Steps) -> K::Dec {
    let at = w.add(s * K::STEP);
    if s < steps.whole {
        K::decode(at)
    } else {
        K::decode_part(at)
    }
}

/// Step `s` of the token at `a`, prepared (as [`decode_slot`]).
///
/// # Safety
/// As for [`decode_slot`].
#[inline(always)]
unsafe fn prep_slot<K: Tile>(a: *const K::A, s: usize, steps: Steps) -> K::Prep {
    let at = a.add(s * K::STEP);
    if s < steps.whole {
        K::prep(at)
    } else {
        K::prep_part(at)
    }
}

/// [`Tile::step_tile`] of slot `s`: a whole step, or the part step after them.
///
/// # Safety
/// As for [`Tile::zero`].
#[inline(always)]
unsafe fn step_slot<K: Tile, const R: usize, const T: usize>(
    acc: &mut [[K::Acc; T]; R],
    w: [&K::Dec; R],
    a: [&K::Prep; T],
    s: usize,
    steps: Steps,
) {
    if s < steps.whole {
        K::step_tile(acc, w, a);
    } else {
        for i in 0..R {
            for j in 0..T {
                acc[i][j] = K::step_part(acc[i][j], w[i], a[j]);
            }
        }
    }
}

/// A matrix product as byte rows: the arguments of [`crate::gemm()`], lengths already checked.
pub(crate) struct Job<'a> {
    pub w: &'a [u8],
    pub n_rows: usize,
    pub acts: &'a [u8],
    pub n_tok: usize,
    pub out: &'a mut [f32],
    pub out_stride: usize,
}

impl<'a> Job<'a> {
    /// The job's first `n` tokens and its other tokens as two jobs (same rows).
    ///
    /// # Panics
    /// Unless `0 < n < n_tok`.
    pub(crate) fn split_tokens(self, n: usize) -> (Job<'a>, Job<'a>) {
        assert!(0 < n && n < self.n_tok, "a split inside the job's tokens");
        let act_bytes = self.acts.len() / self.n_tok;
        let (acts0, acts1) = self.acts.split_at(n * act_bytes);
        // Token `t` writes `out[t·stride ..][.. n_rows]`, `n_rows <= stride`.
        let (out0, out1) = self.out.split_at_mut(n * self.out_stride);
        let (w, n_rows, out_stride) = (self.w, self.n_rows, self.out_stride);
        (
            Job {
                w,
                n_rows,
                acts: acts0,
                n_tok: n,
                out: out0,
                out_stride,
            },
            Job {
                w,
                n_rows,
                acts: acts1,
                n_tok: self.n_tok - n,
                out: out1,
                out_stride,
            },
        )
    }
}

/// Bytes of decoded weights [`few`] may cache for one row (per thread): beyond this the row
/// is decoded again for every group of tokens. Also the most that [`Tile::ROW_TILES`] row
/// tiles decoded together may take.
const DEC_CACHE_BYTES: usize = 64 << 10;

/// Bytes of decoded weights a group of rows of [`run`] may cache (per thread): beyond this
/// the rows are decoded again for every tile of tokens. A quarter of a 1 MiB L2: the rows
/// are read again for every tile, and decoding them again costs far more than reading them
/// from L2 (criterion `wide/…`, Zen 5, 128 rows × 64 tokens, G products/s, AVX-512 /
/// AVX-VNNI / plain AVX2, 64 KiB → 256 KiB: Q4_K over 14336 columns 127 / 43 / 45 → 130 /
/// 126 / 120; Q6_K over 8192 105 / 59 / 61 → 126 / 77 / 74; Q5_K over 8192 84 / 53 / 57 →
/// 118 / 64 / 71): the down projections of 7–8B dense models.
const TILE_DEC_CACHE_BYTES: usize = 256 << 10;

/// A cache line of scratch: the decoded weights of a row group live in a `Vec` of these.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Line([u8; 64]);

thread_local! {
    /// Per-thread scratch for decoded weights; grows to the largest row group seen.
    static DEC_CACHE: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// The start of a per-thread scratch grown to at least `lines` cache lines, as a `T` pointer
/// (`T` aligned to at most a line). The pointer is used after the borrow ends: see the callers.
pub(crate) fn scratch<T>(cache: &'static LocalKey<RefCell<Vec<Line>>>, lines: usize) -> *mut T {
    cache.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() < lines {
            cache.resize(lines, Line([0; 64]));
        }
        cache.as_mut_ptr().cast::<T>()
    })
}

/// `job` in tiles of `R` rows × `T` tokens; the rows and tokens left over at the edges run as
/// 1-row or 1-token tiles. Each group of `R` rows is decoded once into a per-thread cache and
/// then sweeps every token, so the decoded weights stay in L1 (L2 for wide rows, up to
/// [`TILE_DEC_CACHE_BYTES`]) while the activations stream from L2 (rows too long for the
/// cache are decoded per tile instead). `false` (nothing
/// written) for a one-token job unless `K` asks for those ([`Tile::ONE_TOKEN`]): the path's
/// decode row loop runs them.
///
/// A [`Tile::PREP_ONCE`] kernel whose prepared tokens would outgrow
/// [`TILE_PREP_CACHE_BYTES`] runs the tokens in passes that fit ([`token_pass`]), each pass
/// decoding the rows again: otherwise every tile would prepare its tokens anew, once per
/// (row tile, token) (the qwen4exp attention output, IQ3_S over 8192 columns, 64 tokens a
/// prefill tile: 590 KiB of prepared steps). Every (row, token) pair is the same `vec_dot`
/// in any pass, so the passes change no bits.
///
/// # Safety
/// `K`'s CPU features are available; `job`'s lengths were checked by `gemm`.
#[inline(always)]
pub(crate) unsafe fn run<K: Tile, const R: usize, const T: usize>(job: Job<'_>) -> bool {
    if job.n_tok == 1 && !K::ONE_TOKEN {
        return false;
    }
    const CHECKED: &str = "gemm checked the lengths";
    let w: &[K::W] = cast_blocks(job.w).expect(CHECKED);
    let a: &[K::A] = cast_blocks(job.acts).expect(CHECKED);
    let nb = w.len() / job.n_rows;
    assert_eq!(a.len(), nb * job.n_tok, "{CHECKED}");
    let mut m = Mat {
        w,
        a,
        nb,
        out: job.out,
        stride: job.out_stride,
    };
    let (n_rows, n_tok) = (job.n_rows, job.n_tok);
    let few_min = if K::ONE_TOKEN { 1 } else { 2 };
    if (few_min..=FEW_MAX).contains(&n_tok) && few::<K>(&mut m, n_rows, n_tok) {
        return true;
    }
    let steps = Steps::of::<K>(nb);
    let pass = if K::PREP_ONCE && align_of::<K::Prep>() <= align_of::<Line>() {
        token_pass(n_tok, steps.slots() * size_of::<K::Prep>(), T)
    } else {
        n_tok
    };
    let (a, out, stride) = (m.a, m.out, m.stride);
    for t0 in (0..n_tok).step_by(pass) {
        let t1 = (t0 + pass).min(n_tok);
        let mut m = Mat {
            w,
            a: &a[t0 * nb..t1 * nb],
            nb,
            out: &mut out[t0 * stride..],
            stride,
        };
        run_pass::<K, R, T>(&mut m, n_rows, t1 - t0);
    }
    true
}

/// Tokens per pass of [`run`]: all `n_tok` when their prepared steps (`per_token` bytes each)
/// fit [`TILE_PREP_CACHE_BYTES`] or not even `t` of them do; else equal passes, multiples of
/// `t`, that fit.
fn token_pass(n_tok: usize, per_token: usize, t: usize) -> usize {
    let most = TILE_PREP_CACHE_BYTES / per_token.max(1) / t * t;
    if most == 0 || n_tok <= most {
        return n_tok;
    }
    let passes = n_tok.div_ceil(most);
    n_tok.div_ceil(passes).next_multiple_of(t).min(most)
}

/// The tiles of [`run`] for all `n_tok` tokens of `m`.
///
/// # Safety
/// As for [`run`].
#[inline(always)]
unsafe fn run_pass<K: Tile, const R: usize, const T: usize>(
    m: &mut Mat<'_, K::W, K::A>,
    n_rows: usize,
    n_tok: usize,
) {
    let nb = m.nb;
    let (rows_tiled, toks_tiled) = (n_rows / R * R, n_tok / T * T);
    // A kernel with a costly preparation prepares every token once, up front, instead of once
    // per group of rows (no closure: see below).
    let steps = Steps::of::<K>(nb);
    let n_slots = steps.slots();
    let prep_bytes = n_tok * n_slots * size_of::<K::Prep>();
    let preps = (K::PREP_ONCE
        && prep_bytes <= TILE_PREP_CACHE_BYTES
        && align_of::<K::Prep>() <= align_of::<Line>())
    .then(|| scratch::<K::Prep>(&PREP_CACHE, prep_bytes.div_ceil(size_of::<Line>())));
    if let Some(prep) = preps {
        // SAFETY (of using `prep` past the borrow): as for `DEC_CACHE` below.
        // Token-major: `prep[t·n_slots + s]` is step `s` of token `t`.
        for t in 0..n_tok {
            let tok = &m.a[t * nb..(t + 1) * nb];
            for s in 0..n_slots {
                prep.add(t * n_slots + s)
                    .write(prep_slot::<K>(tok.as_ptr(), s, steps));
            }
        }
    }
    let preps = preps.map(|p| p.cast_const());
    let dec_bytes = R * n_slots * size_of::<K::Dec>();
    let cacheable = n_tok > T
        && dec_bytes <= TILE_DEC_CACHE_BYTES
        && align_of::<K::Dec>() <= align_of::<Line>();
    if !cacheable {
        for r in (0..rows_tiled).step_by(R) {
            for t in (0..toks_tiled).step_by(T) {
                tile::<K, R, T>(m, r, t, None, preps);
            }
            for t in toks_tiled..n_tok {
                tile::<K, R, 1>(m, r, t, None, preps);
            }
        }
        for r in rows_tiled..n_rows {
            for t in (0..toks_tiled).step_by(T) {
                tile::<K, 1, T>(m, r, t, None, preps);
            }
            for t in toks_tiled..n_tok {
                tile::<K, 1, 1>(m, r, t, None, preps);
            }
        }
        return;
    }
    // No closure runs the kernels (it would not inherit the caller's target features): the
    // scratch is only sized inside one, and used after it.
    // `ROW_TILES` row tiles at a time where their decoded rows fit [`DEC_CACHE_BYTES`], so
    // that each token tile's prepared steps stay in L1 across them (a branch compiled only
    // into the kernels that ask for it).
    let sweep = K::ROW_TILES > 1 && K::ROW_TILES * dec_bytes <= DEC_CACHE_BYTES;
    let lines = (if sweep { K::ROW_TILES } else { 1 } * dec_bytes).div_ceil(size_of::<Line>());
    let dec = scratch::<K::Dec>(&DEC_CACHE, lines);
    // SAFETY (of using `dec` past the borrow): the scratch is per thread, only `run` touches
    // it, and `run` neither recurses nor yields, so nothing resizes or reads it meanwhile.
    let mut swept = 0;
    if sweep {
        let per_tile = R * n_slots;
        while swept + K::ROW_TILES * R <= rows_tiled {
            let r = swept;
            for k in 0..K::ROW_TILES {
                decode_rows::<K, R>(m, r + k * R, dec.add(k * per_tile));
            }
            prefetch_rows(
                m,
                r + K::ROW_TILES * R..(r + 2 * K::ROW_TILES * R).min(n_rows),
            );
            for t in (0..toks_tiled).step_by(T) {
                for k in 0..K::ROW_TILES {
                    let dec = Some(dec.add(k * per_tile).cast_const());
                    tile::<K, R, T>(m, r + k * R, t, dec, preps);
                }
            }
            for t in toks_tiled..n_tok {
                for k in 0..K::ROW_TILES {
                    let dec = Some(dec.add(k * per_tile).cast_const());
                    tile::<K, R, 1>(m, r + k * R, t, dec, preps);
                }
            }
            swept += K::ROW_TILES * R;
        }
    }
    for r in (swept..rows_tiled).step_by(R) {
        decode_rows::<K, R>(m, r, dec);
        // The next group's weights come from DRAM (each expert's are read once per chunk)
        // while this group's tiles compute.
        prefetch_rows(m, r + R..(r + 2 * R).min(n_rows));
        for t in (0..toks_tiled).step_by(T) {
            tile::<K, R, T>(m, r, t, Some(dec), preps);
        }
        for t in toks_tiled..n_tok {
            tile::<K, R, 1>(m, r, t, Some(dec), preps);
        }
    }
    for r in rows_tiled..n_rows {
        decode_rows::<K, 1>(m, r, dec);
        for t in (0..toks_tiled).step_by(T) {
            tile::<K, 1, T>(m, r, t, Some(dec), preps);
        }
        for t in toks_tiled..n_tok {
            tile::<K, 1, 1>(m, r, t, Some(dec), preps);
        }
    }
}

/// Decodes every whole step of rows `r0..r0 + R` and their part step, if any, into `dec`,
/// step-major: `dec[s·R + i]` is step `s` of row `r0 + i`.
///
/// # Safety
/// `dec` has room for `R · Steps::of::<K>(nb).slots()` aligned values; `K`'s CPU features
/// are available.
#[inline(always)]
unsafe fn decode_rows<K: Tile, const R: usize>(
    m: &Mat<'_, K::W, K::A>,
    r0: usize,
    dec: *mut K::Dec,
) {
    let nb = m.nb;
    let rows: [&[K::W]; R] = array::from_fn(|i| &m.w[(r0 + i) * nb..(r0 + i + 1) * nb]);
    let steps = Steps::of::<K>(nb);
    for s in 0..steps.slots() {
        for (i, row) in rows.iter().enumerate() {
            // Slot `s` is inside the row; `s·R + i < R·slots`: inside `dec`.
            dec.add(s * R + i)
                .write(decode_slot::<K>(row.as_ptr(), s, steps));
        }
    }
}

/// The blocks of a job: `nb` blocks per row and per token.
struct Mat<'a, W, A> {
    w: &'a [W],
    a: &'a [A],
    nb: usize,
    out: &'a mut [f32],
    stride: usize,
}

/// Rows `r0..r0 + R` × tokens `t0..t0 + T`, the weights taken from `dec` (as filled by
/// [`decode_rows`] for these rows) when given, else decoded here; the activations from
/// `preps` (every step of every token, token-major) when given, else prepared here.
///
/// # Safety
/// As for [`run`]; `dec`, if given, holds the decoded steps of exactly these rows; `preps`, if
/// given, every prepared step of every token of the job.
#[inline(always)]
unsafe fn tile<K: Tile, const R: usize, const T: usize>(
    m: &mut Mat<'_, K::W, K::A>,
    r0: usize,
    t0: usize,
    dec: Option<*const K::Dec>,
    preps: Option<*const K::Prep>,
) {
    let nb = m.nb;
    let rows: [&[K::W]; R] = array::from_fn(|i| &m.w[(r0 + i) * nb..(r0 + i + 1) * nb]);
    let toks: [&[K::A]; T] = array::from_fn(|j| &m.a[(t0 + j) * nb..(t0 + j + 1) * nb]);
    let steps = Steps::of::<K>(nb);
    let n_slots = steps.slots();
    // The kernels' two FMA chains never mix before `finish`, so each runs over the whole row in
    // turn: the same per-lane operations in the same order, with half the live accumulators.
    // (A kernel with a part step has one chain; the part step is its last.)
    let mut chains = [[[K::zero(); T]; R]; 2];
    for (c, chain) in chains.iter_mut().enumerate().take(K::CHAINS) {
        let mut acc = [[K::zero(); T]; R];
        let mut s = c;
        while s < n_slots {
            // Slot `s` lies inside every row and token slice below.
            // The prepared steps and the decoded rows are read where they lie when they were
            // made up front (no copies: a copy of a large step would spill through the stack
            // on every step); made here, they live in `made` / `decoded`. No closures that run
            // kernels here: a closure would not inherit the caller's target features.
            let mut made = [MaybeUninit::<K::Prep>::uninit(); T];
            let prep: [&K::Prep; T] = match preps {
                Some(p) => array::from_fn(|j| &*p.add((t0 + j) * n_slots + s)),
                None => {
                    for (j, made) in made.iter_mut().enumerate() {
                        made.write(prep_slot::<K>(toks[j].as_ptr(), s, steps));
                    }
                    array::from_fn(|j| made[j].assume_init_ref())
                }
            };
            let mut decoded = [MaybeUninit::<K::Dec>::uninit(); R];
            let dec: [&K::Dec; R] = match dec {
                Some(d) => array::from_fn(|i| &*d.add(s * R + i)),
                None => {
                    for (i, decoded) in decoded.iter_mut().enumerate() {
                        decoded.write(decode_slot::<K>(rows[i].as_ptr(), s, steps));
                    }
                    array::from_fn(|i| decoded[i].assume_init_ref())
                }
            };
            step_slot::<K, R, T>(&mut acc, dec, prep, s, steps);
            s += K::CHAINS;
        }
        *chain = acc;
    }
    let tail = steps.tail;
    if tail == nb && (R * T).is_multiple_of(4) {
        // Pairs in token-major order, four at a time.
        for q in (0..R * T).step_by(4) {
            let mut acc = [[K::zero(); 2]; 4];
            for (k, acc) in acc.iter_mut().enumerate() {
                let (j, i) = ((q + k) / R, (q + k) % R);
                *acc = [chains[0][i][j], chains[1][i][j]];
            }
            let sums = K::finish4(acc);
            for (k, sum) in sums.into_iter().enumerate() {
                let (j, i) = ((q + k) / R, (q + k) % R);
                m.out[(t0 + j) * m.stride + r0 + i] = sum;
            }
        }
        return;
    }
    for j in 0..T {
        let out = &mut m.out[(t0 + j) * m.stride + r0..][..R];
        for i in 0..R {
            let acc = [chains[0][i][j], chains[1][i][j]];
            out[i] = K::finish(acc, &rows[i][tail..], &toks[j][tail..]);
        }
    }
}

/// Most tokens that take the small-batch path ([`few`]): a decode step of several sequences
/// or a speculative verify window.
pub(crate) const FEW_MAX: usize = 8;

/// Bytes of prepared activations [`run`] may keep for a [`Tile::PREP_ONCE`] kernel (per
/// thread): a quarter of a 2 MiB L2.
const TILE_PREP_CACHE_BYTES: usize = 512 << 10;

/// Bytes of prepared activations [`few`] may keep (per thread) for one token.
const PREP_CACHE_BYTES: usize = 64 << 10;

/// Bytes of prepared activations [`few`] takes for several tokens: every row reads all of
/// them, so past L1 the tiles of [`run`], which read each prepared step once per group of
/// rows, are faster (AVX-512 Q5_0 and IQ4_NL, 8 tokens × 2048 columns: +21–23 %).
const FEW_PREP_BYTES: usize = 32 << 10;

thread_local! {
    /// Per-thread scratch for the prepared activations of a small batch.
    static PREP_CACHE: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// A small batch (2 to [`FEW_MAX`] tokens: several sequences decoding together; from one
/// token for a [`Tile::ONE_TOKEN`] kernel): every token's activations are prepared once into
/// a per-thread scratch, then the rows stream by one at a time (two at a time, in one loop, for
/// one token: [`one_token_rows`]), each weight step decoded once
/// and applied to every token (in groups of at most [`Tile::FEW_GROUP`], the decoded step
/// staying in registers; past one group the row is decoded once into a per-thread scratch that
/// every group reads), with the bytes ahead of the row prefetched as the
/// one-token row loop does. The weights are read and decoded once for the
/// whole batch, where the tiles of [`run`] would decode them once per token tile. `false`
/// (nothing written) when the prepared activations would not fit the scratch (for several
/// tokens: [`FEW_PREP_BYTES`]).
///
/// # Safety
/// As for [`run`]; `1 <= n_tok <= FEW_MAX`.
#[inline(always)]
unsafe fn few<K: Tile>(m: &mut Mat<'_, K::W, K::A>, n_rows: usize, n_tok: usize) -> bool {
    let nb = m.nb;
    let n_slots = Steps::of::<K>(nb).slots();
    let prep_bytes = n_tok * n_slots * size_of::<K::Prep>();
    let budget = if n_tok == 1 {
        PREP_CACHE_BYTES
    } else {
        FEW_PREP_BYTES
    };
    if prep_bytes > budget || align_of::<K::Prep>() > align_of::<Line>() {
        return false;
    }
    let lines = prep_bytes.div_ceil(size_of::<Line>());
    let prep = scratch::<K::Prep>(&PREP_CACHE, lines);
    // SAFETY (of using `prep` past the borrow): as for `DEC_CACHE` in `run`.
    // Token-major: `prep[t·n_slots + s]` is step `s` of token `t`.
    let steps = Steps::of::<K>(nb);
    for t in 0..n_tok {
        let tok = &m.a[t * nb..(t + 1) * nb];
        for s in 0..n_slots {
            prep.add(t * n_slots + s)
                .write(prep_slot::<K>(tok.as_ptr(), s, steps));
        }
    }
    // Tokens per group (below); with more tokens than one group each row is decoded once into
    // a per-thread scratch that the groups then read, instead of once per group.
    let group = if K::FEW_GROUP >= 8 { 8 } else { 4 };
    let dec_bytes = n_slots * size_of::<K::Dec>();
    let dec = (n_tok > group
        && dec_bytes <= DEC_CACHE_BYTES
        && align_of::<K::Dec>() <= align_of::<Line>())
    .then(|| scratch::<K::Dec>(&DEC_CACHE, dec_bytes.div_ceil(size_of::<Line>())));
    // SAFETY (of using `dec` past the borrow): as for `DEC_CACHE` in `run`.
    let row_bytes = nb * size_of::<K::W>();
    // SAFETY: the blocks' own bytes (plain-data blocks, no padding), for prefetch addresses.
    let w_bytes = std::slice::from_raw_parts(m.w.as_ptr().cast::<u8>(), size_of_val(m.w));
    // Two streams, as the one-token row loop: rows h + i and i alternate, each prefetched
    // ahead within its half.
    let h = if n_rows >= 8 { n_rows / 2 } else { 0 };
    let (wa, wb) = w_bytes.split_at(h * row_bytes);
    if n_tok == 1 && h > 0 {
        // One token: rows h + i and i in one loop, so their accumulation chains interleave
        // (a kernel with one chain a row, as the block-order formats', is otherwise bound by
        // its adds' latency).
        for i in 0..h {
            prefetch_ahead(wb, i * row_bytes, row_bytes);
            prefetch_ahead(wa, i * row_bytes, row_bytes);
            one_token_rows::<K>(m, [h + i, i], prep);
        }
        if n_rows - h > h {
            let r = n_rows - 1;
            prefetch_ahead(wb, h * row_bytes, row_bytes);
            few_row::<K, 1>(m, r, 0, prep, None);
        }
        return true;
    }
    for i in 0..n_rows - h {
        for (k, (half, base)) in [(wb, h), (wa, 0)].into_iter().enumerate() {
            if k == 1 && i >= h {
                break;
            }
            prefetch_ahead(half, i * row_bytes, row_bytes);
            let r = base + i;
            if let Some(dec) = dec {
                decode_rows::<K, 1>(m, r, dec);
            }
            let dec = dec.map(|d| d.cast_const());
            let mut t = 0;
            while t < n_tok {
                // No closures: they would not inherit the caller's target features.
                let left = n_tok - t;
                if group == 8 && left > 4 {
                    match left {
                        5 => few_row::<K, 5>(m, r, t, prep, dec),
                        6 => few_row::<K, 6>(m, r, t, prep, dec),
                        7 => few_row::<K, 7>(m, r, t, prep, dec),
                        _ => few_row::<K, 8>(m, r, t, prep, dec),
                    }
                    t += 8;
                    continue;
                }
                match left {
                    1 => few_row::<K, 1>(m, r, t, prep, dec),
                    2 => few_row::<K, 2>(m, r, t, prep, dec),
                    3 => few_row::<K, 3>(m, r, t, prep, dec),
                    _ => few_row::<K, 4>(m, r, t, prep, dec),
                }
                t += 4;
            }
        }
    }
    true
}

/// Row `r` × tokens `t0..t0 + T` of a small batch, the tokens' prepared steps read from
/// `prep` (as filled by [`few`]) and the row's decoded steps from `dec` when given (as filled
/// by [`decode_rows`] for this row), else decoded here: the accumulation of [`tile`] for one
/// row, step for step.
///
/// # Safety
/// As for [`few`]; `prep` holds every step (the part step included) of every token of the
/// batch; `dec`, if given, every step of row `r`, its part step included.
#[inline(always)]
unsafe fn few_row<K: Tile, const T: usize>(
    m: &mut Mat<'_, K::W, K::A>,
    r: usize,
    t0: usize,
    prep: *const K::Prep,
    dec: Option<*const K::Dec>,
) {
    let nb = m.nb;
    let steps = Steps::of::<K>(nb);
    let n_slots = steps.slots();
    let row = &m.w[r * nb..(r + 1) * nb];
    let mut chains = [[K::zero(); T]; 2];
    for (c, chain) in chains.iter_mut().enumerate().take(K::CHAINS) {
        let mut acc = [K::zero(); T];
        let mut s = c;
        while s < steps.whole {
            // `s·STEP + STEP <= nb`: inside the row.
            let decoded;
            let dec: &K::Dec = match dec {
                Some(d) => &*d.add(s),
                None => {
                    decoded = K::decode(row.as_ptr().add(s * K::STEP));
                    &decoded
                }
            };
            let preps: [&K::Prep; T] = array::from_fn(|j| &*prep.add((t0 + j) * n_slots + s));
            let mut tile = [acc];
            K::step_tile::<1, T>(&mut tile, [dec], preps);
            [acc] = tile;
            s += K::CHAINS;
        }
        *chain = acc;
    }
    // The part step, after the loop (as in `one_token_rows`).
    if steps.part {
        let s = steps.whole;
        let decoded;
        let dec: &K::Dec = match dec {
            Some(d) => &*d.add(s),
            None => {
                decoded = K::decode_part(row.as_ptr().add(s * K::STEP));
                &decoded
            }
        };
        let preps: [&K::Prep; T] = array::from_fn(|j| &*prep.add((t0 + j) * n_slots + s));
        let mut tile = [chains[0]];
        step_slot::<K, 1, T>(&mut tile, [dec], preps, s, steps);
        [chains[0]] = tile;
    }
    let tail = steps.tail;
    let [c0, c1] = chains;
    for (j, acc) in c0.into_iter().zip(c1).enumerate() {
        let tok = &m.a[(t0 + j) * nb..(t0 + j + 1) * nb];
        m.out[(t0 + j) * m.stride + r] = K::finish([acc.0, acc.1], &row[tail..], &tok[tail..]);
    }
}

/// Rows `r[0]` and `r[1]` × the one token of a job, its prepared steps read from `prep` (as
/// filled by [`few`]): [`few_row`] for two rows at once (each row's accumulation unchanged).
///
/// # Safety
/// As for [`few_row`], with one token.
#[inline(always)]
unsafe fn one_token_rows<K: Tile>(
    m: &mut Mat<'_, K::W, K::A>,
    r: [usize; 2],
    prep: *const K::Prep,
) {
    let nb = m.nb;
    let steps = Steps::of::<K>(nb);
    let rows: [&[K::W]; 2] = array::from_fn(|i| &m.w[r[i] * nb..(r[i] + 1) * nb]);
    let mut chains = [[[K::zero(); 1]; 2]; 2];
    for (c, chain) in chains.iter_mut().enumerate().take(K::CHAINS) {
        let mut acc = [[K::zero(); 1]; 2];
        let mut s = c;
        while s < steps.whole {
            // `s·STEP + STEP <= nb`: inside both rows.
            // No closure decodes: it would not inherit the caller's target features.
            let dec = [
                K::decode(rows[0].as_ptr().add(s * K::STEP)),
                K::decode(rows[1].as_ptr().add(s * K::STEP)),
            ];
            K::step_tile::<2, 1>(&mut acc, [&dec[0], &dec[1]], [&*prep.add(s)]);
            s += K::CHAINS;
        }
        *chain = acc;
    }
    // The part step, after the whole steps' loop (a branch in the loop slows the decode rows).
    if steps.part {
        let s = steps.whole;
        let dec = [
            K::decode_part(rows[0].as_ptr().add(s * K::STEP)),
            K::decode_part(rows[1].as_ptr().add(s * K::STEP)),
        ];
        step_slot::<K, 2, 1>(
            &mut chains[0],
            [&dec[0], &dec[1]],
            [&*prep.add(s)],
            s,
            steps,
        );
    }
    let tail = steps.tail;
    let tok = &m.a[..nb];
    for i in 0..2 {
        let acc = [chains[0][i][0], chains[1][i][0]];
        m.out[r[i]] = K::finish(acc, &rows[i][tail..], &tok[tail..]);
    }
}

/// Asks for the bytes of weight rows `rows` (a hint only; nothing off x86-64).
#[inline(always)]
unsafe fn prefetch_rows<W, A>(m: &Mat<'_, W, A>, rows: std::ops::Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    {
        let row_bytes = m.nb * size_of::<W>();
        // SAFETY: the blocks' own bytes (plain-data blocks, no padding).
        let w = std::slice::from_raw_parts(m.w.as_ptr().cast::<u8>(), size_of_val(m.w));
        crate::dot::x86::prefetch(w, rows.start * row_bytes, rows.end * row_bytes);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (m, rows);
}

/// Asks for the bytes `PREFETCH_BYTES` past row `at..at + len` of `w` (a hint only; nothing
/// off x86-64).
#[inline(always)]
unsafe fn prefetch_ahead(w: &[u8], at: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::dot::x86::{prefetch, PREFETCH_BYTES};
        prefetch(w, at + PREFETCH_BYTES, at + len + PREFETCH_BYTES);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (w, at, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_passes_fit_the_prepared_cache_in_equal_multiples_of_the_tile() {
        // qwen4exp's attention output: IQ3_S over 8192 columns (32 steps of 288 bytes), 64
        // tokens a prefill tile, 4 tokens a tile: 56 fit, so two passes of 32.
        assert_eq!(token_pass(64, 32 * 288, 4), 32);
        // 102 fit (2 a tile): 130 tokens in passes of 66 and 64.
        assert_eq!(token_pass(130, 16 * 320, 2), 66);
        // All fit: one pass.
        assert_eq!(token_pass(64, 8 * 320, 2), 64);
        // Not even one tile's tokens fit: one pass (the tiles prepare their own tokens).
        assert_eq!(token_pass(64, TILE_PREP_CACHE_BYTES, 4), 64);
        for n_tok in 1..300 {
            let pass = token_pass(n_tok, 9000, 4);
            assert!(
                pass == n_tok || (pass.is_multiple_of(4) && pass * 9000 <= TILE_PREP_CACHE_BYTES)
            );
        }
    }
}
