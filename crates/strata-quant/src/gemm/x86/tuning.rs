//! Routing choices that depend on the CPU's microarchitecture rather than on its instruction
//! set. Every route of a job computes the same bits (`tests/gemm.rs` checks each against
//! `vec_dot`), so a tuning changes only speed.
//!
//! The one tuning so far is AMD Zen 5 (family 0x1A and later): there IQ3_XXS's row quads
//! (`iq3_xxs_pairs.rs`, `Quads4`) lose to 16 tokens in the lanes, whose decode interleaves no
//! rows. Criterion `expert/IQ3_XXS/gemm/avx512` (512 × 2048, one core, G products/s, two
//! alternating rounds, twenty-third session): 10 tokens 130 (quads) against 165–166 (lanes),
//! 12 tokens 155 against 196–197, 24 tokens 172–176 against 214–215, 40 tokens 181–184
//! against 244–249. On the Intel Xeon where the rule was set (nineteenth session) the quads
//! won; Zen 4, whose 512-bit operations are double-pumped, is not measured and keeps the
//! default.
//!
//! Zen 5 also runs IQ3_XXS's 16 tokens in the lanes 8 rows a tile rather than 4
//! (`iq3_xxs_lanes.rs`, `LANES16_R_ZEN5`). The quads lose there for the same reason: criterion
//! with 1, 2, 3 and 4 quads a tile (10 tokens: 81, 108, 117, 137) follows the bytes of weights
//! and activations each `vpdpbusd` streams from L2, and a quad tile streams 16 rows' decoded
//! blocks for every group of 4 tokens.

use std::cell::Cell;
use std::sync::OnceLock;

/// A CPU family whose routing differs from the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tuning {
    /// The rules measured on Intel Xeon (and used wherever nothing else was measured).
    Default,
    /// AMD Zen 5 and later (CPUID family 0x1A and up).
    Zen5,
}

thread_local! {
    static FORCED: Cell<Option<Tuning>> = const { Cell::new(None) };
}

/// This thread's tuning: the forced one inside [`with_tuning`], else the CPU's (probed once).
pub(crate) fn tuning() -> Tuning {
    FORCED.with(Cell::get).unwrap_or_else(|| {
        static CPU: OnceLock<Tuning> = OnceLock::new();
        *CPU.get_or_init(probe)
    })
}

/// Runs `f` with this thread's routing as on a CPU of tuning `t` (tests: both routes on one
/// machine).
pub fn with_tuning<R>(t: Tuning, f: impl FnOnce() -> R) -> R {
    crate::testing::scoped(&FORCED, Some(t), f)
}

/// The CPU's tuning from CPUID leaves 0 (vendor) and 1 (family: the base family, plus the
/// extended family where the base is 0xF; AMD's manual, "CPUID Fn0000_0001_EAX").
fn probe() -> Tuning {
    use std::arch::x86_64::__cpuid;
    let (vendor, sig) = (__cpuid(0), __cpuid(1).eax);
    let amd = [vendor.ebx, vendor.edx, vendor.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163];
    let base = (sig >> 8) & 0xf;
    let family = if base == 0xf {
        base + ((sig >> 20) & 0xff)
    } else {
        base
    };
    if amd && family >= 0x1a {
        Tuning::Zen5
    } else {
        Tuning::Default
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forcing_is_per_call_and_restored() {
        let cpu = tuning();
        assert_eq!(with_tuning(Tuning::Zen5, tuning), Tuning::Zen5);
        assert_eq!(with_tuning(Tuning::Default, tuning), Tuning::Default);
        assert_eq!(tuning(), cpu);
    }
}
