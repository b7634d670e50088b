//! Topology detection on recorded sysfs trees (written by scripts/make_sysfs_fixtures.py) and on
//! this machine's own /sys.

use std::path::{Path, PathBuf};

use strata_engine::topology::{choose_workers, Affinity, CoreClass, CpuTopology, TopologyError};

fn fixture(name: &str) -> CpuTopology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sysfs")
        .join(name);
    let topo = CpuTopology::from_sysfs(&root).unwrap();
    assert!(topo.warnings.is_empty(), "{name}: {:?}", topo.warnings);
    topo
}

fn range(r: std::ops::Range<usize>) -> Vec<usize> {
    r.collect()
}

#[test]
fn core_ultra_7_255h_has_6_p_8_e_2_lp_e_cores() {
    let t = fixture("core-ultra-7-255h");
    assert!(t.hybrid);
    assert_eq!(t.cpus.len(), 16);
    assert_eq!(t.cores_of(CoreClass::Performance), range(0..6));
    assert_eq!(t.cores_of(CoreClass::Efficiency), range(6..14));
    assert_eq!(t.cores_of(CoreClass::LowPowerEfficiency), vec![14, 15]);
    assert_eq!(t.l3_domains(), vec![range(0..14)]);
    assert_eq!((t.packages(), t.nodes()), (vec![0], vec![0]));
    assert_eq!(choose_workers(&t, Affinity::Auto), range(0..6));
    assert_eq!(choose_workers(&t, Affinity::PCores), range(0..6));
    assert_eq!(choose_workers(&t, Affinity::All), range(0..16));
}

#[test]
fn i9_13900k_has_8_p_cores_with_smt_and_16_e_cores() {
    let t = fixture("i9-13900k");
    assert!(t.hybrid);
    assert_eq!(t.cpus.len(), 32);
    assert_eq!(
        t.cores_of(CoreClass::Performance),
        vec![0, 2, 4, 6, 8, 10, 12, 14]
    );
    assert_eq!(t.threads_of(CoreClass::Performance), range(0..16));
    assert_eq!(t.cores_of(CoreClass::Efficiency), range(16..32));
    assert!(t.threads_of(CoreClass::LowPowerEfficiency).is_empty());
    assert_eq!(t.cpus[3].siblings, vec![2, 3]);
    assert_eq!(t.cpus[20].cluster, Some(20));
    assert_eq!(t.cpus[4].max_freq_khz, Some(5_800_000));
    assert_eq!(t.l3_domains(), vec![range(0..32)]);
    assert_eq!(
        choose_workers(&t, Affinity::Auto),
        vec![0, 2, 4, 6, 8, 10, 12, 14]
    );
    assert_eq!(choose_workers(&t, Affinity::PCores), range(0..16));
    assert_eq!(choose_workers(&t, Affinity::All), range(0..32));
}

#[test]
fn ryzen_9_7950x_has_two_ccds_and_smt() {
    let t = fixture("ryzen-9-7950x");
    assert!(!t.hybrid);
    assert_eq!(t.cpus.len(), 32);
    assert_eq!(t.cores_of(CoreClass::Performance), range(0..16));
    let ccd0: Vec<usize> = (0..8).chain(16..24).collect();
    let ccd1: Vec<usize> = (8..16).chain(24..32).collect();
    assert_eq!(t.l3_domains(), vec![ccd0.clone(), ccd1.clone()]);
    assert_eq!(t.cpus[17].siblings, vec![1, 17]);
    assert_eq!(choose_workers(&t, Affinity::Auto), range(0..16));
    // All: grouped by CCD so neighbouring workers share an L3.
    assert_eq!(choose_workers(&t, Affinity::All), [ccd0, ccd1].concat());
}

#[test]
fn two_socket_xeon_has_two_packages_and_numa_nodes() {
    let t = fixture("xeon-2s");
    assert!(!t.hybrid);
    assert_eq!(t.cpus.len(), 32);
    assert_eq!(t.packages(), vec![0, 1]);
    assert_eq!(t.nodes(), vec![0, 1]);
    let socket0: Vec<usize> = (0..8).chain(16..24).collect();
    let socket1: Vec<usize> = (8..16).chain(24..32).collect();
    assert_eq!(t.l3_domains(), vec![socket0.clone(), socket1.clone()]);
    assert!(t.cpus.iter().all(|c| c.node == Some(c.package)));
    // Sparse core ids that repeat across sockets do not merge cores: siblings come from sysfs.
    assert_eq!(t.cpus[8].core_id, t.cpus[0].core_id);
    assert_eq!(t.cpus[24].siblings, vec![8, 24]);
    assert_eq!(t.cores_of(CoreClass::Performance), range(0..16));
    assert_eq!(choose_workers(&t, Affinity::Auto), range(0..16));
    assert_eq!(
        choose_workers(&t, Affinity::All),
        [socket0, socket1].concat()
    );
}

#[test]
fn vm_with_only_an_online_list_degrades_to_plain_cpus() {
    let t = fixture("vm-2vcpu");
    assert!(!t.hybrid);
    assert_eq!(t.cpus.len(), 2);
    assert!(t
        .cpus
        .iter()
        .all(|c| c.l3.is_none() && c.node.is_none() && c.max_freq_khz.is_none()));
    assert_eq!(t.packages(), vec![0]);
    assert!(t.nodes().is_empty() && t.l3_domains().is_empty());
    assert_eq!(choose_workers(&t, Affinity::Auto), vec![0, 1]);
}

/// A scratch sysfs tree under the target directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("strata-topology-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, rel: &str, content: &[u8]) {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn garbled_files_are_warnings_not_errors() {
    let s = Scratch::new("garbled");
    s.write("devices/system/cpu/online", b"0-3\n");
    s.write("devices/system/cpu/cpu0/topology/core_cpus_list", b"0,x\n");
    s.write(
        "devices/system/cpu/cpu1/topology/physical_package_id",
        b"\xff\xfe\n",
    );
    s.write("devices/system/cpu/cpu2/cache/index3/level", b"3\n");
    s.write(
        "devices/system/cpu/cpu2/cache/index3/shared_cpu_list",
        b"9-2\n",
    );
    s.write(
        "devices/system/cpu/cpu3/cpufreq/cpuinfo_max_freq",
        b"fast\n",
    );
    s.write("devices/system/node/node0/cpulist", b"0-99999999999\n");
    s.write("devices/cpu_atom/cpus", b"\n");
    let t = CpuTopology::from_sysfs(&s.0).unwrap();
    assert_eq!(t.cpus.len(), 4);
    assert_eq!(t.warnings.len(), 5, "{:?}", t.warnings);
    assert!(!t.hybrid);
    assert_eq!(choose_workers(&t, Affinity::Auto), range(0..4));
}

#[test]
fn without_online_list_the_cpu_directories_count_and_offline_ones_are_skipped() {
    let s = Scratch::new("dirs");
    s.write("devices/system/cpu/cpu0/topology/core_id", b"0\n");
    s.write("devices/system/cpu/cpu1/online", b"0\n");
    s.write("devices/system/cpu/cpu2/online", b"1\n");
    s.write("devices/system/cpu/cpufreq/boost", b"1\n");
    s.write("devices/system/cpu/cpu2/node1/.keep", b"");
    let t = CpuTopology::from_sysfs(&s.0).unwrap();
    assert_eq!(t.cpus.iter().map(|c| c.id).collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(t.cpus[1].node, Some(1));
}

#[test]
fn a_root_without_cpus_is_an_error() {
    let s = Scratch::new("empty");
    assert!(matches!(
        CpuTopology::from_sysfs(&s.0),
        Err(TopologyError::NoCpus(_))
    ));
    let missing = s.0.join("does-not-exist");
    assert!(CpuTopology::from_sysfs(&missing).is_err());
}

#[test]
fn this_machines_sysfs_reads_without_error() {
    if !Path::new("/sys/devices/system/cpu").exists() {
        return; // not Linux
    }
    let t = CpuTopology::detect().unwrap();
    assert!(!t.cpus.is_empty());
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let all = choose_workers(&t, Affinity::All);
    assert_eq!(all.len(), t.cpus.len());
    let auto = choose_workers(&t, Affinity::Auto);
    assert!(!auto.is_empty() && auto.iter().all(|c| all.contains(c)));
}

#[test]
fn affinity_parses_including_measure() {
    assert_eq!("auto".parse::<Affinity>(), Ok(Affinity::Auto));
    assert_eq!("p-cores".parse::<Affinity>(), Ok(Affinity::PCores));
    assert_eq!("all".parse::<Affinity>(), Ok(Affinity::All));
    assert_eq!("measure".parse::<Affinity>(), Ok(Affinity::Measure));
    assert!("fast".parse::<Affinity>().is_err());
}
