#!/usr/bin/env python3
"""Writes recorded sysfs trees for the topology tests under
crates/strata-engine/tests/data/sysfs/<machine>/, holding only the files
strata_engine::topology reads (layout: Documentation/ABI/testing/sysfs-devices-system-cpu).

Each machine is described by its public topology (core counts, SMT, L3 sharing, max clocks from
the vendor's spec sheet). CPU numbering follows what Linux does on each kind of machine
(Intel hybrid: P-core threads first, siblings adjacent; AMD and Xeon: first threads of every core,
then their siblings); core_id values are illustrative, and the detector must not depend on them
(the Xeon's are sparse and repeat across sockets on purpose). The tests in
crates/strata-engine/tests/topology_sysfs.rs assert what the detector finds; change both together.

Usage: python3 scripts/make_sysfs_fixtures.py [OUT_DIR]
"""
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "crates/strata-engine/tests/data/sysfs"


def cpulist(cpus):
    """[0,1,2,3,8] -> '0-3,8' (the kernel's format)."""
    cpus = sorted(set(cpus))
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def machine(name, cpus, nodes=None, p_cores=None, atoms=None, siblings_file="core_cpus_list"):
    """cpus: {id: dict(package, core_id, siblings, cluster, l2, l3, khz)}; None fields are omitted."""
    root = OUT / name
    shutil.rmtree(root, ignore_errors=True)
    base = "devices/system/cpu"
    write(root, f"{base}/online", cpulist(cpus))
    for cpu, c in sorted(cpus.items()):
        d = f"{base}/cpu{cpu}"
        write(root, f"{d}/topology/physical_package_id", c["package"])
        write(root, f"{d}/topology/core_id", c["core_id"])
        write(root, f"{d}/topology/{siblings_file}", cpulist(c["siblings"]))
        if c.get("cluster") is not None:
            write(root, f"{d}/topology/cluster_cpus_list", cpulist(c["cluster"]))
        # index2 is the L2 and index3 the L3 on x86; the detector must check `level`, not the name.
        if c.get("l2") is not None:
            write(root, f"{d}/cache/index2/level", 2)
            write(root, f"{d}/cache/index2/shared_cpu_list", cpulist(c["l2"]))
        if c.get("l3") is not None:
            write(root, f"{d}/cache/index3/level", 3)
            write(root, f"{d}/cache/index3/shared_cpu_list", cpulist(c["l3"]))
        if c.get("khz") is not None:
            write(root, f"{d}/cpufreq/cpuinfo_max_freq", c["khz"])
    for node, members in enumerate(nodes or []):
        write(root, f"devices/system/node/node{node}/cpulist", cpulist(members))
    if p_cores is not None:
        write(root, "devices/cpu_core/cpus", cpulist(p_cores))
    if atoms is not None:
        write(root, "devices/cpu_atom/cpus", cpulist(atoms))


def core_ultra_7_255h():
    """Arrow Lake H: 6 P-cores (no SMT, 5.1 GHz), 8 E-cores in two 4-core modules (4.4 GHz)
    sharing the compute tile's L3 with the P-cores, 2 LP-E cores on the SoC tile (2.5 GHz,
    their own L2, no L3). 16 threads."""
    cpus = {}
    for k in range(6):
        cpus[k] = dict(package=0, core_id=4 * k, siblings=[k], cluster=[k], l2=[k], l3=range(14), khz=5100000)
    for k in range(8):
        cpu = 6 + k
        module = list(range(6 + 4 * (k // 4), 10 + 4 * (k // 4)))
        cpus[cpu] = dict(package=0, core_id=32 + k, siblings=[cpu], cluster=module, l2=module, l3=range(14), khz=4400000)
    for k in range(2):
        cpu = 14 + k
        cpus[cpu] = dict(package=0, core_id=40 + k, siblings=[cpu], cluster=[14, 15], l2=[14, 15], l3=None, khz=2500000)
    machine("core-ultra-7-255h", cpus, nodes=[range(16)], p_cores=range(6), atoms=range(6, 16))


def i9_13900k():
    """Raptor Lake S: 8 P-cores with SMT (CPUs 2k and 2k+1; two favoured cores at 5.8 GHz, the
    rest 5.5 GHz), 16 E-cores in four 4-core modules (4.3 GHz), one 36 MB L3 for all. 32 threads."""
    cpus = {}
    for k in range(8):
        pair = [2 * k, 2 * k + 1]
        khz = 5800000 if k in (2, 3) else 5500000
        for cpu in pair:
            cpus[cpu] = dict(package=0, core_id=4 * k, siblings=pair, cluster=pair, l3=range(32), khz=khz)
    for k in range(16):
        cpu = 16 + k
        module = list(range(16 + 4 * (k // 4), 20 + 4 * (k // 4)))
        cpus[cpu] = dict(package=0, core_id=32 + k, siblings=[cpu], cluster=module, l3=range(32), khz=4300000)
    machine("i9-13900k", cpus, nodes=[range(32)], p_cores=range(16), atoms=range(16, 32))


def ryzen_9_7950x():
    """Zen 4: 16 cores with SMT on two CCDs of 8 (each CCD its own 32 MB L3); CPU n and n+16 are
    siblings. Not hybrid: no cpu_core/cpu_atom. 32 threads."""
    cpus = {}
    for core in range(16):
        pair = [core, core + 16]
        ccd = [c for c in range(32) if (c % 16) // 8 == core // 8]
        for cpu in pair:
            cpus[cpu] = dict(package=0, core_id=core, siblings=pair, l3=ccd, khz=5756000)
    machine("ryzen-9-7950x", cpus, nodes=[range(32)])


def xeon_2s():
    """Two Xeon Silver 4208 (8 cores with SMT, 11 MB L3 each, 3.2 GHz), one NUMA node per socket.
    Linux numbers the first threads socket by socket (0-7, 8-15), then the siblings (16-23,
    24-31). An older kernel: SMT siblings only in thread_siblings_list. 32 threads."""
    core_ids = [0, 1, 2, 3, 4, 8, 9, 10]  # sparse, as on many Xeons, and equal across sockets
    cpus = {}
    for s in range(2):
        socket_cpus = [c for c in range(32) if (c % 16) // 8 == s]
        for k in range(8):
            pair = [8 * s + k, 16 + 8 * s + k]
            for cpu in pair:
                cpus[cpu] = dict(package=s, core_id=core_ids[k], siblings=pair, l3=socket_cpus, khz=3200000)
    nodes = [[c for c in range(32) if (c % 16) // 8 == s] for s in range(2)]
    machine("xeon-2s", cpus, nodes=nodes, siblings_file="thread_siblings_list")


def vm_2vcpu():
    """A 2-vCPU VM that exposes almost nothing: only the online list."""
    root = OUT / "vm-2vcpu"
    shutil.rmtree(root, ignore_errors=True)
    write(root, "devices/system/cpu/online", "0-1")


for make in (core_ultra_7_255h, i9_13900k, ryzen_9_7950x, xeon_2s, vm_2vcpu):
    make()
print(f"wrote {OUT}")
