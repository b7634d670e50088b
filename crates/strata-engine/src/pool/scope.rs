//! Jobs that run on the pool's workers while the calling thread does something else: the CPU
//! half of a hybrid CPU/GPU step (CPU experts on the workers while the caller drives the GPU).
//!
//! [`Pool::scope`] works like [`std::thread::scope`]: a job submitted with [`Scope::submit`]
//! may borrow anything from outside the scope, and the scope does not return before every
//! submitted job finished, whatever happened to its [`Ticket`] (waited, dropped, or leaked
//! with `mem::forget`). Safety never rests on a ticket's `Drop`.
//!
//! Rules:
//! - **Workers only.** A submitted job's tasks run on workers `1..`, never on the caller, so
//!   [`Scope::submit`] returns at once. Tasks are pulled from the shared counter as in
//!   [`Pool::run`], so results never depend on which worker ran a task.
//! - **One job on the workers at a time.** Submitting while this scope's previous job is still
//!   in flight first waits for that job (its panic, if any, is kept for its ticket).
//! - **`run` meanwhile.** [`Pool::run`] on the submitting thread while its job is in flight runs
//!   its tasks inline on that thread (the workers are busy; no deadlock). On another thread it
//!   waits until the job is waited on, as calls from several threads take turns.
//! - **No worker free: deferred.** On a 1-worker pool (the caller only), from inside a pool task,
//!   or while this thread's job from an enclosing scope holds the workers, `submit` stores the
//!   job and returns; the job runs on the calling thread (through [`Pool::run`]) when its ticket
//!   is waited on or dropped, or at the end of the scope. So a GPU step submitted after the
//!   job still overlaps it when the caller then waits. Tasks must therefore never wait for
//!   something the caller does after `submit`: that only works when workers are free.
//! - **Panics.** A task's panic is re-raised by [`Ticket::wait`] once the job has stopped.
//!   If the ticket was dropped or forgotten instead, the scope re-raises it when it ends, as
//!   `std::thread::scope` does for threads never joined. A panic of the scope's closure
//!   is re-raised after in-flight jobs stopped; deferred jobs not yet started are then dropped.
//!
//! # Example
//! ```
//! use strata_engine::pool::{Pool, PoolOptions, Tiles};
//! let pool = Pool::new(PoolOptions { workers: 3, ..PoolOptions::default() });
//! let mut cpu_out = vec![0u64; 8];
//! let gpu_out = pool.scope(|s| {
//!     let ticket = s.submit_tiles(Tiles::new(&mut cpu_out, 8, 1, 1), |tile| {
//!         let c = tile.cols.start as u64;
//!         tile.row_mut(0)[0] = c * c;
//!     });
//!     let gpu_out = 42; // drive the other backend here
//!     ticket.wait();
//!     gpu_out
//! });
//! assert_eq!(cpu_out[7], 49);
//! assert_eq!(gpu_out, 42);
//! ```

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::MutexGuard;

use super::{thread_token, Payload, Pool, TaskFn, Tile, Tiles, IN_TASK};

/// A submitted job's tasks, owned by the scope as a raw pointer from `Box::into_raw` (so the
/// scope holds no destructor that needs `'scope` alive, and moving it never retags the box
/// the workers read).
type JobFn<'scope> = *mut (dyn Fn(usize) + Sync + 'scope);

/// The job the workers are running, and the workers' lock it holds.
struct Flight<'scope, 'env> {
    seq: u64,
    f: JobFn<'scope>,
    _busy: MutexGuard<'env, ()>,
}

/// A job no worker could take, run on the caller when waited on.
struct Deferred<'scope> {
    seq: u64,
    n_tasks: usize,
    f: JobFn<'scope>,
}

/// Where jobs are submitted; see the module docs. Made by [`Pool::scope`], used from the
/// thread that made it (it is neither `Send` nor `Sync`).
pub struct Scope<'scope, 'env: 'scope> {
    pool: &'env Pool,
    flight: RefCell<Option<Flight<'scope, 'env>>>,
    deferred: RefCell<Vec<Deferred<'scope>>>,
    /// Panics of finished jobs whose tickets have not taken them yet, by job number.
    panics: RefCell<Vec<(u64, Payload)>>,
    next_seq: Cell<u64>,
    /// Invariance, as in `std::thread::Scope`: the closure cannot pick a shorter `'scope`.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// A submitted job; [`Ticket::wait`] waits for it. Dropping the ticket also waits (keeping a
/// panic for the end of the scope); forgetting it leaves the wait to the end of the scope.
#[must_use = "a dropped ticket waits for its job at once; keep it to overlap the job"]
pub struct Ticket<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    seq: u64,
}

impl Pool {
    /// Runs `f` with a [`Scope`] whose [`Scope::submit`] hands jobs to the workers and returns
    /// at once. Returns `f`'s value after every submitted job finished.
    ///
    /// # Panics
    /// Re-raises a panic of `f`, else the first unclaimed task panic (of a job whose ticket was
    /// dropped or forgotten rather than waited on).
    pub fn scope<'env, F, R>(&'env self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        let scope = Scope {
            pool: self,
            flight: RefCell::new(None),
            deferred: RefCell::new(Vec::new()),
            panics: RefCell::new(Vec::new()),
            next_seq: Cell::new(0),
            _scope: PhantomData,
            _env: PhantomData,
        };
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        let unclaimed = scope.end(result.is_err());
        let r = result.unwrap_or_else(|payload| resume_unwind(payload));
        if let Some(payload) = unclaimed {
            resume_unwind(payload);
        }
        r
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Hands `f(task)` for every `task < n_tasks` to the workers and returns without running
    /// any of it on this thread. Allocates the boxed closure (once per job, not per task).
    /// See the module docs for a job in flight, a 1-worker pool and panics.
    pub fn submit<F>(&'scope self, n_tasks: usize, f: F) -> Ticket<'scope, 'env>
    where
        F: Fn(usize) + Sync + 'scope,
    {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        let ticket = Ticket { scope: self, seq };
        if n_tasks == 0 {
            return ticket;
        }
        let previous = self.flight.borrow_mut().take();
        if let Some(previous) = previous {
            self.land(previous);
        }
        let f: Box<dyn Fn(usize) + Sync + 'scope> = Box::new(f);
        let f = Box::into_raw(f);
        let pool = self.pool;
        let busy = if pool.threads.is_empty() || IN_TASK.get() {
            None
        } else {
            pool.lock_workers()
        };
        let Some(busy) = busy else {
            self.deferred
                .borrow_mut()
                .push(Deferred { seq, n_tasks, f });
            return ticket;
        };
        pool.holder.store(thread_token(), Relaxed);
        // Worker 0 (this thread) sits out.
        let active = n_tasks.min(pool.workers() - 1) + 1;
        // SAFETY: only the lifetime is erased. The box is freed only by `land`, after the
        // round's `finish`, and `end` lands every flight before the scope's borrows expire.
        let f_static: *const TaskFn = unsafe { std::mem::transmute(f as *const _) };
        // SAFETY: we hold `busy` and the previous round is over (a `run` finishes its round
        // before returning, and a flight is landed before `busy` is released).
        unsafe { pool.shared.start(f_static, n_tasks, active) };
        *self.flight.borrow_mut() = Some(Flight {
            seq,
            f,
            _busy: busy,
        });
        ticket
    }

    /// [`Scope::submit`] of one task per tile of `tiles`, each with exclusive access to its
    /// tile (as [`Pool::for_each_tile`], without errors: a task that fails should panic).
    pub fn submit_tiles<T, F>(&'scope self, tiles: Tiles<'scope, T>, f: F) -> Ticket<'scope, 'env>
    where
        T: Send + 'scope,
        F: Fn(&mut Tile<'_, T>) + Sync + 'scope,
    {
        self.submit(tiles.count(), move |i| {
            // SAFETY: a job calls its closure once per task index, so each tile is taken once.
            let mut tile = unsafe { tiles.tile(i) };
            f(&mut tile)
        })
    }

    /// Waits for the job in flight, frees it, gives the workers back; keeps its panic.
    fn land(&self, flight: Flight<'scope, 'env>) {
        let payload = self.pool.shared.finish();
        self.pool.holder.store(0, Relaxed);
        // SAFETY: from `Box::into_raw` in `submit`; `finish` saw every worker stop using it.
        drop(unsafe { Box::from_raw(flight.f) });
        let seq = flight.seq;
        drop(flight); // releases `busy`, after `holder` was cleared
        if let Some(p) = payload {
            self.panics.borrow_mut().push((seq, p));
        }
    }

    /// Runs a deferred job on this thread; keeps its panic.
    fn run_deferred(&self, job: Deferred<'scope>) {
        // SAFETY: from `Box::into_raw` in `submit`, never shared: this is the only owner.
        let f = unsafe { Box::from_raw(job.f) };
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.pool.run(job.n_tasks, &*f))) {
            self.panics.borrow_mut().push((job.seq, p));
        }
    }

    /// Brings job `seq` to completion (landing or, if `run_deferred`, running it); returns its
    /// panic if it had one that no one took yet.
    fn complete(&self, seq: u64, run_deferred: bool) -> Option<Payload> {
        let flight = {
            let mut slot = self.flight.borrow_mut();
            match &*slot {
                Some(fl) if fl.seq == seq => slot.take(),
                _ => None,
            }
        };
        if let Some(flight) = flight {
            self.land(flight);
        } else if run_deferred {
            let job = {
                let mut deferred = self.deferred.borrow_mut();
                let at = deferred.iter().position(|j| j.seq == seq);
                at.map(|i| deferred.remove(i))
            };
            if let Some(job) = job {
                self.run_deferred(job);
            }
        }
        let mut panics = self.panics.borrow_mut();
        let at = panics.iter().position(|(s, _)| *s == seq)?;
        Some(panics.remove(at).1)
    }

    /// Finishes every job (dropping deferred ones instead when the scope's closure panicked);
    /// the unclaimed panic of the earliest job, if any.
    fn end(&self, unwinding: bool) -> Option<Payload> {
        let flight = self.flight.borrow_mut().take();
        if let Some(flight) = flight {
            self.land(flight);
        }
        let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
        for job in deferred {
            if unwinding {
                // SAFETY: from `Box::into_raw` in `submit`; never started, so never shared.
                drop(unsafe { Box::from_raw(job.f) });
            } else {
                self.run_deferred(job);
            }
        }
        let mut panics = std::mem::take(&mut *self.panics.borrow_mut());
        panics.sort_by_key(|(s, _)| *s);
        panics.into_iter().next().map(|(_, p)| p)
    }
}

impl Ticket<'_, '_> {
    /// Waits until every task of the job ran (on a 1-worker pool: runs them, on this thread).
    ///
    /// # Panics
    /// Re-raises the first panic of the job's tasks, after the job stopped.
    pub fn wait(self) {
        let payload = self.scope.complete(self.seq, true);
        std::mem::forget(self);
        if let Some(p) = payload {
            resume_unwind(p);
        }
    }
}

impl Drop for Ticket<'_, '_> {
    /// Waits as [`Ticket::wait`] but keeps a panic for the end of the scope. While unwinding,
    /// a deferred job is not started (the scope drops it).
    fn drop(&mut self) {
        if let Some(p) = self.scope.complete(self.seq, !std::thread::panicking()) {
            self.scope.panics.borrow_mut().push((self.seq, p));
        }
    }
}

#[cfg(test)]
mod tests;
