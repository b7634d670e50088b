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
//! [`Pool::scope`] hands a job to the workers and returns at once with a [`Ticket`], so the
//! calling thread can drive another backend (a GPU) meanwhile; see [`Scope`] for what
//! [`Pool::run`] does while such a job is in flight.
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
mod scope;
mod signal;
mod tiles;

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

pub use blocks::Blocks;
pub use pin::{allowed_cpus, pin_current_thread};
pub use plan::{plan, PoolPlan};
pub use scope::{Scope, Ticket};
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

/// What a panic carries, as `catch_unwind` returns it.
type Payload = Box<dyn Any + Send>;

/// What the workers share: the round signals and the current job.
struct Shared {
    bell: Bell,
    done: Countdown,
    /// The job of the current round; written by the caller only while no worker is active.
    job: UnsafeCell<Option<*const TaskFn>>,
    n_tasks: AtomicUsize,
    next: AtomicUsize,
    panicked: AtomicBool,
    /// The payload of the first worker panic of the current round (set before `panicked`).
    payload: Mutex<Option<Payload>>,
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

    /// Arms a round of `n_tasks` tasks of `f` for workers `1..active` and wakes them.
    ///
    /// # Safety
    /// The caller holds `Pool::busy`, the previous round is over ([`Shared::finish`] returned),
    /// and `*f` stays alive until this round's [`Shared::finish`] returns.
    #[inline]
    unsafe fn start(&self, f: *const TaskFn, n_tasks: usize, active: usize) {
        // SAFETY: per the contract, no worker reads `job` between rounds.
        unsafe { *self.job.get() = Some(f) };
        self.n_tasks.store(n_tasks, Relaxed);
        self.next.store(0, Relaxed);
        self.done.reset(active - 1);
        self.bell.ring(active);
    }

    /// Waits until every worker of the round stopped; the payload of a worker's panic, if any.
    #[inline]
    fn finish(&self) -> Option<Payload> {
        self.done.wait(self.spin);
        if !self.panicked.swap(false, SeqCst) {
            return None;
        }
        let payload = self
            .payload
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        Some(payload.unwrap_or_else(|| Box::new("a pool worker panicked while running a task")))
    }
}

thread_local! {
    /// True while this thread runs pool tasks: nested calls then run inline.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
    /// The pool installed on this thread by [`Pool::install`].
    static INSTALLED: Cell<*const Pool> = const { Cell::new(std::ptr::null()) };
    /// Id of the pool this thread was pinned for as a caller (0 = none).
    static PINNED_FOR: Cell<usize> = const { Cell::new(0) };
    /// Its address tells this thread from every other live thread ([`thread_token`]).
    static TOKEN: u8 = const { 0 };
}

/// A nonzero number unique to this thread among live threads.
fn thread_token() -> usize {
    TOKEN.with(|t| t as *const u8 as usize)
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// A set of worker threads; see the module docs.
pub struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Held by the caller for a whole round: one op at a time. A submitted job holds it from
    /// [`Scope::submit`] until the job is waited on.
    busy: Mutex<()>,
    /// [`thread_token`] of the thread whose submitted job holds `busy` (0 = none).
    holder: AtomicUsize,
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
            payload: Mutex::new(None),
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
            holder: AtomicUsize::new(0),
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
    ///
    /// Called on a thread whose [submitted job](Scope::submit) is still in flight, the tasks
    /// run inline on this thread (the workers are busy with that job); called on another thread
    /// meanwhile, it waits for the job's ticket to be waited on, as calls take turns.
    pub fn run<F: Fn(usize) + Sync>(&self, n_tasks: usize, f: F) {
        let inline = n_tasks <= 1 || self.threads.is_empty() || IN_TASK.get();
        if inline {
            (0..n_tasks).for_each(f);
            return;
        }
        let Some(_busy) = self.lock_workers() else {
            (0..n_tasks).for_each(f);
            return;
        };
        self.round(n_tasks, &f);
    }

    /// Runs `f(worker)` once on every worker thread, the caller included, and returns when all
    /// are done: for per-thread set-up, such as growing each thread's reused scratch before
    /// timed or allocation-free work ([`crate::Model::warm_up`]). `f` runs with this pool
    /// installed ([`Pool::install`]), so ops it calls run inline on its thread. Called from
    /// inside a task, or while this thread's [submitted job](Scope::submit) is in flight, it
    /// runs `f(0)` on this thread only.
    pub fn broadcast<F: Fn(usize) + Sync>(&self, f: F) {
        let inline = self.threads.is_empty() || IN_TASK.get();
        let busy = if inline { None } else { self.lock_workers() };
        let Some(_busy) = busy else {
            self.install(|| f(0));
            return;
        };
        // Every task waits until all have started, so no thread can take a second one: the
        // `workers()` tasks land on `workers()` distinct threads.
        let all = std::sync::Barrier::new(self.workers());
        self.round(self.workers(), &|i| {
            all.wait();
            self.install(|| f(i));
        });
    }

    /// One round of `n_tasks ≥ 2` tasks on the workers; the caller holds `busy`.
    fn round(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync + '_)) {
        self.pin_caller_once();
        let sh = &*self.shared;
        let active = n_tasks.min(self.workers());
        // SAFETY: only the lifetime is erased. Workers use the pointer only during this round,
        // and this function does not return (or unwind) before `finish` saw every active
        // worker finish, so `f` outlives every use.
        let f_static: *const TaskFn = unsafe { std::mem::transmute(f) };
        // SAFETY: we hold `busy` and the previous round is over; `f` outlives `finish` below.
        unsafe { sh.start(f_static, n_tasks, active) };
        IN_TASK.set(true);
        let mine = catch_unwind(AssertUnwindSafe(|| sh.work(f)));
        IN_TASK.set(false);
        let theirs = sh.finish();
        if let Err(payload) = mine {
            resume_unwind(payload);
        }
        if let Some(payload) = theirs {
            resume_unwind(payload);
        }
    }

    /// Takes the workers for a round (`busy`), waiting for another thread's round or job;
    /// `None` if this thread already holds them for a submitted job (taking them again would
    /// deadlock). The uncontended path is one `try_lock`, as cheap as `lock`.
    #[inline]
    fn lock_workers(&self) -> Option<MutexGuard<'_, ()>> {
        match self.busy.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            // Only this thread writes its own token, so an equal token means we hold `busy`.
            Err(TryLockError::WouldBlock) if self.holder.load(Relaxed) == thread_token() => None,
            Err(TryLockError::WouldBlock) => {
                Some(self.busy.lock().unwrap_or_else(|e| e.into_inner()))
            }
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

    /// Fills every tile of several outputs in one round: `f(k, tile)` for each tile of
    /// `tiles[k]`, one task per tile (the tiles of `tiles[0]` first).
    ///
    /// # Errors
    /// The error of a failing tile, as [`Pool::try_run`].
    pub fn for_each_tile_of<T: Send, E: Send, F>(
        &self,
        tiles: &[Tiles<'_, T>],
        f: F,
    ) -> Result<(), E>
    where
        F: Fn(usize, &mut Tile<'_, T>) -> Result<(), E> + Sync,
    {
        let mut starts: smallvec::SmallVec<[usize; 16]> = smallvec::smallvec![0];
        for t in tiles {
            starts.push(starts[starts.len() - 1] + t.count());
        }
        self.try_run(starts[tiles.len()], |i| {
            let k = starts.partition_point(|&s| s <= i) - 1;
            // SAFETY: `run` calls this closure once per task index, and task `i` maps to one
            // tile index of one output, so each tile is taken once.
            let mut tile = unsafe { tiles[k].tile(i - starts[k]) };
            f(k, &mut tile)
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
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| sh.work(f))) {
                let mut slot = sh.payload.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(payload);
                drop(slot);
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
mod tests;
