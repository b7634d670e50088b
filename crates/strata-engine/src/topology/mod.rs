//! CPU topology from sysfs, and which logical CPUs the pool's workers pin to.
//!
//! [`CpuTopology::from_sysfs`] reads a sysfs root (`/sys`, or a recorded tree in tests) into one
//! [`LogicalCpu`] per online CPU: package (socket), NUMA node, SMT siblings, L3 domain (an AMD
//! CCD is one), cluster, max frequency and [`CoreClass`] (Intel hybrid P-cores, E-cores and
//! low-power E-cores). [`choose_workers`] turns it and an [`Affinity`] into the CPUs to pin to.
//!
//! Sources: Documentation/ABI/testing/sysfs-devices-system-cpu (`online`, `cpuN/topology/*`,
//! `cpuN/cache/index*/*`, `cpuN/cpufreq/cpuinfo_max_freq`, `/sys/devices/cpu_core/cpus` and
//! `/sys/devices/cpu_atom/cpus` for hybrid PMUs), Documentation/ABI/stable/sysfs-devices-node
//! (`nodeN/cpulist`), Documentation/admin-guide/cputopology.rst.
//!
//! # Example
//! ```
//! use strata_engine::topology::{choose_workers, Affinity, CpuTopology};
//! let topo = CpuTopology::detect().unwrap_or_else(|_| CpuTopology::single_cpu());
//! let workers = choose_workers(&topo, Affinity::Auto);
//! assert!(!workers.is_empty());
//! ```

pub mod cpulist;
pub mod measure;
mod sysfs;

use std::path::PathBuf;

pub use cpulist::{format_cpulist, parse_cpulist, CpuListError};
pub use measure::{measure, Measurement};

/// The kind of core a logical CPU runs on. Non-hybrid CPUs have only [`CoreClass::Performance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CoreClass {
    /// Intel hybrid P-core (`/sys/devices/cpu_core/cpus`), or every core of a non-hybrid CPU.
    Performance,
    /// Intel hybrid E-core (`/sys/devices/cpu_atom/cpus`) that shares the E-cores' L3.
    Efficiency,
    /// Low-power E-core (Core Ultra SoC tile): an Atom core outside the E-cores' L3 domain or
    /// clocked far below them. Slow; never chosen by [`Affinity::Auto`].
    LowPowerEfficiency,
}

impl CoreClass {
    /// Short name for people: `P`, `E`, `LP-E`.
    pub fn short_name(self) -> &'static str {
        match self {
            CoreClass::Performance => "P",
            CoreClass::Efficiency => "E",
            CoreClass::LowPowerEfficiency => "LP-E",
        }
    }
}

/// One online logical CPU (a hardware thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalCpu {
    /// Kernel CPU number (`cpuN`).
    pub id: usize,
    /// `topology/physical_package_id` (socket); 0 when absent or negative.
    pub package: usize,
    /// `topology/core_id`; unique only within a package, and sparse on many Xeons.
    pub core_id: Option<usize>,
    /// This CPU and its SMT siblings (`topology/core_cpus_list`, else `thread_siblings_list`),
    /// sorted; just `[id]` when unknown.
    pub siblings: Vec<usize>,
    /// NUMA node (`/sys/devices/system/node/nodeN/cpulist`).
    pub node: Option<usize>,
    /// L3 domain, named by its lowest CPU (`cache/index*` with `level` 3: `shared_cpu_list`).
    /// `None` when the CPU has no L3 (LP-E cores) or sysfs does not say.
    pub l3: Option<usize>,
    /// Cluster (cores sharing an L2, e.g. a 4-E-core module), named by its lowest CPU
    /// (`topology/cluster_cpus_list`).
    pub cluster: Option<usize>,
    /// `cpufreq/cpuinfo_max_freq` in kHz.
    pub max_freq_khz: Option<u64>,
    /// Core class; see [`CoreClass`].
    pub class: CoreClass,
}

impl LogicalCpu {
    /// The physical core, named by the lowest CPU among its SMT siblings.
    pub fn core(&self) -> usize {
        self.siblings
            .first()
            .copied()
            .unwrap_or(self.id)
            .min(self.id)
    }

    /// Whether this is the first hardware thread of its core (the one [`Affinity::Auto`] uses).
    pub fn is_first_thread(&self) -> bool {
        self.core() == self.id
    }
}

/// The machine's online CPUs as sysfs describes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopology {
    /// Online logical CPUs, sorted by id; never empty.
    pub cpus: Vec<LogicalCpu>,
    /// Whether the kernel exposes Intel hybrid core types (`cpu_core` / `cpu_atom`).
    pub hybrid: bool,
    /// Files that were present but could not be parsed (ignored, with the reason).
    pub warnings: Vec<String>,
}

/// Why no topology could be read at all. Missing or garbled individual files are not errors;
/// they degrade the answer and are listed in [`CpuTopology::warnings`].
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("no CPUs found under {0} (is this a sysfs root such as /sys?)")]
    NoCpus(PathBuf),
}

impl CpuTopology {
    /// Reads the running machine's topology from `/sys`.
    ///
    /// # Errors
    /// [`TopologyError::NoCpus`] when `/sys` lists no CPU (not Linux, or sysfs not mounted).
    pub fn detect() -> Result<CpuTopology, TopologyError> {
        Self::from_sysfs(std::path::Path::new("/sys"))
    }

    /// Reads the topology under a sysfs root (`/sys`, or a recorded tree with the same layout).
    ///
    /// # Errors
    /// [`TopologyError::NoCpus`] when neither `devices/system/cpu/online` nor any `cpuN`
    /// directory names a CPU.
    pub fn from_sysfs(root: &std::path::Path) -> Result<CpuTopology, TopologyError> {
        sysfs::read(root)
    }

    /// A one-CPU topology, for platforms without sysfs.
    pub fn single_cpu() -> CpuTopology {
        CpuTopology {
            cpus: vec![LogicalCpu {
                id: 0,
                package: 0,
                core_id: None,
                siblings: vec![0],
                node: None,
                l3: None,
                cluster: None,
                max_freq_khz: None,
                class: CoreClass::Performance,
            }],
            hybrid: false,
            warnings: Vec::new(),
        }
    }

    /// Distinct packages (sockets), sorted.
    pub fn packages(&self) -> Vec<usize> {
        distinct(self.cpus.iter().map(|c| Some(c.package)))
    }

    /// Distinct NUMA nodes, sorted (empty when sysfs has no node directory).
    pub fn nodes(&self) -> Vec<usize> {
        distinct(self.cpus.iter().map(|c| c.node))
    }

    /// L3 domains as lists of CPUs, ordered by their lowest CPU.
    pub fn l3_domains(&self) -> Vec<Vec<usize>> {
        distinct(self.cpus.iter().map(|c| c.l3))
            .into_iter()
            .map(|d| {
                self.cpus
                    .iter()
                    .filter(|c| c.l3 == Some(d))
                    .map(|c| c.id)
                    .collect()
            })
            .collect()
    }

    /// Physical cores (first hardware threads) of a class.
    pub fn cores_of(&self, class: CoreClass) -> Vec<usize> {
        self.cpus
            .iter()
            .filter(|c| c.class == class && c.is_first_thread())
            .map(|c| c.id)
            .collect()
    }

    /// Logical CPUs of a class.
    pub fn threads_of(&self, class: CoreClass) -> Vec<usize> {
        self.cpus
            .iter()
            .filter(|c| c.class == class)
            .map(|c| c.id)
            .collect()
    }

    /// The fastest class present: P-cores if any, else E-cores, else LP-E cores.
    pub fn fastest_class(&self) -> CoreClass {
        self.cpus
            .iter()
            .map(|c| c.class)
            .min()
            .unwrap_or(CoreClass::Performance)
    }

    /// Keeps only the CPUs in `allowed` (the process's affinity mask, e.g. from
    /// `sched_getaffinity` or `Cpus_allowed_list` in `/proc/self/status`). Keeps everything if
    /// that would leave no CPU.
    pub fn restrict_to(&mut self, allowed: &[usize]) {
        if self.cpus.iter().any(|c| allowed.contains(&c.id)) {
            self.cpus.retain(|c| allowed.contains(&c.id));
        }
    }
}

/// Which logical CPUs the pool's workers pin to (`--pool-affinity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Affinity {
    /// One worker per physical core of the fastest class: P-cores on hybrid CPUs, every core
    /// otherwise; SMT siblings and LP-E cores are skipped.
    #[default]
    Auto,
    /// Every hardware thread of the fastest class (P-cores with their SMT siblings).
    PCores,
    /// Every online logical CPU.
    All,
    /// Time a short kernel on each core class and SMT, then choose ([`measure()`]); a pure
    /// [`choose_workers`] treats it as [`Affinity::Auto`].
    Measure,
}

impl std::str::FromStr for Affinity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Affinity::Auto),
            "p-cores" => Ok(Affinity::PCores),
            "all" => Ok(Affinity::All),
            "measure" => Ok(Affinity::Measure),
            other => Err(format!(
                "unknown affinity '{other}' (expected auto, p-cores, all or measure)"
            )),
        }
    }
}

/// The logical CPUs that pool workers pin to, one worker each.
///
/// Ordered by (NUMA node, core class, L3 domain, CPU id): within a node the fastest cores come
/// first, and workers with neighbouring indices share a cache, so a pool that splits work into
/// contiguous ranges keeps each range local.
/// Never empty for a topology from [`CpuTopology::from_sysfs`].
pub fn choose_workers(topo: &CpuTopology, affinity: Affinity) -> Vec<usize> {
    let fastest = topo.fastest_class();
    ordered_cpus(topo, |c| match affinity {
        Affinity::Auto | Affinity::Measure => c.class == fastest && c.is_first_thread(),
        Affinity::PCores => c.class == fastest,
        Affinity::All => true,
    })
}

/// The CPUs that pass `keep`, in worker order (NUMA node, core class, L3 domain, CPU id).
fn ordered_cpus(topo: &CpuTopology, keep: impl Fn(&LogicalCpu) -> bool) -> Vec<usize> {
    let mut chosen: Vec<&LogicalCpu> = topo.cpus.iter().filter(|c| keep(c)).collect();
    chosen.sort_by_key(|c| (c.node, c.class, c.l3, c.id));
    chosen.into_iter().map(|c| c.id).collect()
}

fn distinct(values: impl Iterator<Item = Option<usize>>) -> Vec<usize> {
    let mut v: Vec<usize> = values.flatten().collect();
    v.sort_unstable();
    v.dedup();
    v
}
