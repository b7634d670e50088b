//! Whether a model's pages are mapped in at load or faulted in as decode first reads them.
//!
//! Mapping them at load ([`strata_gguf::GgufModel::make_resident`]) keeps page faults out of
//! decode, as llama.cpp's `MAP_POPULATE` does; it is skipped when the model does not fit in
//! the memory the kernel reports as available, where reading it all would only evict parts of
//! it again.

/// `MemAvailable` of `/proc/meminfo` in bytes, `None` where that cannot be read (not Linux).
pub fn available_memory_bytes() -> Option<u64> {
    meminfo_bytes("MemAvailable")
}

/// The `field` line (e.g. `MemTotal`, `MemAvailable`) of `/proc/meminfo` in bytes, `None`
/// where that cannot be read (not Linux).
pub fn meminfo_bytes(field: &str) -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&meminfo, field)
}

/// The `field:` line of a `/proc/meminfo` text, in bytes.
fn parse_meminfo(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// True when `model_bytes` fit in the available memory with 10 % of it to spare (for the KV
/// cache and activations). Unknown available memory counts as not fitting.
pub fn fits_in_memory(model_bytes: u64) -> bool {
    available_memory_bytes().is_some_and(|avail| model_bytes <= avail / 10 * 9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available_in_kib() {
        let text = "MemTotal:       24684000 kB\nMemFree:   100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_meminfo(text, "MemAvailable"), Some(2048 * 1024));
        assert_eq!(parse_meminfo(text, "MemTotal"), Some(24684000 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n", "MemAvailable"), None);
    }
}
