//! `eˣ` for the gate functions (sigmoid, SiLU), and element maps that run it at the widest
//! vector width the CPU has.
//!
//! [`exp`] is Cephes' `expf` (S. Moshier, `cephes/single/expf.c`): `x = n·ln 2 + r` with `n`
//! the nearest integer to `x·log₂e` and `r` reduced in two steps (`ln 2` split in a short
//! high part and a low part), a degree-7 polynomial for `eʳ` on `|r| ≤ ln 2 / 2`, and `2ⁿ` made
//! from its exponent bits. Every step is an IEEE operation (fused multiply-adds included) on
//! each value alone, without branches, so a vector lane gives the bits of the scalar call and
//! a value's gate does not depend on the vector width, the chunking or its neighbours.
//! Error: within 2 ulp of `eˣ` over the range below (tests/`exp_is_within_two_ulp`).
//!
//! Arguments are clamped to `[-87, 88]`: below, `eˣ` ≤ 1.7·10⁻³⁸ (no gate or softmax weight
//! resolves it from 0), above, it is at most 1.7·10³⁸ where it would be `+∞`; a gate
//! `1 / (1 + eˣ)` is then 6·10⁻³⁹ instead of 0. NaN is taken as −87, as `f32::max` does: a
//! softmax lane whose scores are all masked (`−∞ − (−∞)`) weighs ≈ 0 instead of spreading NaN.

use strata_quant::Isa;

/// `log₂ e`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` = `LN2_HI + LN2_LO`, the high part (0.693359375) short enough that `n·LN2_HI` is
/// exact.
const LN2_HI: f32 = 355.0 / 512.0;
const LN2_LO: f32 = -2.121_944_4e-4;
/// `1.5·2²³`: added to a value of magnitude below 2²² it rounds it to an integer (ties to
/// even) held in the low mantissa bits.
const ROUNDER: f32 = 12_582_912.0;
/// Cephes' `expf` coefficients of `r³ … r⁷` terms' polynomial, highest first (`eʳ ≈ 1 + r +
/// r²·P(r)`).
const P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    0.166_666_65,
    0.5,
];

/// `eˣ` (module docs: method, error, range).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // `max` first: it returns -87 for NaN (module docs), where `clamp` would keep the NaN.
    #[allow(clippy::manual_clamp)]
    let x = x.max(-87.0).min(88.0);
    let shifted = x.mul_add(LOG2E, ROUNDER);
    let n = shifted - ROUNDER;
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let mut p = P[0];
    for c in &P[1..] {
        p = p.mul_add(r, *c);
    }
    let er = p.mul_add(r * r, r) + 1.0;
    // `n` in [-126, 127] sits in the low bits of `shifted`; 2ⁿ's exponent field is n + 127.
    let n_int = shifted.to_bits().wrapping_sub(ROUNDER.to_bits()) as i32;
    let two_n = f32::from_bits(((n_int + 127) as u32) << 23);
    er * two_n
}

/// Code that [`vectorized`] runs. A closure is one; a body too large for LLVM to inline a
/// closure of it into the three functions that call it (it would then run out of line, as
/// baseline SSE2 code) is a type of its own whose `run` is `#[inline(always)]`
/// (`norm::sum_f64`, `delta_net::Head`).
pub trait VectorBody {
    /// What the body returns.
    type Out;
    /// Runs the body.
    fn run(self) -> Self::Out;
}

impl<R, F: FnOnce() -> R> VectorBody for F {
    type Out = R;
    #[inline(always)]
    fn run(self) -> R {
        self()
    }
}

/// Runs `body` compiled for the widest vector unit [`Isa::best`] allows, with FMA: the body is
/// inlined into a function with those target features, so its element loops vectorize and
/// [`exp`]'s multiply-adds become FMA instructions (without them each would be a call to libm's
/// `fmaf`). The results are the same bits on every path (each operation is IEEE, FMA
/// correctly rounded), only the speed differs.
#[inline]
pub fn vectorized<B: VectorBody>(body: B) -> B::Out {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,fma")]
        unsafe fn avx512<B: VectorBody>(body: B) -> B::Out {
            body.run()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<B: VectorBody>(body: B) -> B::Out {
            body.run()
        }
        // SAFETY: `Isa::best` only returns paths whose features this CPU has (both include
        // FMA).
        match Isa::best() {
            Isa::Avx512 => return unsafe { avx512(body) },
            Isa::Avx2 | Isa::AvxVnni => return unsafe { avx2(body) },
            _ => {}
        }
    }
    body.run()
}

/// `x[i] = f(x[i])` for every element, [`vectorized`].
#[inline]
pub fn map(x: &mut [f32], f: impl Fn(f32) -> f32) {
    vectorized(|| {
        for v in x.iter_mut() {
            *v = f(*v);
        }
    })
}

/// `x[i] = f(x[i], y[i])` for every element (`y.len() >= x.len()`), [`vectorized`].
#[inline]
pub fn map2(x: &mut [f32], y: &[f32], f: impl Fn(f32, f32) -> f32) {
    vectorized(|| {
        for (v, w) in x.iter_mut().zip(y) {
            *v = f(*v, *w);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two finite positive floats.
    fn ulps(a: f32, b: f32) -> u32 {
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn exp_is_within_two_ulp() {
        let mut worst = 0;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp() as f32;
            let got = exp(x);
            assert!(ulps(got, want) <= 2, "exp({x}) = {got}, want {want}");
            worst = worst.max(ulps(got, want));
            x += 0.000_731;
        }
        assert!(
            worst >= 1,
            "a sweep that never rounds differently measures nothing"
        );
        for x in [0.0, -0.0, 1.0, -1.0, 1e-8, -1e-8, 0.5, -0.5] {
            let want = (x as f64).exp() as f32;
            assert!(ulps(exp(x), want) <= 1, "exp({x})");
        }
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn exp_clamps_far_arguments_and_nan() {
        assert_eq!(exp(-1000.0), exp(-87.0));
        assert_eq!(exp(f32::NEG_INFINITY), exp(-87.0));
        assert!(exp(-87.0) > 0.0 && exp(-87.0) < 2e-38);
        assert_eq!(exp(1000.0), exp(88.0));
        assert!(exp(88.0).is_finite() && exp(88.0) > 1.6e38);
        assert_eq!(exp(f32::NAN), exp(-87.0));
        assert_eq!(exp(f32::NEG_INFINITY - f32::NEG_INFINITY), exp(-87.0));
    }

    #[test]
    fn vector_maps_give_the_scalar_bits() {
        // Lengths past and between vector widths, values over the whole clamped range.
        for n in [1, 7, 16, 33, 1000] {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.19)
                .collect();
            let y: Vec<f32> = x.iter().map(|v| v * 0.5 - 1.0).collect();
            let mut a = x.clone();
            map(&mut a, |v| v / (1.0 + exp(-v)));
            let mut b = x.clone();
            map2(&mut b, &y, |v, w| w / (1.0 + exp(-v)));
            for i in 0..n {
                let s = x[i] / (1.0 + exp(-x[i]));
                assert_eq!(
                    a[i].to_bits(),
                    s.to_bits(),
                    "{} map [{i}]",
                    Isa::best().name()
                );
                let s2 = y[i] / (1.0 + exp(-x[i]));
                assert_eq!(b[i].to_bits(), s2.to_bits(), "map2 [{i}]");
            }
        }
    }
}
