//! Reading a sysfs tree into a [`CpuTopology`], and telling Intel's core classes apart.
//!
//! Every file is optional: a 2-vCPU VM may have only `devices/system/cpu/online` and the
//! `cpuN` directories. A file that is present but does not parse is ignored with a warning.
//! Paths (relative to the root, after Documentation/ABI/testing/sysfs-devices-system-cpu):
//!
//! | what | file |
//! |---|---|
//! | online CPUs | `devices/system/cpu/online` (else the `cpuN` directories whose `online` is not 0) |
//! | socket | `devices/system/cpu/cpuN/topology/physical_package_id` |
//! | core id | `devices/system/cpu/cpuN/topology/core_id` |
//! | SMT siblings | `.../topology/core_cpus_list`, else `.../topology/thread_siblings_list` (older name) |
//! | cluster | `.../topology/cluster_cpus_list` |
//! | L3 | `devices/system/cpu/cpuN/cache/index*/level` == 3, `.../shared_cpu_list` |
//! | max frequency | `devices/system/cpu/cpuN/cpufreq/cpuinfo_max_freq` (kHz) |
//! | NUMA node | `devices/system/node/nodeM/cpulist`, else a `nodeM` entry in `cpuN/` |
//! | hybrid classes | `devices/cpu_core/cpus`, `devices/cpu_atom/cpus` (hybrid PMU cpulists) |

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::cpulist::parse_cpulist;
use super::{CoreClass, CpuTopology, LogicalCpu, TopologyError};

/// An Atom core clocked below this share of the fastest Atom core's max frequency is low-power
/// (Core Ultra 7 255H: LP-E 2.5 GHz against E 4.4 GHz; every E-core of a chip has one max).
const LP_E_FREQ_RATIO: f64 = 0.75;

pub(super) fn read(root: &Path) -> Result<CpuTopology, TopologyError> {
    let mut r = Reader::default();
    let cpu_dir = root.join("devices/system/cpu");
    let online = match r.list(&cpu_dir.join("online")) {
        Some(list) if !list.is_empty() => list,
        _ => scan_cpu_dirs(&cpu_dir),
    };
    if online.is_empty() {
        return Err(TopologyError::NoCpus(root.to_path_buf()));
    }
    let node_of = r.node_map(root);
    let mut cpus = Vec::with_capacity(online.len());
    for &id in &online {
        let dir = cpu_dir.join(format!("cpu{id}"));
        let topo = dir.join("topology");
        let package = r.number::<i64>(&topo.join("physical_package_id"));
        let mut siblings = r
            .list(&topo.join("core_cpus_list"))
            .or_else(|| r.list(&topo.join("thread_siblings_list")))
            .unwrap_or_default();
        siblings.retain(|s| online.binary_search(s).is_ok());
        siblings.push(id);
        siblings.sort_unstable();
        siblings.dedup();
        cpus.push(LogicalCpu {
            id,
            package: package.and_then(|p| usize::try_from(p).ok()).unwrap_or(0),
            core_id: r.number(&topo.join("core_id")),
            siblings,
            node: node_of.get(&id).copied().or_else(|| node_entry(&dir)),
            l3: r.l3_domain(&dir.join("cache")),
            cluster: r
                .list(&topo.join("cluster_cpus_list"))
                .and_then(|l| l.first().copied()),
            max_freq_khz: r.number(&dir.join("cpufreq/cpuinfo_max_freq")),
            class: CoreClass::Performance,
        });
    }
    let p_cores = r.list(&root.join("devices/cpu_core/cpus"));
    let atoms = r
        .list(&root.join("devices/cpu_atom/cpus"))
        .unwrap_or_default();
    let hybrid = classify(&mut cpus, p_cores.as_deref(), &atoms);
    Ok(CpuTopology {
        cpus,
        hybrid,
        warnings: r.warnings,
    })
}

/// Sets each CPU's class from the hybrid PMU lists; returns whether the CPU is hybrid.
///
/// CPUs in `cpu_atom/cpus` are E-cores, except low-power ones: those outside the L3 domain the
/// P-cores use (Meteor Lake / Arrow Lake H SoC-tile cores have no L3 at all) or clocked below
/// [`LP_E_FREQ_RATIO`] of the fastest Atom core. The verdict is applied per cluster (cores that
/// share an L2), so one missing file cannot split a module. Cluster membership alone is no
/// signal: every 4-core E module is a cluster of its own too.
pub(super) fn classify(
    cpus: &mut [LogicalCpu],
    p_cores: Option<&[usize]>,
    atoms: &[usize],
) -> bool {
    let is_atom = |c: &LogicalCpu| atoms.binary_search(&c.id).is_ok();
    if !cpus.iter().any(is_atom) {
        return false;
    }
    let is_p = |c: &LogicalCpu| match p_cores {
        Some(p) => p.binary_search(&c.id).is_ok(),
        None => !is_atom(c),
    };
    // The L3 the big cores use: that of the P-cores if any, else the Atom cores' majority.
    let reference_l3 = most_common(cpus.iter().filter(|c| is_p(c)).filter_map(|c| c.l3))
        .or_else(|| most_common(cpus.iter().filter(|c| is_atom(c)).filter_map(|c| c.l3)));
    let top_atom_khz = cpus
        .iter()
        .filter(|c| is_atom(c))
        .filter_map(|c| c.max_freq_khz)
        .max();
    let mut low_power_clusters = Vec::new();
    for c in cpus.iter_mut() {
        if !is_atom(c) {
            continue;
        }
        let outside_l3 = reference_l3.is_some() && c.l3 != reference_l3;
        let slow = match (c.max_freq_khz, top_atom_khz) {
            (Some(f), Some(top)) => (f as f64) < LP_E_FREQ_RATIO * top as f64,
            _ => false,
        };
        c.class = if outside_l3 || slow {
            CoreClass::LowPowerEfficiency
        } else {
            CoreClass::Efficiency
        };
        if c.class == CoreClass::LowPowerEfficiency {
            low_power_clusters.extend(c.cluster);
        }
    }
    for c in cpus
        .iter_mut()
        .filter(|c| atoms.binary_search(&c.id).is_ok())
    {
        if c.cluster.is_some_and(|k| low_power_clusters.contains(&k)) {
            c.class = CoreClass::LowPowerEfficiency;
        }
    }
    true
}

fn most_common(values: impl Iterator<Item = usize>) -> Option<usize> {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    // Ties go to the lowest domain, so the answer does not depend on hash order.
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(v, _)| v)
}

/// `cpuN` directories, skipping those whose `online` file says 0; sorted.
fn scan_cpu_dirs(cpu_dir: &Path) -> Vec<usize> {
    let Ok(entries) = std::fs::read_dir(cpu_dir) else {
        return Vec::new();
    };
    let mut ids: Vec<usize> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
        .filter(|id| {
            let online = std::fs::read_to_string(cpu_dir.join(format!("cpu{id}/online")));
            online.map_or(true, |s| s.trim() != "0")
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// The `nodeM` entry the kernel puts in each `cpuN` directory.
fn node_entry(cpu_dir: &Path) -> Option<usize> {
    std::fs::read_dir(cpu_dir)
        .ok()?
        .flatten()
        .find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
}

/// Reads optional files, collecting a warning for each one that is present but garbled.
#[derive(Default)]
struct Reader {
    warnings: Vec<String>,
}

impl Reader {
    fn text(&mut self, path: &Path) -> Option<String> {
        let bytes = std::fs::read(path).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn list(&mut self, path: &Path) -> Option<Vec<usize>> {
        let text = self.text(path)?;
        match parse_cpulist(&text) {
            Ok(list) => Some(list),
            Err(e) => {
                self.warnings.push(format!("{}: {e}", path.display()));
                None
            }
        }
    }

    fn number<T: std::str::FromStr>(&mut self, path: &Path) -> Option<T> {
        let text = self.text(path)?;
        match text.trim().parse() {
            Ok(n) => Some(n),
            Err(_) => {
                self.warnings.push(format!(
                    "{}: '{}' is not a number",
                    path.display(),
                    text.trim()
                ));
                None
            }
        }
    }

    /// The L3 domain (lowest CPU of `shared_cpu_list`) of the first `index*` with level 3.
    fn l3_domain(&mut self, cache_dir: &Path) -> Option<usize> {
        let mut indices: Vec<_> = std::fs::read_dir(cache_dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("index"))
            })
            .collect();
        indices.sort();
        for index in indices {
            if self.number::<u32>(&index.join("level")) != Some(3) {
                continue;
            }
            if self
                .text(&index.join("type"))
                .is_some_and(|t| t.trim() == "Instruction")
            {
                continue;
            }
            return self
                .list(&index.join("shared_cpu_list"))
                .and_then(|l| l.first().copied());
        }
        None
    }

    /// CPU -> NUMA node from `devices/system/node/nodeM/cpulist`.
    fn node_map(&mut self, root: &Path) -> HashMap<usize, usize> {
        let mut map = HashMap::new();
        let Ok(entries) = std::fs::read_dir(root.join("devices/system/node")) else {
            return map;
        };
        let mut nodes: Vec<(usize, std::path::PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                Some((
                    e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?,
                    e.path(),
                ))
            })
            .collect();
        nodes.sort();
        for (node, path) in nodes {
            for cpu in self.list(&path.join("cpulist")).unwrap_or_default() {
                map.entry(cpu).or_insert(node);
            }
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(id: usize, l3: Option<usize>, cluster: usize, mhz: u64) -> LogicalCpu {
        LogicalCpu {
            id,
            package: 0,
            core_id: None,
            siblings: vec![id],
            node: None,
            l3,
            cluster: Some(cluster),
            max_freq_khz: Some(mhz * 1000),
            class: CoreClass::Performance,
        }
    }

    #[test]
    fn low_power_cores_are_found_by_frequency_when_they_share_the_l3() {
        let mut cpus = vec![
            cpu(0, Some(0), 0, 5000),
            cpu(1, Some(0), 1, 4000),
            cpu(2, Some(0), 1, 4000),
        ];
        cpus.extend([cpu(3, Some(0), 3, 2000), cpu(4, Some(0), 3, 2000)]);
        assert!(classify(&mut cpus, Some(&[0]), &[1, 2, 3, 4]));
        let classes: Vec<_> = cpus.iter().map(|c| c.class.short_name()).collect();
        assert_eq!(classes, ["P", "E", "E", "LP-E", "LP-E"]);
    }

    #[test]
    fn one_low_power_core_marks_its_whole_cluster() {
        // cpu 4 lost its cpufreq and cache files; its cluster mate still identifies it.
        let mut cpus = vec![
            cpu(0, Some(0), 0, 5000),
            cpu(1, Some(0), 1, 4000),
            cpu(2, Some(0), 1, 4000),
        ];
        let mut bare = cpu(4, Some(0), 3, 0);
        bare.max_freq_khz = None;
        cpus.extend([cpu(3, None, 3, 2000), bare]);
        classify(&mut cpus, Some(&[0]), &[1, 2, 3, 4]);
        assert_eq!(cpus[4].class, CoreClass::LowPowerEfficiency);
        assert_eq!(cpus[1].class, CoreClass::Efficiency);
    }

    #[test]
    fn without_cpu_core_list_non_atom_cpus_are_p_cores() {
        let mut cpus = vec![cpu(0, Some(0), 0, 5000), cpu(1, Some(0), 1, 4000)];
        assert!(classify(&mut cpus, None, &[1]));
        assert_eq!(
            (cpus[0].class, cpus[1].class),
            (CoreClass::Performance, CoreClass::Efficiency)
        );
        assert!(!classify(&mut cpus[..1], None, &[]));
    }
}
