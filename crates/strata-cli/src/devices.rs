//! `strata devices`: the Vulkan adapters this build can use, one line each.
//!
//! Without the `vulkan` feature, or on a machine without a Vulkan loader or device, it prints
//! one line saying so and succeeds: having no GPU is a fact to report, not an error.

use std::io::Write;

/// Writes one line per adapter (`0: NAME (discrete, Vulkan 1.3, 24.0 GiB, subgroup 32; f16
/// int8 …)`), or one line saying why there are none.
///
/// Errors: only a failed write to `out`.
pub fn run(out: &mut impl Write) -> anyhow::Result<()> {
    for line in lines() {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

#[cfg(feature = "vulkan")]
fn lines() -> Vec<String> {
    match strata_vulkan::adapters() {
        Ok(list) if list.is_empty() => vec!["no Vulkan devices found".into()],
        Ok(list) => list.iter().map(|a| a.to_string()).collect(),
        Err(e) => vec![e.to_string()],
    }
}

#[cfg(not(feature = "vulkan"))]
fn lines() -> Vec<String> {
    vec![
        "this build has no GPU backend (built without the `vulkan` feature, which is on by default)"
            .into(),
    ]
}
