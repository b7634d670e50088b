//! Shared by the kernel tests: the device to test on, and the comparison measure.

use strata_vulkan::Device;

/// The Vulkan device under test (adapter `STRATA_VK_DEVICE`, default 0; CI selects lavapipe
/// with `VK_ICD_FILENAMES`). Without one: panics when `CI=true` (a CI machine must test the
/// kernels), otherwise prints why and returns `None` so the test passes vacuously.
pub fn device() -> Option<Device> {
    let index = std::env::var("STRATA_VK_DEVICE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    match Device::new(index) {
        Ok(dev) => Some(dev),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but no Vulkan device to test on: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// max |got − want| / max |want| (or the plain max |Δ| when `want` is all zeros).
#[allow(dead_code)] // not every test file uses it
pub fn rel_err(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    let max_d = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    let max_y = want.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
    if max_y > 0.0 {
        max_d / max_y
    } else {
        max_d
    }
}

/// Deterministic values in [-1, 1) (a small LCG; the tests need no rand crate).
#[allow(dead_code)] // not every test file uses it
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}
