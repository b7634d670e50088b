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
    // Caller and workers all panic: the workers' panic must not leak into the next run.
    let caught = catch_unwind(AssertUnwindSafe(|| {
        p.run(64, |_| {
            std::thread::sleep(Duration::from_micros(200));
            panic!("every task")
        })
    }));
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

#[test]
fn broadcast_runs_once_on_every_worker_thread_with_the_pool_installed() {
    for n in [1, 2, 4] {
        let p = pool(n);
        for _ in 0..50 {
            let seen = Mutex::new(Vec::new());
            p.broadcast(|i| {
                // Ops inside see this pool as current and run inline.
                assert!(with_current(|c| std::ptr::eq(c, &p)));
                let inner = AtomicUsize::new(0);
                p.run(8, |_| {
                    inner.fetch_add(1, Relaxed);
                });
                assert_eq!(inner.into_inner(), 8);
                seen.lock().unwrap().push((i, thread_token()));
            });
            let mut seen = seen.into_inner().unwrap();
            seen.sort();
            let workers: Vec<usize> = seen.iter().map(|s| s.0).collect();
            assert_eq!(workers, (0..n).collect::<Vec<_>>());
            let mut threads: Vec<usize> = seen.iter().map(|s| s.1).collect();
            threads.sort();
            threads.dedup();
            assert_eq!(threads.len(), n, "one call per distinct thread");
        }
        // From inside a task: once, on this thread.
        let calls = AtomicUsize::new(0);
        p.run(2, |_| {
            p.broadcast(|_| {
                calls.fetch_add(1, Relaxed);
            })
        });
        assert_eq!(calls.into_inner(), 2);
    }
}
