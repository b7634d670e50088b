//! `Backend::attend` on the Vulkan device against the CPU backend: GQA, a sliding window,
//! two sequences in one run at different positions (one continuing a prefix written by an
//! earlier run), both KV types, a head size that is not a multiple of the workgroup.

mod common;

use strata_engine::backend::{Backend, Buf, Cpu};
use strata_engine::kv_cache::{KvCache, KvType};
use strata_engine::ops::attention::AttnShape;
use strata_engine::session::SeqRun;
use strata_vulkan::Vulkan;

/// Runs a prefix of `prefix` rows on sequence B alone, then a run of `n_a` rows of a fresh
/// sequence A (position 0) and `n_b` rows of B (position `prefix`); returns both outputs.
fn run<B: Backend>(
    be: &B,
    shape: &AttnShape,
    ty: KvType,
    sizes: (usize, usize, usize),
) -> Vec<f32> {
    let (prefix, n_a, n_b) = sizes;
    let (qw, kw) = (
        shape.n_head * shape.head_dim,
        shape.n_kv_head * shape.head_dim,
    );
    let mut kv_a = KvCache::new(1, 512, kw, ty);
    let mut kv_b = KvCache::new(1, 512, kw, ty);
    let mut out = Vec::new();
    let mut step = |seqs: &mut [SeqRun<'_>], t: usize, seed: u64| {
        let (mut q, mut k, mut v, mut o) = (
            Buf::<B>::default(),
            Buf::<B>::default(),
            Buf::<B>::default(),
            Buf::<B>::default(),
        );
        be.upload(&common::values(t * qw, seed), qw, &mut q);
        be.upload(&common::values(t * kw, seed + 1), kw, &mut k);
        be.upload(&common::values(t * kw, seed + 2), kw, &mut v);
        be.attend(seqs, 0, &q, &k, &v, shape, &mut o);
        be.finish().expect("attend");
        out.extend_from_slice(be.host(&mut o));
    };
    step(
        &mut [SeqRun {
            kv: &mut kv_b.layers,
            rec: None,
            pos0: 0,
            rows: 0..prefix,
        }],
        prefix,
        1,
    );
    step(
        &mut [
            SeqRun {
                kv: &mut kv_a.layers,
                rec: None,
                pos0: 0,
                rows: 0..n_a,
            },
            SeqRun {
                kv: &mut kv_b.layers,
                rec: None,
                pos0: prefix,
                rows: n_a..n_a + n_b,
            },
        ],
        n_a + n_b,
        10,
    );
    out
}

#[test]
fn attention_matches_the_cpu_with_gqa_windows_and_two_sequences() {
    let Some(dev) = common::device() else { return };
    let vk = Vulkan::on(&dev);
    let pool = strata_engine::pool::Pool::new(Default::default());
    let cpu = Cpu::new(&pool);
    let mut worst = 0.0f32;
    // (3, 1, 9): rows of an odd length, which an f16 cache mirrors as f32 rounded through f16
    // (KvFormat::F32RoundedF16); the others mirror it as f16.
    for (n_head, n_kv_head, head_dim) in [(4, 2, 64), (6, 2, 80), (2, 2, 256), (3, 1, 9)] {
        for window in [None, Some(7)] {
            for ty in [KvType::F32, KvType::F16] {
                let shape = AttnShape {
                    n_head,
                    n_kv_head,
                    head_dim,
                    scale: 1.0 / (head_dim as f32).sqrt(),
                    window,
                };
                let sizes = (37, 5, 3);
                let want = run(&cpu, &shape, ty, sizes);
                let got = run(&vk, &shape, ty, sizes);
                let err = common::rel_err(&got, &want);
                worst = worst.max(err);
                assert!(
                    err < 1e-5,
                    "{n_head}/{n_kv_head} heads of {head_dim}, window {window:?}, {ty:?}: {err:.2e}"
                );
            }
        }
    }
    eprintln!("attention: max |Δ| / max |y| = {worst:.2e}");
}
