//! The kernel's cpulist syntax: `"0-3,8,10-11"`.
//!
//! Source: Documentation/ABI/testing/sysfs-devices-system-cpu (`online`, `*_cpus_list`,
//! `shared_cpu_list`) and `bitmap_parselist()` in lib/bitmap-str.c, which also accepts a stride
//! (`"0-15:2/4"`: from 0 to 15, the first 2 of every group of 4). The kernel prints lists without
//! strides; they are accepted so that hand-written lists parse the same way.

/// Largest CPU number accepted (the kernel's `NR_CPUS` tops out at 8192); anything larger is a
/// garbled file, not a machine, and must not make the parser allocate gigabytes.
pub const MAX_CPU: usize = 1 << 16;

/// Why a cpulist did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("'{0}' is not a CPU number")]
    NotANumber(String),
    #[error("range '{0}' ends before it starts")]
    Reversed(String),
    #[error("CPU {0} is above the largest CPU number accepted ({MAX_CPU})")]
    TooLarge(usize),
    #[error("stride '{0}' is not 'used/group' with 0 < used <= group")]
    BadStride(String),
}

/// Parses a cpulist into sorted, de-duplicated CPU numbers.
///
/// Surrounding whitespace (the trailing newline of a sysfs file) is ignored and an empty list is
/// valid (an empty `offline` file, a node without CPUs).
///
/// # Errors
/// [`CpuListError`] naming the piece that is not a number, a reversed range, a CPU number above
/// [`MAX_CPU`] or a malformed stride.
///
/// # Example
/// ```
/// use strata_engine::topology::cpulist::parse_cpulist;
/// assert_eq!(parse_cpulist("0-3,8,10-11\n").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
/// assert!(parse_cpulist("3-1").is_err());
/// ```
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, CpuListError> {
    let mut cpus = Vec::new();
    for piece in text.trim().split(',') {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        let (range, stride) = match piece.split_once(':') {
            Some((r, s)) => (r, Some(s)),
            None => (piece, None),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(range)?;
                (n, n)
            }
        };
        if last < first {
            return Err(CpuListError::Reversed(piece.to_string()));
        }
        let (used, group) = match stride {
            None => (1, 1),
            Some(s) => {
                let bad = || CpuListError::BadStride(s.to_string());
                let (u, g) = s.split_once('/').ok_or_else(bad)?;
                let (u, g) = (
                    u.parse::<usize>().map_err(|_| bad())?,
                    g.parse::<usize>().map_err(|_| bad())?,
                );
                if u == 0 || u > g {
                    return Err(bad());
                }
                (u, g)
            }
        };
        cpus.extend((first..=last).filter(|c| (c - first) % group < used));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Formats CPU numbers back into the kernel's compact syntax (`[0,1,2,3,8]` -> `"0-3,8"`).
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            out.push_str(&sorted[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", sorted[i], sorted[j]));
        }
        i = j + 1;
    }
    out
}

fn number(s: &str) -> Result<usize, CpuListError> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| CpuListError::NotANumber(s.to_string()))?;
    if n > MAX_CPU {
        return Err(CpuListError::TooLarge(n));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_singles_and_newline() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert_eq!(
            parse_cpulist("8-15,0-7").unwrap(),
            (0..16).collect::<Vec<_>>()
        );
    }

    #[test]
    fn empty_list_is_valid() {
        assert_eq!(parse_cpulist("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn stride_selects_the_first_of_each_group() {
        assert_eq!(parse_cpulist("0-7:2/4").unwrap(), vec![0, 1, 4, 5]);
        assert!(parse_cpulist("0-7:0/4").is_err());
        assert!(parse_cpulist("0-7:5/4").is_err());
        assert!(parse_cpulist("0-7:2").is_err());
    }

    #[test]
    fn garbled_lists_are_errors_not_panics() {
        assert_eq!(
            parse_cpulist("3-1"),
            Err(CpuListError::Reversed("3-1".into()))
        );
        assert!(matches!(
            parse_cpulist("a-b"),
            Err(CpuListError::NotANumber(_))
        ));
        assert!(matches!(
            parse_cpulist("0-"),
            Err(CpuListError::NotANumber(_))
        ));
        assert!(matches!(
            parse_cpulist("-1"),
            Err(CpuListError::NotANumber(_))
        ));
        assert!(matches!(
            parse_cpulist("0-4000000000"),
            Err(CpuListError::TooLarge(_))
        ));
        assert!(matches!(
            parse_cpulist("\u{0}\u{ff}"),
            Err(CpuListError::NotANumber(_))
        ));
    }

    #[test]
    fn format_round_trips() {
        for s in ["0-3,8,10-11", "0", "0,2,4", "0-31", ""] {
            assert_eq!(format_cpulist(&parse_cpulist(s).unwrap()), s);
        }
    }
}
