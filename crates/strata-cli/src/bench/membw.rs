//! DRAM read bandwidth of this machine, measured the way decode uses memory: every worker
//! streams its own share of a buffer far larger than the last-level cache, as two streams,
//! asking for the bytes 2 KiB ahead as the decode kernels do, from 2 MiB pages where the kernel
//! gives them (as the model's mapping gets them).
//!
//! Decode of a dense model reads every weight once per token, so `bandwidth / bytes per token`
//! is the speed a perfect engine would reach (the "roofline" that BENCHMARKS.md compares
//! against).

use std::time::Instant;

/// Bytes read per pass: large enough that no cache level holds a useful part of it.
const BUF_BYTES: usize = 1 << 30;

/// How far ahead of the line being summed the loop prefetches (as `strata_quant`'s decode loop).
const PREFETCH_BYTES: usize = 2048;

/// Best-of-`passes` read bandwidth in GB/s (1e9 bytes per second) with `threads` threads, each
/// summing its contiguous share of a 1 GiB buffer with wide independent accumulators.
///
/// The buffer is an anonymous mapping advised to use huge pages, written once before timing so
/// its pages exist; if it cannot be mapped, a `Vec` (whose allocation failure aborts).
pub fn read_bandwidth_gbs(threads: usize, passes: usize) -> f64 {
    let threads = threads.max(1);
    let words = BUF_BYTES / 8;
    let mut map = memmap2::MmapMut::map_anon(BUF_BYTES).ok();
    #[cfg(target_os = "linux")]
    if let Some(m) = &map {
        let _ = m.advise(memmap2::Advice::HugePage);
    }
    let mut owned = Vec::new();
    let buf: &mut [u64] = match map.as_mut() {
        // SAFETY: the map is page-aligned, BUF_BYTES long and zero-filled, so it is a valid
        // `[u64]` of `words` elements, borrowed for as long as `map` lives.
        Some(m) => unsafe { std::slice::from_raw_parts_mut(m.as_mut_ptr().cast(), words) },
        None => {
            owned.resize(words, 0u64);
            &mut owned
        }
    };
    for (i, w) in buf.iter_mut().enumerate() {
        *w = (i as u64).wrapping_mul(0x9E37);
    }
    let buf: &[u64] = buf;
    let share = words.div_ceil(threads);
    let mut best = f64::MAX;
    let mut sink = 0u64;
    for _ in 0..passes.max(1) {
        let start = Instant::now();
        let sums: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = buf
                .chunks(share)
                .map(|part| s.spawn(move || sum_words_fast(part)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).collect()
        });
        best = best.min(start.elapsed().as_secs_f64());
        sink = sink.wrapping_add(sums.iter().fold(0u64, |a, b| a.wrapping_add(*b)));
    }
    std::hint::black_box(sink);
    BUF_BYTES as f64 / best / 1e9
}

/// Wrapping sum with eight independent lanes a stream, so the loop is bound by loads, not by an
/// add chain (the compiler vectorises it). As the decode row loops do, it reads two streams
/// (the two halves of `words`, alternating) and prefetches [`PREFETCH_BYTES`] ahead in each: one
/// stream a core reaches 10-15 % less bandwidth than two on Zen 5, so a one-stream probe would
/// understate the roofline.
#[inline(always)]
fn sum_words(words: &[u64]) -> u64 {
    let (a, b) = words.split_at(words.len() / 2);
    let mut acc = [0u64; 16];
    let pairs = a.chunks_exact(8).zip(b.chunks_exact(8));
    let done = 8 * pairs.len();
    for (k, (x, y)) in pairs.enumerate() {
        prefetch(a, 8 * k + PREFETCH_BYTES / 8);
        prefetch(b, 8 * k + PREFETCH_BYTES / 8);
        for i in 0..8 {
            acc[i] = acc[i].wrapping_add(x[i]);
            acc[8 + i] = acc[8 + i].wrapping_add(y[i]);
        }
    }
    let tail = a[done..].iter().chain(&b[done..]);
    let t = tail.fold(0u64, |s, w| s.wrapping_add(*w));
    acc.iter().fold(t, |s, w| s.wrapping_add(*w))
}

/// [`sum_words`] compiled for AVX-512 or AVX2 where the CPU has them (wider loads: the plain
/// x86-64 build issues 2-4 times as many and does not reach the bandwidth the decode kernels
/// do).
fn sum_words_fast(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512 F.
        return unsafe { sum_words_avx512(words) };
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { sum_words_avx2(words) };
    }
    sum_words(words)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_words_avx512(words: &[u64]) -> u64 {
    sum_words(words)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_words_avx2(words: &[u64]) -> u64 {
    sum_words(words)
}

/// Asks for the cache line holding `words[at]` (if any) to be loaded; a hint only.
#[inline(always)]
fn prefetch(words: &[u64], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(w) = words.get(at) {
        // SAFETY: prefetching has no architectural effect; the pointer is in bounds.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((w as *const u64).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (words, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_words_is_the_wrapping_sum() {
        for n in [0u64, 1, 15, 16, 17, 1003, 1024] {
            let v: Vec<u64> = (0..n).map(|i| i.wrapping_mul(u64::MAX / 7)).collect();
            let want = v.iter().fold(0u64, |a, b| a.wrapping_add(*b));
            assert_eq!(sum_words(&v), want, "{n} words");
        }
    }
}
