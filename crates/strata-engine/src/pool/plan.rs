//! From `--pool-workers` and `--pool-affinity` to the CPUs a pool pins to.

use std::fmt;

use super::{allowed_cpus, PoolOptions};
use crate::topology::{choose_workers, measure, Affinity, CpuTopology, Measurement};

/// The resolved pool shape: how many workers, pinned where, and why.
#[derive(Debug, Clone)]
pub struct PoolPlan {
    /// Worker count, caller included.
    pub workers: usize,
    /// CPU of each worker (empty = unpinned: no sysfs topology on this system).
    pub cpus: Vec<usize>,
    /// The affinity asked for.
    pub affinity: Affinity,
    /// The timings behind the choice, for [`Affinity::Measure`].
    pub measurement: Option<Measurement>,
}

/// Resolves `workers` (0 = one per chosen CPU) and `affinity` on this machine: reads the
/// topology from `/sys`, keeps the CPUs this process may use (`sched_getaffinity`, so call it
/// before pinning the calling thread) and, for [`Affinity::Measure`], times each core class.
/// More workers than chosen CPUs wrap around the list. Without sysfs the plan is unpinned
/// with one worker per available CPU.
pub fn plan(workers: usize, affinity: Affinity) -> PoolPlan {
    let Ok(mut topo) = CpuTopology::detect() else {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        return PoolPlan {
            workers: if workers == 0 { n } else { workers },
            cpus: Vec::new(),
            affinity,
            measurement: None,
        };
    };
    if let Some(allowed) = allowed_cpus() {
        topo.restrict_to(&allowed);
    }
    let (chosen, measurement) = match affinity {
        Affinity::Measure => {
            let m = measure(&topo);
            (m.workers.clone(), Some(m))
        }
        a => (choose_workers(&topo, a), None),
    };
    let n = if workers == 0 { chosen.len() } else { workers };
    PoolPlan {
        workers: n.max(1),
        cpus: chosen.iter().copied().cycle().take(n.max(1)).collect(),
        affinity,
        measurement,
    }
}

impl PoolPlan {
    /// Options for [`super::Pool::new`]; `pin_caller` as in [`PoolOptions::pin_caller`].
    pub fn options(&self, pin_caller: bool) -> PoolOptions {
        PoolOptions {
            workers: self.workers,
            cpus: self.cpus.clone(),
            pin_caller,
            ..PoolOptions::default()
        }
    }
}

impl fmt::Display for PoolPlan {
    /// One line for people, e.g. `2 workers on CPUs 0,1 (affinity auto)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.workers == 1 { "" } else { "s" };
        write!(f, "{} worker{plural}", self.workers)?;
        if self.cpus.is_empty() {
            write!(f, ", unpinned")?;
        } else {
            let cpus: Vec<String> = self.cpus.iter().map(|c| c.to_string()).collect();
            write!(f, " on CPUs {}", cpus.join(","))?;
        }
        let name = match self.affinity {
            Affinity::Auto => "auto",
            Affinity::PCores => "p-cores",
            Affinity::All => "all",
            Affinity::Measure => "measure",
        };
        write!(f, " (affinity {name}")?;
        if let Some(m) = &self.measurement {
            for c in &m.classes {
                write!(
                    f,
                    "; {} core {}: {:.0} M Q4_K weights/s",
                    c.class.short_name(),
                    c.cpu,
                    c.mweights_per_s
                )?;
            }
            if let Some(g) = m.smt_gain {
                write!(f, "; SMT gain {g:.2}x")?;
            }
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_worker_count_wraps_the_chosen_cpus() {
        let p = plan(5, Affinity::Auto);
        assert_eq!(p.workers, 5);
        assert!(p.cpus.is_empty() || p.cpus.len() == 5);
        assert!(plan(0, Affinity::Auto).workers >= 1);
        assert!(p.to_string().starts_with("5 workers"));
    }
}
