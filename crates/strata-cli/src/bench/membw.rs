//! DRAM read bandwidth of this machine, measured the way decode uses memory: every worker
//! streams its own share of a buffer far larger than the last-level cache.
//!
//! Decode of a dense model reads every weight once per token, so `bandwidth / bytes per token`
//! is the speed a perfect engine would reach (the "roofline" that BENCHMARKS.md compares
//! against).

use std::time::Instant;

/// Bytes read per pass: large enough that no cache level holds a useful part of it.
const BUF_BYTES: usize = 1 << 30;

/// Best-of-`passes` read bandwidth in GB/s (1e9 bytes per second) with `threads` threads, each
/// summing its contiguous share of a 1 GiB buffer with wide independent accumulators.
///
/// The buffer is written once before timing so its pages exist. Allocation failure aborts as
/// any `Vec` allocation does.
pub fn read_bandwidth_gbs(threads: usize, passes: usize) -> f64 {
    let threads = threads.max(1);
    let words = BUF_BYTES / 8;
    let buf: Vec<u64> = (0..words as u64).map(|i| i.wrapping_mul(0x9E37)).collect();
    let share = words.div_ceil(threads);
    let mut best = f64::MAX;
    let mut sink = 0u64;
    for _ in 0..passes.max(1) {
        let start = Instant::now();
        let sums: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = buf
                .chunks(share)
                .map(|part| s.spawn(move || sum_words(part)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).collect()
        });
        best = best.min(start.elapsed().as_secs_f64());
        sink = sink.wrapping_add(sums.iter().fold(0u64, |a, b| a.wrapping_add(*b)));
    }
    std::hint::black_box(sink);
    BUF_BYTES as f64 / best / 1e9
}

/// Wrapping sum with eight independent lanes, so the loop is bound by loads, not by an add
/// chain (the compiler vectorises it).
fn sum_words(words: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = words.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    let t = tail.iter().fold(0u64, |a, b| a.wrapping_add(*b));
    acc.iter().fold(t, |a, b| a.wrapping_add(*b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_words_is_the_wrapping_sum() {
        let v: Vec<u64> = (0..1003u64).map(|i| i.wrapping_mul(u64::MAX / 7)).collect();
        let want = v.iter().fold(0u64, |a, b| a.wrapping_add(*b));
        assert_eq!(sum_words(&v), want);
    }
}
