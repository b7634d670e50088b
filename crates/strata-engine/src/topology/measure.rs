//! `--pool-affinity measure`: time a short Q4_K dot-product loop on one core of each class
//! (and on both hardware threads of an SMT core), then choose the pool's CPUs from the speeds.
//!
//! Rules: a class joins the pool when one of its cores runs the kernel at least
//! [`MIN_CLASS_SPEED`] as fast as a core of the fastest class (slower cores would make every
//! op wait for their share); SMT siblings join when two threads on one core do
//! [`MIN_SMT_GAIN`] times the work of one.

use std::time::{Duration, Instant};

use strata_gguf::GgmlType;

use super::{ordered_cpus, CoreClass, CpuTopology};
use crate::pool::pin_current_thread;

/// Slowest class speed, relative to the fastest, that still joins the pool.
pub const MIN_CLASS_SPEED: f64 = 0.5;
/// Throughput of two SMT threads over one thread of the same core needed to use both.
pub const MIN_SMT_GAIN: f64 = 1.15;

/// How long each timing runs.
const RUN: Duration = Duration::from_millis(25);
/// The kernel: 16 rows of 4096 Q4_K weights (36 KiB, cache-resident) against one activation.
const ROWS: usize = 16;
const COLS: usize = 4096;

/// The speed of one core class.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSpeed {
    pub class: CoreClass,
    /// The CPU that was timed.
    pub cpu: usize,
    /// Q4_K weights multiplied per second, in millions.
    pub mweights_per_s: f64,
}

/// What `measure` found and chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// One entry per class present, fastest first.
    pub classes: Vec<ClassSpeed>,
    /// Two threads on one core of the fastest class relative to one; `None` without SMT.
    pub smt_gain: Option<f64>,
    /// The chosen CPUs, one worker each, in [`super::choose_workers`] order.
    pub workers: Vec<usize>,
}

/// Times the kernel on each class of `topo` (pinning short-lived threads) and chooses workers.
/// Takes about 25 ms per class, plus 25 ms for an SMT core. A failure to pin is not an error:
/// the timing then describes whichever core the thread ran on.
pub fn measure(topo: &CpuTopology) -> Measurement {
    let (w, a) = kernel_data();
    let mut classes: Vec<ClassSpeed> = Vec::new();
    for class in [
        CoreClass::Performance,
        CoreClass::Efficiency,
        CoreClass::LowPowerEfficiency,
    ] {
        if let Some(&cpu) = topo.cores_of(class).first() {
            let speed = timed_on(&[cpu], &w, &a);
            classes.push(ClassSpeed {
                class,
                cpu,
                mweights_per_s: speed,
            });
        }
    }
    let fastest = classes
        .iter()
        .map(|c| c.mweights_per_s)
        .fold(0.0f64, f64::max);
    let first = classes
        .iter()
        .find(|c| c.mweights_per_s == fastest)
        .cloned();
    let smt_gain = first.as_ref().and_then(|c| {
        let lc = topo.cpus.iter().find(|l| l.id == c.cpu)?;
        let sibling = *lc.siblings.iter().find(|s| **s != c.cpu)?;
        Some(timed_on(&[c.cpu, sibling], &w, &a) / c.mweights_per_s)
    });
    let keep: Vec<CoreClass> = classes
        .iter()
        .filter(|c| c.mweights_per_s >= MIN_CLASS_SPEED * fastest)
        .map(|c| c.class)
        .collect();
    let smt = smt_gain.is_some_and(|g| g >= MIN_SMT_GAIN);
    let workers = ordered_cpus(topo, |c| {
        keep.contains(&c.class) && (smt || c.is_first_thread())
    });
    classes.sort_by(|x, y| y.mweights_per_s.total_cmp(&x.mweights_per_s));
    Measurement {
        classes,
        smt_gain,
        workers,
    }
}

/// A Q4_K weight block and its Q8_K activation, from fixed pseudo-random values.
fn kernel_data() -> (Vec<u8>, Vec<u8>) {
    let f: Vec<f32> = (0..ROWS * COLS)
        .map(|i| ((i * 2_654_435_761 % 1000) as f32 - 500.0) / 500.0)
        .collect();
    let ty = GgmlType::Q4_K;
    let rb = ty.row_bytes(COLS as u64).unwrap_or(0) as usize;
    let mut w = vec![0u8; ROWS * rb];
    for (x, q) in f.chunks_exact(COLS).zip(w.chunks_exact_mut(rb)) {
        let _ = strata_quant::quantize(ty, x, q);
    }
    let act_ty = GgmlType::Q8_K;
    let mut a = vec![0u8; act_ty.row_bytes(COLS as u64).unwrap_or(0) as usize];
    let _ = strata_quant::quantize(act_ty, &f[..COLS], &mut a);
    (w, a)
}

/// Runs the kernel on one thread per CPU of `cpus` at once; total M weights/s.
fn timed_on(cpus: &[usize], w: &[u8], a: &[u8]) -> f64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                s.spawn(move || {
                    let _ = pin_current_thread(cpu);
                    kernel_rate(w, a)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    })
}

/// M weights/s of the Q4_K dot loop on this thread.
fn kernel_rate(w: &[u8], a: &[u8]) -> f64 {
    let rb = w.len() / ROWS;
    let mut sink = 0.0f32;
    // Warm up (caches, clocks), then time whole sweeps.
    for r in 0..ROWS {
        sink += strata_quant::vec_dot(GgmlType::Q4_K, &w[r * rb..(r + 1) * rb], a).unwrap_or(0.0);
    }
    let start = Instant::now();
    let mut sweeps = 0u64;
    while start.elapsed() < RUN {
        for r in 0..ROWS {
            sink +=
                strata_quant::vec_dot(GgmlType::Q4_K, &w[r * rb..(r + 1) * rb], a).unwrap_or(0.0);
        }
        sweeps += 1;
    }
    std::hint::black_box(sink);
    (sweeps * (ROWS * COLS) as u64) as f64 / start.elapsed().as_secs_f64() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measuring_this_machine_chooses_some_of_its_cpus() {
        let topo = CpuTopology::detect().unwrap_or_else(|_| CpuTopology::single_cpu());
        let m = measure(&topo);
        assert!(!m.classes.is_empty() && m.classes[0].mweights_per_s > 0.0);
        assert!(!m.workers.is_empty());
        assert!(m
            .workers
            .iter()
            .all(|w| topo.cpus.iter().any(|c| c.id == *w)));
    }
}
