//! Without a driver, opening a device is an error value, never a panic. This file is its own
//! test process, so pointing the loader at a missing driver here affects nothing else.

use strata_vulkan::{adapters, Device, VkError};

#[test]
fn a_missing_driver_is_an_error_not_a_panic() {
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/strata_no_icd.json");
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/strata_no_icd.json");
    match Device::new(0) {
        // No loader at all (a machine without libvulkan) is the other expected case.
        Err(VkError::NoDevice(_) | VkError::NoLoader(_)) => {}
        Err(e) => panic!("expected NoDevice or NoLoader, got {e}"),
        Ok(dev) => panic!("opened {} without a driver", dev.info().name),
    }
    match adapters() {
        Ok(list) => assert!(list.is_empty()),
        Err(e) => assert!(
            matches!(e, VkError::NoDevice(_) | VkError::NoLoader(_)),
            "{e}"
        ),
    }
    // The messages are one line each, for `strata devices` and the run commands' notice.
    let e = Device::new(0)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(!e.is_empty() && !e.contains('\n'), "{e}");
}
