//! The machine a measurement ran on (CPU, cores, RAM, OS) and the UTC date, for reports.
//! Read from `/proc` on Linux; fields that cannot be read say `unknown`.

use serde::{Deserialize, Serialize};

/// What the reports print about the machine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name (`/proc/cpuinfo`).
    pub cpu: String,
    /// Logical CPUs available to this process.
    pub threads: usize,
    /// Total RAM in GiB (`/proc/meminfo`).
    pub ram_gib: f64,
    /// OS name and kernel release.
    pub os: String,
}

impl Machine {
    /// Reads the current machine's description.
    pub fn current() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let ram_kib =
            strata_engine::residency::meminfo_bytes("MemTotal").unwrap_or(0) as f64 / 1024.0;
        let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        let name = os_release
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|s| s.trim_matches('"').to_string())
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let os = match kernel.trim() {
            "" => name,
            k => format!("{name}, Linux {k}"),
        };
        Machine {
            cpu,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_gib: ram_kib / (1024.0 * 1024.0),
            os,
        }
    }

    /// One line: `CPU (N threads), R GiB RAM, OS`.
    pub fn line(&self) -> String {
        format!(
            "{} ({} threads), {:.1} GiB RAM, {}",
            self.cpu, self.threads, self.ram_gib, self.os
        )
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_000), (2024, 10, 4));
    }
}
