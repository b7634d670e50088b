//! Pinning threads to logical CPUs and reading the process's CPU mask (Linux
//! `sched_setaffinity(2)` / `sched_getaffinity(2)`); elsewhere both are no-ops.

/// Pins the calling thread to logical CPU `cpu`.
///
/// # Errors
/// The OS error text when the kernel refuses (CPU offline or outside the cpuset), or
/// "unsupported" off Linux. Callers treat this as a warning: an unpinned worker still works.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is beyond CPU_SETSIZE"));
    }
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set); CPU_SET writes inside it
    // (index checked above), and sched_setaffinity(0, ..) reads it for the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cpu: usize) -> Result<(), String> {
    Err("unsupported on this OS".into())
}

/// The logical CPUs this process may run on (its affinity mask), sorted; `None` if unknown.
#[cfg(target_os = "linux")]
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: as above; sched_getaffinity fills the zeroed set, CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect();
        (!cpus.is_empty()).then_some(cpus)
    }
}

#[cfg(not(target_os = "linux"))]
pub fn allowed_cpus() -> Option<Vec<usize>> {
    None
}
