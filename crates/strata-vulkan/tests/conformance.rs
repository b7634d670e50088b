//! The engine's per-op conformance suite on the Vulkan backend: the same cases as the
//! engine's `tests/conformance.rs` (`strata-engine/tests/conformance_cases/`, included here
//! with `#[path]`), run on the device and on the CPU backend (this machine's best instruction
//! set), compared case by case within a tolerance stated per op: max |Δ| / max |y_cpu|.
//!
//! Ops and weight types the backend does not run yet are [`UNSUPPORTED`]: each must fail on
//! the device (an error of the op or of `Backend::finish`), and the test fails when one of
//! them starts working, so the list stays true. Any other case must run and agree. One line
//! per op is printed. Without a Vulkan device the test prints `skipped` (fails with CI=true).

mod common;
#[path = "../../strata-engine/tests/conformance_cases/mod.rs"]
mod conformance_cases;

use std::collections::BTreeMap;

use conformance_cases::cases;
use strata_engine::backend::Cpu;
use strata_engine::pool::Pool;
use strata_vulkan::Vulkan;

/// The ops (case keys, see [`key`]) that the Vulkan backend does not implement yet.
const UNSUPPORTED: &[&str] = &[];

/// The key of a case name: its op (`rms_norm/576/T1` → `rms_norm`), and for a matmul or
/// the routed experts its weight types too (`matmul/Q4_K/37x256/T3` → `matmul/Q4_K`,
/// `moe/F32+F32/T9` → `moe/F32+F32`).
fn key(case: &str) -> &str {
    let mut ends = case.match_indices('/').map(|(i, _)| i);
    let first = ends.next().unwrap_or(case.len());
    if matches!(&case[..first], "matmul" | "moe") {
        return &case[..ends.next().unwrap_or(case.len())];
    }
    &case[..first]
}

/// The largest max |Δ| / max |y_cpu| allowed for a key: about 4–10× what lavapipe measures
/// (lavapipe against the CPU's AVX-512 kernels), with the reason the two sides differ.
fn tolerance(key: &str) -> f32 {
    match key {
        // f32 weights, f32 activations on both sides: only the order of the f32 sums differs.
        "matmul/F32" => 1e-5,
        // The CPU rounds the activations to the weight's float type (ggml's vec_dot_type);
        // the device multiplies them in f32. Measured 2.0e-4 (F16), 1.9e-3 (BF16: 8 bits).
        "matmul/F16" => 1e-3,
        "matmul/BF16" => 1e-2,
        // Quantized weights: the CPU quantizes the activations to Q8 (Q8_0 / Q8_K blocks, a
        // relative step of ~1/127 per block), the device multiplies f32 activations.
        // Measured 4.0e-3 … 7.8e-3 (IQ4_XS).
        k if k.starts_with("matmul/") => 3e-2,
        // Routed experts in f32: the same routing (read back, routed by the engine's own
        // code) and slot order; only the order of f32 sums differs.
        "moe/F32+F32" => 1e-5,
        // Quantized experts: two such matmuls in a row (gate/up, then down, each quantizing
        // its activations on the CPU). Measured 1.7e-2.
        k if k.starts_with("moe/") => 5e-2,
        // Online softmax in workgroup chunks vs the CPU's blocked softmax; f16 caches hold the
        // same rounded values on both sides. Measured 1.5e-6.
        "attention" => 1e-5,
        // QSA: the kept blocks chosen on the host by the engine's own code (the same blocks),
        // then the dense kernel and a sparse one of the same online softmax over the kept
        // positions. Measured 2.9e-7.
        "attend_qsa" => 1e-5,
        // Hyper-connections and the PLE gate (qwen4exp): σ through exp in another libm, the
        // gate's dot product reduced in another order. Measured ≤ 9.5e-8.
        "hc_collapse" | "hc_expand_add" | "ple_gate" => 1e-6,
        // Sums of squares in another order; exp in another libm. Measured ≤ 2.3e-7.
        "rms_norm" | "rms_norm_grouped" | "swiglu" | "silu" | "softcap" | "rope" => 1e-5,
        // GELU evaluated and rounded at f16 on both sides (ggml-cpu's table): one f16 ulp.
        // Measured 4.1e-5.
        "geglu" => 1e-3,
        // The gated delta rule, its state, its gates and the L2 norm of its inputs: the same
        // formulas in the same order of sums; exp/log in another libm and the device's
        // fused multiply-adds. Measured ≤ 3.2e-7 (delta_rule over 19 tokens).
        "delta_rule" | "delta_rule_state" | "delta_gates" | "l2_norm" => 1e-5,
        // Output gates (silu, σ) and the shared expert's gated add: exp in another libm.
        // Measured ≤ 1.8e-7.
        "mul_silu" | "mul_sigmoid" | "add_gated" => 1e-5,
        // Causal convolutions (conv1d, PLE's dilated one) and the history they leave: K
        // products summed in tap order on both sides (a device may fuse them). Measured 0.
        "conv1d" | "conv1d_state" | "ple_conv" | "ple_conv_state" => 1e-6,
        // Dequantization alone, and exact float operations.
        "embed" | "embed_rows" | "scale" => 1e-6,
        // Copies of columns.
        "split" | "concat" => 0.0,
        _ => 0.0,
    }
}

#[test]
fn every_op_matches_the_cpu_backend() {
    let Some(dev) = common::device() else { return };
    let pool = Pool::new(Default::default());
    let cpu = cases(&Cpu::new(&pool));
    let vk = cases(&Vulkan::on(&dev));
    assert_eq!(cpu.len(), vk.len());

    // key → (cases, worst relative difference, first failure)
    let mut per_op: BTreeMap<&str, (usize, f32, Option<String>)> = BTreeMap::new();
    let mut failures = Vec::new();
    for ((name, want), (vk_name, got)) in cpu.iter().zip(&vk) {
        assert_eq!(name, vk_name, "both backends run the cases in one order");
        let want: &Vec<f32> = want
            .as_ref()
            .unwrap_or_else(|e| panic!("{name}: the cpu backend failed: {e}"));
        let k = key(name);
        let e = per_op.entry(k).or_insert((0, 0.0, None));
        e.0 += 1;
        match got {
            Err(why) => {
                e.2.get_or_insert_with(|| why.clone());
                if !UNSUPPORTED.contains(&k) {
                    failures.push(format!("{name}: failed on vulkan: {why}"));
                }
            }
            Ok(got) if got.len() != want.len() || !got.iter().all(|v| v.is_finite()) => {
                e.1 = f32::NAN;
                failures.push(format!(
                    "{name}: {} values on vulkan (want {}), or some not finite",
                    got.len(),
                    want.len()
                ));
            }
            Ok(got) => {
                let worst = common::rel_err(got, want);
                e.1 = e.1.max(worst);
                if worst > tolerance(k) {
                    failures.push(format!(
                        "{name}: relative difference {worst:.2e} > {:.0e}",
                        tolerance(k)
                    ));
                }
            }
        }
    }
    for (k, (n, worst, failed)) in &per_op {
        let listed = UNSUPPORTED.contains(k);
        match failed {
            Some(why) if listed => {
                println!("conformance vulkan {k:<18} {n:>3} cases  unsupported (listed): {why}")
            }
            Some(_) => println!("conformance vulkan {k:<18} {n:>3} cases  FAILED"),
            None => println!(
                "conformance vulkan {k:<18} {n:>3} cases  max rel diff {worst:.2e}  (tolerance {:.0e})",
                tolerance(k)
            ),
        }
        if listed && failed.is_none() {
            failures.push(format!(
                "{k} runs on vulkan now: take it off UNSUPPORTED (and state its tolerance)"
            ));
        }
        if listed && failed.is_some() && *n > 0 {
            // Every case of a listed op must fail, not only some.
            let ok = cpu
                .iter()
                .zip(&vk)
                .filter(|((name, _), (_, got))| key(name) == *k && got.is_ok())
                .count();
            if ok > 0 {
                failures.push(format!("{k}: {ok} of {n} cases run on vulkan: unlist it"));
            }
        }
    }
    for k in UNSUPPORTED {
        assert!(per_op.contains_key(k), "{k} is listed but has no case");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
