//! The CPU worker pool: threads created once, pinned to the CPUs [`crate::topology`] chose,
//! woken per op by a spin-then-park signal; the calling thread takes part as worker 0.
//!
//! An op is a number of tasks; workers (caller included) take task indices from a shared
//! counter until none are left, so a core slowed by another process just takes fewer tasks.
//! Nothing is allocated or spawned per op. Ops never depend on which worker ran a task, so
//! results are bit-identical for any worker count (`tests/pool_determinism.rs`).
//!
//! Ops use [`with_current`]: the pool [`Pool::install`]ed on this thread, else the global pool
//! ([`init_global`], or an automatic one on first use). A call made from inside a task (nested
//! parallelism) runs its tasks inline; calls from several threads take turns.
//!
//! # Example
//! ```
//! use strata_engine::pool::{Pool, PoolOptions};
//! let pool = Pool::new(PoolOptions { workers: 2, ..PoolOptions::default() });
//! let sum = std::sync::atomic::AtomicUsize::new(0);
//! pool.run(100, |task| {
//!     sum.fetch_add(task, std::sync::atomic::Ordering::Relaxed);
//! });
//! assert_eq!(sum.into_inner(), 4950);
//! ```

mod blocks;
mod pin;
mod plan;
mod signal;
mod tiles;

use std::cell::{Cell, UnsafeCell};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

pub use blocks::Blocks;
pub use pin::{allowed_cpus, pin_current_thread};
pub use plan::{plan, PoolPlan};
pub use tiles::{Tile, Tiles};

use signal::{Bell, Countdown};

/// How to build a [`Pool`].
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Worker count, caller included (at least 1).
    pub workers: usize,
    /// CPU of each worker (index = worker); empty = leave threads unpinned. Shorter than
    /// `workers` wraps around.
    pub cpus: Vec<usize>,
    /// Also pin a thread that calls [`Pool::run`] to `cpus[0]` (once per thread). For a
    /// program whose compute runs on one thread (the CLI); off for libraries and tests.
    pub pin_caller: bool,
    /// How long an idle worker (and a waiting caller) spins before it sleeps.
    pub spin: Duration,
}

impl Default for PoolOptions {
    /// One unpinned worker per available CPU.
    fn default() -> Self {
        PoolOptions {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpus: Vec::new(),
            pin_caller: false,
            spin: Duration::from_micros(500),
        }
    }
}

type TaskFn = dyn Fn(usize) + Sync;

/// What the workers share: the round signals and the current job.
struct Shared {
    bell: Bell,
    done: Countdown,
    /// The job of the current round; written by the caller only while no worker is active.
    job: UnsafeCell<Option<*const TaskFn>>,
    n_tasks: AtomicUsize,
    next: AtomicUsize,
    panicked: AtomicBool,
    quit: AtomicBool,
    spin: Duration,
}

// SAFETY: `job` is written only by the thread that holds `Pool::busy` between rounds (after
// `done` reached zero, before `bell` rings), and read only by active workers during a round;
// the SeqCst ring / Acquire wait and the countdown order those accesses. The closure behind the
// pointer is `Sync`.
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

impl Shared {
    /// Takes tasks until none are left.
    fn work(&self, f: &(dyn Fn(usize) + Sync + '_)) {
        let n = self.n_tasks.load(Relaxed);
        loop {
            let t = self.next.fetch_add(1, Relaxed);
            if t >= n {
                break;
            }
            f(t);
        }
    }
}

thread_local! {
    /// True while this thread runs pool tasks: nested calls then run inline.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
    /// The pool installed on this thread by [`Pool::install`].
    static INSTALLED: Cell<*const Pool> = const { Cell::new(std::ptr::null()) };
    /// Id of the pool this thread was pinned for as a caller (0 = none).
    static PINNED_FOR: Cell<usize> = const { Cell::new(0) };
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// A set of worker threads; see the module docs.
pub struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Held by the caller for a whole round: one op at a time.
    busy: Mutex<()>,
    cpus: Vec<usize>,
    pin_caller: bool,
    id: usize,
}

impl Pool {
    /// Starts `opts.workers − 1` threads (the caller is worker 0) and pins them to their CPUs;
    /// a CPU that cannot be pinned to is logged as a warning and the worker runs unpinned.
    pub fn new(opts: PoolOptions) -> Pool {
        let workers = opts.workers.clamp(1, (1 << 16) - 1);
        let shared = Arc::new(Shared {
            bell: Bell::new(),
            done: Countdown::new(),
            job: UnsafeCell::new(None),
            n_tasks: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            quit: AtomicBool::new(false),
            spin: opts.spin,
        });
        let cpus = opts.cpus;
        let threads = (1..workers)
            .map(|i| {
                let shared = shared.clone();
                let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
                std::thread::Builder::new()
                    .name(format!("strata-pool-{i}"))
                    .spawn(move || worker_main(&shared, i, cpu))
                    .expect("spawning a pool worker thread")
            })
            .collect();
        Pool {
            shared,
            threads,
            busy: Mutex::new(()),
            cpus,
            pin_caller: opts.pin_caller,
            id: NEXT_ID.fetch_add(1, Relaxed),
        }
    }

    /// Worker count, caller included.
    pub fn workers(&self) -> usize {
        self.threads.len() + 1
    }

    /// The CPUs workers are pinned to (index = worker), empty when unpinned.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Runs `f(task)` for every `task < n_tasks` on the pool and returns when all are done.
    /// Tasks run in any order and on any worker. A panic in a task is re-raised here after
    /// every worker has stopped.
    pub fn run<F: Fn(usize) + Sync>(&self, n_tasks: usize, f: F) {
        let inline = n_tasks <= 1 || self.threads.is_empty() || IN_TASK.get();
        if inline {
            (0..n_tasks).for_each(f);
            return;
        }
        let _busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        self.pin_caller_once();
        let sh = &*self.shared;
        let active = n_tasks.min(self.workers());
        let f: &(dyn Fn(usize) + Sync + '_) = &f;
        // SAFETY: only the lifetime is erased. Workers use the pointer only during this round,
        // and this function does not return (or unwind) before `done.wait` saw every active
        // worker finish, so `f` outlives every use.
        let f_static: *const TaskFn = unsafe { std::mem::transmute(f) };
        // SAFETY: we hold `busy` and the previous round is over, so no worker reads `job`.
        unsafe { *sh.job.get() = Some(f_static) };
        sh.n_tasks.store(n_tasks, Relaxed);
        sh.next.store(0, Relaxed);
        sh.done.reset(active - 1);
        sh.bell.ring(active);
        IN_TASK.set(true);
        let mine = catch_unwind(AssertUnwindSafe(|| sh.work(f)));
        IN_TASK.set(false);
        sh.done.wait(sh.spin);
        if let Err(payload) = mine {
            resume_unwind(payload);
        }
        if sh.panicked.swap(false, SeqCst) {
            panic!("a pool worker panicked while running a task");
        }
    }

    /// [`Pool::run`] for fallible tasks: the error of one failing task (any, if several fail)
    /// is returned; tasks not yet started when it failed are skipped.
    pub fn try_run<E: Send, F>(&self, n_tasks: usize, f: F) -> Result<(), E>
    where
        F: Fn(usize) -> Result<(), E> + Sync,
    {
        let failed = AtomicBool::new(false);
        let error = Mutex::new(None);
        self.run(n_tasks, |t| {
            if failed.load(Relaxed) {
                return;
            }
            if let Err(e) = f(t) {
                failed.store(true, Relaxed);
                *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
        });
        match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Fills every tile of `tiles` with `f`, one task per tile, in parallel.
    ///
    /// # Errors
    /// The error of a failing tile, as [`Pool::try_run`].
    pub fn for_each_tile<T: Send, E: Send, F>(&self, tiles: Tiles<'_, T>, f: F) -> Result<(), E>
    where
        F: Fn(&mut Tile<'_, T>) -> Result<(), E> + Sync,
    {
        self.try_run(tiles.count(), |i| {
            // SAFETY: `run` calls this closure once per task index, so each tile is taken once.
            let mut tile = unsafe { tiles.tile(i) };
            f(&mut tile)
        })
    }

    /// Runs `f` with this pool as the current one for ops on this thread ([`with_current`]).
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const Pool);
        impl Drop for Restore {
            fn drop(&mut self) {
                INSTALLED.set(self.0);
            }
        }
        let _restore = Restore(INSTALLED.replace(self));
        f()
    }

    fn pin_caller_once(&self) {
        if !self.pin_caller || self.cpus.is_empty() || PINNED_FOR.get() == self.id {
            return;
        }
        PINNED_FOR.set(self.id);
        if let Err(e) = pin_current_thread(self.cpus[0]) {
            tracing::warn!(
                "could not pin the calling thread to CPU {}: {e}",
                self.cpus[0]
            );
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.quit.store(true, SeqCst);
        self.shared.bell.ring(0);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn worker_main(sh: &Shared, index: usize, cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        if let Err(e) = pin_current_thread(cpu) {
            tracing::warn!("could not pin pool worker {index} to CPU {cpu}: {e}");
        }
    }
    IN_TASK.set(true);
    let mut seen = 0;
    loop {
        seen = sh.bell.wait_past(seen, sh.spin);
        if sh.quit.load(SeqCst) {
            return;
        }
        if index >= Bell::active(seen) {
            continue;
        }
        // SAFETY: we are active in this round, so the caller wrote `job` before ringing and
        // will not touch it, nor drop the closure, until we call `done`.
        let f = unsafe { (*sh.job.get()).map(|p| &*p) };
        if let Some(f) = f {
            if catch_unwind(AssertUnwindSafe(|| sh.work(f))).is_err() {
                sh.panicked.store(true, SeqCst);
            }
        }
        sh.done.done();
    }
}

static GLOBAL: OnceLock<Pool> = OnceLock::new();

/// Sets the process-wide pool (the one ops use unless another is installed). Only the first
/// call takes effect; later calls (and ops that ran before any call) keep the existing pool,
/// which is returned along with `false`.
pub fn init_global(opts: PoolOptions) -> (&'static Pool, bool) {
    let mut fresh = false;
    let pool = GLOBAL.get_or_init(|| {
        fresh = true;
        Pool::new(opts)
    });
    (pool, fresh)
}

/// The process-wide pool; made on first use from [`plan`]`(0, Affinity::Auto)` (one pinned
/// worker per fast core), callers unpinned, if [`init_global`] was not called.
pub fn global() -> &'static Pool {
    GLOBAL.get_or_init(|| Pool::new(plan(0, crate::topology::Affinity::Auto).options(false)))
}

/// Runs `f` with the pool installed on this thread, else the global pool.
pub fn with_current<R>(f: impl FnOnce(&Pool) -> R) -> R {
    let p = INSTALLED.get();
    if p.is_null() {
        f(global())
    } else {
        // SAFETY: `install` set this pointer from a `&Pool` that outlives its closure and
        // restores the previous value when that closure ends, so it is valid here.
        f(unsafe { &*p })
    }
}

/// Workers of the current pool (see [`with_current`]).
pub fn current_workers() -> usize {
    with_current(|p| p.workers())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn pool(n: usize) -> Pool {
        Pool::new(PoolOptions {
            workers: n,
            spin: Duration::from_micros(50),
            ..PoolOptions::default()
        })
    }

    #[test]
    fn every_task_runs_exactly_once_over_many_rounds() {
        for n in 1..=4 {
            let p = pool(n);
            let hits: Vec<AtomicU64> = (0..37).map(|_| AtomicU64::new(0)).collect();
            for round in 0..500 {
                p.run(round % 37 + 1, |t| {
                    hits[t].fetch_add(1, Relaxed);
                });
            }
            for (t, h) in hits.iter().enumerate() {
                let want = (0..500).filter(|r| r % 37 + 1 > t).count() as u64;
                assert_eq!(h.load(Relaxed), want, "{n} workers, task {t}");
            }
        }
    }

    #[test]
    fn errors_and_panics_reach_the_caller_and_the_pool_survives() {
        let p = pool(3);
        let r: Result<(), usize> = p.try_run(50, |t| if t == 17 { Err(t) } else { Ok(()) });
        assert_eq!(r, Err(17));
        let caught = catch_unwind(AssertUnwindSafe(|| p.run(8, |t| assert!(t != 5))));
        assert!(caught.is_err());
        let n = AtomicUsize::new(0);
        p.run(8, |_| {
            n.fetch_add(1, Relaxed);
        });
        assert_eq!(n.into_inner(), 8);
    }

    #[test]
    fn nested_runs_inline_and_tiles_cover_the_output_once() {
        let p = pool(2);
        let mut out = vec![0u32; 7 * 10];
        p.for_each_tile(Tiles::new(&mut out, 10, 3, 2), |tile| {
            let n = tile.rows.len();
            let (r0, c0) = (tile.rows.start, tile.cols.start);
            p.run(4, |_| {}); // nested: runs inline, no deadlock
            for k in 0..n {
                for (j, v) in tile.row_mut(k).iter_mut().enumerate() {
                    *v += ((r0 + k) * 10 + c0 + j) as u32 + 1;
                }
            }
            Ok::<(), ()>(())
        })
        .unwrap();
        assert!(out.iter().enumerate().all(|(i, v)| *v == i as u32 + 1));
    }

    #[test]
    fn installed_pool_is_current_on_this_thread_only_inside_install() {
        let p = pool(3);
        p.install(|| assert_eq!(current_workers(), 3));
        let q = pool(1);
        q.install(|| {
            assert_eq!(current_workers(), 1);
            p.install(|| assert_eq!(current_workers(), 3));
            assert_eq!(current_workers(), 1);
        });
    }
}
