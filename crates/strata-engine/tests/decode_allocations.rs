//! A decode step allocates nothing: after a prefill and a few warm-up steps (which grow the
//! reused scratch buffers to their size), further single-token `Model::forward` calls make no
//! heap allocation on any thread — the pool workers included — on a real dense model and on
//! the tiny MoE and Qwen3-Next checkpoints (scripts/make_tiny_models.sh).
//!
//! One test in this binary, so no other test allocates while it counts.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use strata_engine::pool::{Pool, PoolOptions};
use strata_engine::sampling::argmax_logits;
use strata_engine::{KvType, Model};

/// The system allocator, counting allocations and reallocations (process-wide).
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `steps` greedy decode steps of `path` on a 2-worker pool, after
/// [`Model::warm_up`], a prompt and warm-up steps. `warm_up` grows every worker's
/// thread-local scratch: without it a worker grows its scratch the first time it happens to
/// take a kind of task, which a busy machine can put off past any number of steps (the caller
/// takes every task while the worker is descheduled). The decode steps then run until 3 in
/// a row allocate nothing (at most 30), for buffers that grow with the context; an allocation
/// made every step never lets them settle and fails the test too.
fn allocations_per_decode(path: &Path, steps: usize) -> usize {
    const SETTLED: usize = 3;
    const MAX_WARM_UP: usize = 30;
    let model = Model::load(path).unwrap();
    let pool = Pool::new(PoolOptions {
        workers: 2,
        ..PoolOptions::default()
    });
    pool.install(|| {
        model.warm_up(KvType::F16).unwrap();
        let prompt = model
            .tokenizer()
            .encode("The quick brown fox jumps over", true, false);
        let mut session = model.new_session(prompt.len() + MAX_WARM_UP + steps, KvType::F16);
        let mut next = argmax_logits(model.forward(&mut session, &prompt).unwrap());
        let mut quiet = 0;
        for _ in 0..MAX_WARM_UP {
            let before = ALLOCATIONS.load(Relaxed);
            next = argmax_logits(model.forward(&mut session, &[next]).unwrap());
            quiet = if ALLOCATIONS.load(Relaxed) == before {
                quiet + 1
            } else {
                0
            };
            if quiet == SETTLED {
                break;
            }
        }
        assert_eq!(
            quiet,
            SETTLED,
            "{}: decode steps still allocate after {MAX_WARM_UP} warm-up steps",
            path.display()
        );
        let before = ALLOCATIONS.load(Relaxed);
        for _ in 0..steps {
            next = argmax_logits(model.forward(&mut session, &[next]).unwrap());
        }
        ALLOCATIONS.load(Relaxed) - before
    })
}

#[test]
fn decode_steps_allocate_nothing() {
    let tiny = common::tiny::tiny_dir();
    let cases = [
        common::model_path("smollm2-135m"),
        tiny.join("qwen3moe-tiny/qwen3moe-tiny-Q4_K_M.gguf"),
        tiny.join("qwen3moe-tiny/qwen3moe-tiny-F32.gguf"),
        tiny.join("qwen3next-tiny/qwen3next-tiny-Q4_K_M.gguf"),
        // Past QSA's budget of 16 within the warm-up: the sparse queries' selection and
        // listed attention.
        tiny.join("qwen4exp-tiny/qwen4exp-tiny-Q4_K_M.gguf"),
    ];
    for path in cases {
        assert!(
            path.exists(),
            "{} is missing: run scripts/make_tiny_models.sh (or .ci/run)",
            path.display()
        );
        let n = allocations_per_decode(&path, 8);
        assert_eq!(
            n,
            0,
            "{}: 8 decode steps made {n} allocations",
            path.display()
        );
    }
}
