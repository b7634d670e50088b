use super::super::{Pool, PoolOptions, Tiles};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

fn pool(n: usize) -> Pool {
    Pool::new(PoolOptions {
        workers: n,
        spin: Duration::from_micros(50),
        ..PoolOptions::default()
    })
}

/// Spins until `flag` is set; panics after 10 s (a hang would otherwise stall the suite).
fn await_flag(flag: &AtomicBool) {
    let start = Instant::now();
    while !flag.load(SeqCst) {
        assert!(start.elapsed() < Duration::from_secs(10), "flag never set");
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn submitted_job_runs_on_workers_while_the_caller_waits_for_it() {
    let p = pool(3);
    let caller = std::thread::current().id();
    let ran_on: Mutex<Vec<ThreadId>> = Mutex::new(Vec::new());
    let go = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<usize>();
    p.scope(|s| {
        let ticket = s.submit(4, |t| {
            ran_on.lock().unwrap().push(std::thread::current().id());
            if t == 0 {
                // Blocks until `submit` has returned: the job cannot be running on the caller.
                await_flag(&go);
                tx.send(7).unwrap();
            }
        });
        go.store(true, SeqCst);
        // The caller blocks on the channel, not on the pool: only a worker can answer.
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(7));
        ticket.wait();
    });
    let ran_on = ran_on.into_inner().unwrap();
    assert_eq!(ran_on.len(), 4);
    assert!(ran_on.iter().all(|id| *id != caller));
}

#[test]
fn a_task_panic_is_raised_by_wait_and_the_pool_survives() {
    let p = pool(3);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        p.scope(|s| {
            let ticket = s.submit(16, |t| assert!(t != 5, "boom in task {t}"));
            ticket.wait();
            unreachable!("wait must re-raise the task's panic");
        })
    }));
    assert_eq!(panic_text(&*caught.unwrap_err()), "boom in task 5");
    // A dropped ticket's panic is raised when the scope ends.
    let caught = catch_unwind(AssertUnwindSafe(|| {
        p.scope(|s| drop(s.submit(3, |t| assert!(t != 2, "dropped {t}"))))
    }));
    assert_eq!(panic_text(&*caught.unwrap_err()), "dropped 2");
    // A job landed by the next submit keeps its panic for its own ticket.
    let caught = catch_unwind(AssertUnwindSafe(|| {
        p.scope(|s| {
            let first = s.submit(2, |t| assert!(t != 1, "first {t}"));
            s.submit(2, |_| {}).wait();
            first.wait();
        })
    }));
    assert_eq!(panic_text(&*caught.unwrap_err()), "first 1");
    // No stale panic leaks into later jobs or runs.
    let n = AtomicUsize::new(0);
    p.scope(|s| {
        s.submit(8, |_| {
            n.fetch_add(1, Relaxed);
        })
        .wait()
    });
    p.run(8, |_| {
        n.fetch_add(1, Relaxed);
    });
    assert_eq!(n.into_inner(), 16);
}

#[test]
fn a_forgotten_ticket_is_still_waited_for_by_the_scope() {
    for workers in [1, 3] {
        let p = pool(workers);
        let mut out = vec![0u64; 64];
        p.scope(|s| {
            let ticket = s.submit_tiles(Tiles::new(&mut out, 8, 8, 1), |tile| {
                std::thread::sleep(Duration::from_millis(2));
                let r = tile.rows.start as u64;
                tile.row_mut(0).iter_mut().for_each(|v| *v = r + 1);
            });
            std::mem::forget(ticket);
        });
        // The scope ended only after every task wrote its row.
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, i as u64 / 8 + 1, "{workers} workers, element {i}");
        }
        let caught = catch_unwind(AssertUnwindSafe(|| {
            p.scope(|s| std::mem::forget(s.submit(2, |_| panic!("forgotten"))))
        }));
        assert_eq!(panic_text(&*caught.unwrap_err()), "forgotten");
    }
}

#[test]
fn one_worker_pool_runs_the_job_on_the_caller_when_waited() {
    let p = pool(1);
    let caller = std::thread::current().id();
    let n = AtomicUsize::new(0);
    p.scope(|s| {
        let ticket = s.submit(5, |_| {
            assert_eq!(std::thread::current().id(), caller);
            n.fetch_add(1, Relaxed);
        });
        assert_eq!(n.load(Relaxed), 0, "deferred until wait");
        ticket.wait();
        assert_eq!(n.load(Relaxed), 5);
        drop(s.submit(5, |_| {
            n.fetch_add(1, Relaxed);
        }));
        assert_eq!(n.load(Relaxed), 10, "a dropped ticket ran its job");
        let _kept = s.submit(5, |_| {
            n.fetch_add(1, Relaxed);
        });
    });
    assert_eq!(n.into_inner(), 15, "the scope ran the job still held");
}

#[test]
fn run_while_a_job_is_in_flight_runs_inline_here_and_waits_elsewhere() {
    let p = pool(3);
    let release = AtomicBool::new(false);
    let job_sum = AtomicU64::new(0);
    let other_done = AtomicBool::new(false);
    p.scope(|s| {
        let ticket = s.submit(6, |t| {
            await_flag(&release); // occupies the workers until the caller's run is done
            job_sum.fetch_add(t as u64, Relaxed);
        });
        std::thread::scope(|ts| {
            // Another thread's run takes its turn after the job.
            let other = ts.spawn(|| {
                let sum = AtomicU64::new(0);
                p.run(10, |t| {
                    sum.fetch_add(t as u64, Relaxed);
                });
                other_done.store(true, SeqCst);
                sum.into_inner()
            });
            // The caller's run completes while the job is blocked: it ran inline.
            let caller = std::thread::current().id();
            let sum = AtomicU64::new(0);
            p.run(100, |t| {
                assert_eq!(std::thread::current().id(), caller);
                sum.fetch_add(t as u64, Relaxed);
            });
            assert_eq!(sum.into_inner(), 4950);
            std::thread::sleep(Duration::from_millis(20));
            assert!(
                !other_done.load(SeqCst),
                "another thread's run overtook the job"
            );
            release.store(true, SeqCst);
            ticket.wait();
            assert_eq!(job_sum.load(Relaxed), 15);
            assert_eq!(other.join().unwrap(), 45);
        });
    });
}

#[test]
fn nested_scopes_and_submits_from_tasks_complete() {
    let p = pool(3);
    let n = AtomicUsize::new(0);
    p.scope(|outer| {
        let a = outer.submit(4, |_| {
            // From a worker: deferred, then run inline there.
            p.scope(|s| {
                s.submit(3, |_| {
                    n.fetch_add(1, Relaxed);
                })
                .wait()
            });
        });
        // The workers are held by `a`: the inner job waits for its ticket, then runs here.
        p.scope(|inner| {
            let b = inner.submit(5, |_| {
                n.fetch_add(100, Relaxed);
            });
            a.wait();
            b.wait();
        });
    });
    assert_eq!(n.into_inner(), 4 * 3 + 500);
}

#[test]
fn every_task_runs_once_over_many_interleaved_jobs_and_runs() {
    for workers in 1..=4 {
        let p = pool(workers);
        let hits: Vec<AtomicU64> = (0..23).map(|_| AtomicU64::new(0)).collect();
        let mut want = vec![0u64; 23];
        p.scope(|s| {
            for round in 0..300 {
                let n = round % 23 + 1;
                let ticket = s.submit(n, |t| {
                    hits[t].fetch_add(1, Relaxed);
                });
                p.run(n, |t| {
                    hits[t].fetch_add(1, Relaxed);
                });
                match round % 3 {
                    0 => ticket.wait(),
                    1 => drop(ticket),
                    _ => std::mem::forget(ticket), // the next submit lands it
                }
            }
        });
        for round in 0..300 {
            want.iter_mut().take(round % 23 + 1).for_each(|w| *w += 2);
        }
        let got: Vec<u64> = hits.iter().map(|h| h.load(Relaxed)).collect();
        assert_eq!(got, want, "{workers} workers");
    }
}

#[test]
fn job_results_are_bit_identical_for_any_worker_count() {
    let x: Vec<f32> = (0..4096).map(|i| ((i * 37 % 101) as f32).sin()).collect();
    let sums = |workers: usize| {
        let p = pool(workers);
        let mut out = vec![0f32; 64];
        p.scope(|s| {
            s.submit_tiles(Tiles::new(&mut out, 64, 1, 1), |tile| {
                let c = tile.cols.start;
                tile.row_mut(0)[0] = x[c * 64..(c + 1) * 64].iter().sum();
            })
            .wait()
        });
        out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
    };
    let want = sums(1);
    for workers in 2..=4 {
        assert_eq!(sums(workers), want, "{workers} workers");
    }
}
