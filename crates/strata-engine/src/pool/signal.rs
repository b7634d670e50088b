//! Spin-then-park signals between the pool's caller and its workers.
//!
//! A [`Bell`] wakes the workers for a new round; a [`Countdown`] tells the caller that every
//! active worker finished it. Both spin for a short while first (a decode step dispatches a few
//! hundred ops, microseconds apart, and a futex round trip costs more than the gap), then sleep
//! on a mutex/condvar pair (a futex on Linux) so an idle pool costs no CPU.
//!
//! The sleep protocol is the usual Dekker pattern: the sleeper announces itself, then re-checks
//! the condition; the signaller changes the condition, then checks for sleepers. With every one
//! of these four accesses `SeqCst`, at least one side sees the other, so no wake-up is lost.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bits of a round word that carry the number of active workers; the rest count rounds.
const ACTIVE_BITS: u32 = 16;

/// Busy turns before spinning starts to yield the CPU between checks.
const BUSY_TURNS: usize = 1 << 10;

/// Spins while `ready()` is false for up to `spin`; true if it became ready.
///
/// After [`BUSY_TURNS`] busy turns (a few microseconds) each check is followed by
/// `sched_yield`, so on an oversubscribed CPU (another process, or the very thread we wait
/// for, runnable on this core) spinning hands the core over instead of burning a time slice.
#[inline]
fn spin_until(spin: Duration, mut ready: impl FnMut() -> bool) -> bool {
    for _ in 0..BUSY_TURNS {
        if ready() {
            return true;
        }
        std::hint::spin_loop();
    }
    let start = Instant::now();
    loop {
        for _ in 0..16 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= spin {
            return ready();
        }
        std::thread::yield_now();
    }
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Announces rounds: a word `(round << 16) | active` that workers wait to change.
pub(super) struct Bell {
    word: AtomicU64,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Bell {
    pub fn new() -> Bell {
        Bell {
            word: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Starts a new round in which workers `1..active` take part (`active < 65536`).
    pub fn ring(&self, active: usize) {
        debug_assert!(active < 1 << ACTIVE_BITS);
        let round = (self.word.load(Relaxed) >> ACTIVE_BITS) + 1;
        self.word
            .store((round << ACTIVE_BITS) | active as u64, SeqCst);
        if self.sleepers.load(SeqCst) > 0 {
            let _g = lock(&self.lock);
            self.cv.notify_all();
        }
    }

    /// Waits until the word differs from `seen`; returns the new word.
    pub fn wait_past(&self, seen: u64, spin: Duration) -> u64 {
        if spin_until(spin, || self.word.load(Acquire) != seen) {
            return self.word.load(Acquire);
        }
        let mut g = lock(&self.lock);
        self.sleepers.fetch_add(1, SeqCst);
        loop {
            let w = self.word.load(SeqCst);
            if w != seen {
                self.sleepers.fetch_sub(1, SeqCst);
                return w;
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The number of active workers encoded in a round word.
    pub fn active(word: u64) -> usize {
        (word & ((1 << ACTIVE_BITS) - 1)) as usize
    }
}

/// Counts workers still busy in the current round; the caller waits for zero.
pub(super) struct Countdown {
    left: AtomicUsize,
    waiter_parked: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Countdown {
    pub fn new() -> Countdown {
        Countdown {
            left: AtomicUsize::new(0),
            waiter_parked: AtomicBool::new(false),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Arms the countdown for `n` workers; call before the round is rung.
    pub fn reset(&self, n: usize) {
        self.left.store(n, SeqCst);
    }

    /// One worker finished its part of the round.
    pub fn done(&self) {
        if self.left.fetch_sub(1, SeqCst) == 1 && self.waiter_parked.load(SeqCst) {
            let _g = lock(&self.lock);
            self.cv.notify_one();
        }
    }

    /// Waits until every worker armed by [`Countdown::reset`] called [`Countdown::done`].
    pub fn wait(&self, spin: Duration) {
        if spin_until(spin, || self.left.load(Acquire) == 0) {
            return;
        }
        let mut g = lock(&self.lock);
        self.waiter_parked.store(true, SeqCst);
        while self.left.load(SeqCst) != 0 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        self.waiter_parked.store(false, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn parked_waiters_wake_on_ring_and_on_last_done() {
        let bell = Arc::new(Bell::new());
        let count = Arc::new(Countdown::new());
        count.reset(3);
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (bell, count) = (bell.clone(), count.clone());
                std::thread::spawn(move || {
                    // No spinning: go straight to the condvar.
                    let w = bell.wait_past(0, Duration::ZERO);
                    assert_eq!(Bell::active(w), 4);
                    count.done();
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        bell.ring(4);
        count.wait(Duration::ZERO);
        for h in handles {
            h.join().unwrap();
        }
    }
}
