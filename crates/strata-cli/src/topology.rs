//! `strata topology`: print the CPU topology read from sysfs and the workers each
//! `--pool-affinity` would pin to.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use strata_engine::topology::{
    choose_workers, format_cpulist, measure, parse_cpulist, Affinity, CoreClass, CpuTopology,
    Measurement,
};

/// Options of `strata topology`.
#[derive(Args)]
pub struct TopologyArgs {
    /// Sysfs root to read (a recorded tree works too); the process's CPU affinity mask is
    /// applied only when this is /sys.
    #[arg(long, default_value = "/sys")]
    pub sysfs: PathBuf,
}

/// Reads the topology and prints it to stdout.
pub fn run(args: TopologyArgs) -> anyhow::Result<()> {
    let mut topo = CpuTopology::from_sysfs(&args.sysfs)?;
    let allowed = if args.sysfs == Path::new("/sys") {
        allowed_cpus()
    } else {
        None
    };
    if let Some(allowed) = &allowed {
        topo.restrict_to(allowed);
    }
    // Timing a kernel only describes this machine, not a recorded tree.
    let measured = allowed.is_some().then(|| measure(&topo));
    let stdout = std::io::stdout();
    report(
        &topo,
        &args.sysfs,
        allowed.as_deref(),
        measured.as_ref(),
        &mut stdout.lock(),
    )?;
    Ok(())
}

/// `Cpus_allowed_list` of `/proc/self/status` (the cpuset or `taskset` mask), if readable.
fn allowed_cpus() -> Option<Vec<usize>> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    parse_cpulist(line).ok()
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Writes the human-readable report; `measured` is what `--pool-affinity measure` found on
/// this machine (`None` for a recorded tree).
pub fn report(
    topo: &CpuTopology,
    root: &Path,
    allowed: Option<&[usize]>,
    measured: Option<&Measurement>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let n_cores = topo.cpus.iter().filter(|c| c.is_first_thread()).count();
    writeln!(out, "CPU topology from {}", root.display())?;
    if let Some(allowed) = allowed {
        writeln!(
            out,
            "  this process may run on CPUs {}",
            format_cpulist(allowed)
        )?;
    }
    writeln!(
        out,
        "  {}, {}, {}, {}, {}, hybrid: {}",
        plural(topo.cpus.len(), "logical CPU"),
        plural(n_cores, "physical core"),
        plural(topo.packages().len(), "package"),
        plural(topo.nodes().len(), "NUMA node"),
        plural(topo.l3_domains().len(), "L3 domain"),
        if topo.hybrid { "yes" } else { "no" },
    )?;
    for class in [
        CoreClass::Performance,
        CoreClass::Efficiency,
        CoreClass::LowPowerEfficiency,
    ] {
        let threads = topo.threads_of(class);
        if threads.is_empty() {
            continue;
        }
        let mhz: Vec<u64> = topo
            .cpus
            .iter()
            .filter(|c| c.class == class)
            .filter_map(|c| c.max_freq_khz.map(|k| k / 1000))
            .collect();
        let freq = match (mhz.iter().min(), mhz.iter().max()) {
            (Some(lo), Some(hi)) if lo == hi => format!(", max {hi} MHz"),
            (Some(lo), Some(hi)) => format!(", max {lo}-{hi} MHz"),
            _ => String::new(),
        };
        writeln!(
            out,
            "  {:<5} {}, {} (CPUs {}){freq}",
            format!(
                "{}:",
                if topo.hybrid {
                    class.short_name()
                } else {
                    "all"
                }
            ),
            plural(topo.cores_of(class).len(), "core"),
            plural(threads.len(), "thread"),
            format_cpulist(&threads),
        )?;
    }
    for package in topo.packages() {
        let cpus: Vec<usize> = topo
            .cpus
            .iter()
            .filter(|c| c.package == package)
            .map(|c| c.id)
            .collect();
        writeln!(out, "  package {package}: CPUs {}", format_cpulist(&cpus))?;
    }
    for node in topo.nodes() {
        let cpus: Vec<usize> = topo
            .cpus
            .iter()
            .filter(|c| c.node == Some(node))
            .map(|c| c.id)
            .collect();
        writeln!(out, "  NUMA node {node}: CPUs {}", format_cpulist(&cpus))?;
    }
    for (i, domain) in topo.l3_domains().iter().enumerate() {
        writeln!(out, "  L3 domain {i}: CPUs {}", format_cpulist(domain))?;
    }
    writeln!(out, "pool workers by --pool-affinity:")?;
    for (name, affinity) in [
        ("auto", Affinity::Auto),
        ("p-cores", Affinity::PCores),
        ("all", Affinity::All),
    ] {
        let workers = choose_workers(topo, affinity);
        let mut sorted = workers.clone();
        sorted.sort_unstable();
        writeln!(
            out,
            "  {name:<8} {} on CPUs {}",
            plural(workers.len(), "worker"),
            format_cpulist(&sorted)
        )?;
    }
    match measured {
        Some(m) => {
            let mut sorted = m.workers.clone();
            sorted.sort_unstable();
            writeln!(
                out,
                "  measure  {} on CPUs {}",
                plural(m.workers.len(), "worker"),
                format_cpulist(&sorted)
            )?;
            for c in &m.classes {
                writeln!(
                    out,
                    "           {} core (CPU {}): {:.0} M Q4_K weights/s",
                    c.class.short_name(),
                    c.cpu,
                    c.mweights_per_s
                )?;
            }
            if let Some(g) = m.smt_gain {
                writeln!(
                    out,
                    "           two SMT threads on one core: {g:.2}x one thread"
                )?;
            }
        }
        None => writeln!(out, "  measure  (times a kernel; only with --sysfs /sys)")?,
    }
    for warning in &topo.warnings {
        writeln!(out, "warning: ignored {warning}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_names_classes_and_auto_choice_on_core_ultra() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../strata-engine/tests/data/sysfs/core-ultra-7-255h");
        let topo = CpuTopology::from_sysfs(&root).unwrap();
        let mut out = Vec::new();
        report(&topo, &root, None, None, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("16 logical CPUs, 16 physical cores, 1 package, 1 NUMA node, 1 L3 domain, hybrid: yes"), "{text}");
        assert!(
            text.contains("LP-E: 2 cores, 2 threads (CPUs 14-15), max 2500 MHz"),
            "{text}"
        );
        assert!(text.contains("auto     6 workers on CPUs 0-5"), "{text}");
    }
}
