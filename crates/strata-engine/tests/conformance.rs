//! Per-op conformance, after llama.cpp's `test-backend-ops`: every op of the model graphs, over
//! odd shapes, every weight type and both KV types, run on each backend and compared with the
//! reference backend within a tolerance stated per op.
//!
//! Backends today are the CPU at each instruction-set level this machine has (`STRATA_ISA`),
//! each in a child process of this test (the level is chosen once per process); the reference
//! is the scalar path. A child runs [`cases`] (`conformance_cases/`, shared with strata-vulkan's
//! conformance test) and writes every output to a file; the parent
//! compares them with the reference's and prints one line per op and backend. The Vulkan
//! backend runs the same cases against the CPU in strata-vulkan's `tests/conformance.rs`.

mod conformance_cases;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Command;

use conformance_cases::cases;
use strata_engine::backend::Cpu;
use strata_quant::Isa;

/// Set in a child: the file to write outputs to.
const CHILD_ENV: &str = "STRATA_CONFORMANCE_OUT";

/// The op of a case name, and the largest difference allowed relative to the reference's
/// largest magnitude in that case.
fn tolerance(case: &str) -> (&str, f32) {
    if case.starts_with("matmul/BF16") {
        // AVX512-BF16 adds the pair products of `vdpbf16ps` in its own order.
        return ("matmul/BF16", 1e-4);
    }
    let op = case.split('/').next().unwrap();
    let tol = match op {
        // Integer block sums are exact; only the f32 order of adding the blocks differs.
        "matmul" | "moe" => 1e-5,
        // Same float operations in the same order on every path, by construction.
        _ => 0.0,
    };
    (op, tol)
}

fn write_outputs(path: &str, outs: &[(String, Vec<f32>)]) {
    let mut f = std::fs::File::create(path).unwrap();
    for (name, v) in outs {
        f.write_all(&(name.len() as u32).to_le_bytes()).unwrap();
        f.write_all(name.as_bytes()).unwrap();
        f.write_all(&(v.len() as u32).to_le_bytes()).unwrap();
        for x in v {
            f.write_all(&x.to_le_bytes()).unwrap();
        }
    }
}

fn read_outputs(path: &PathBuf) -> BTreeMap<String, Vec<f32>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    let mut at = 0;
    let u32_at = |at: &mut usize| {
        let v = u32::from_le_bytes(bytes[*at..*at + 4].try_into().unwrap());
        *at += 4;
        v as usize
    };
    let mut out = BTreeMap::new();
    while at < bytes.len() {
        let n = u32_at(&mut at);
        let name = String::from_utf8(bytes[at..at + n].to_vec()).unwrap();
        at += n;
        let len = u32_at(&mut at);
        let v = bytes[at..at + 4 * len]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        at += 4 * len;
        out.insert(name, v);
    }
    out
}

/// Runs [`cases`] on `isa` in a child process and reads its outputs.
fn outputs_on(isa: Isa) -> BTreeMap<String, Vec<f32>> {
    let path = std::env::temp_dir().join(format!(
        "strata-conformance-{}-{}.bin",
        std::process::id(),
        isa.name()
    ));
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "every_op_matches_the_reference_backend",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD_ENV, &path)
        .env(strata_quant::ISA_ENV, isa.name())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the {} backend failed:\n{}",
        isa.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    let outs = read_outputs(&path);
    let _ = std::fs::remove_file(&path);
    outs
}

#[test]
fn every_op_matches_the_reference_backend() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        let pool = strata_engine::pool::Pool::new(Default::default());
        // The CPU runs every case: a failure is a bug, not a gap.
        let outs: Vec<(String, Vec<f32>)> = cases(&Cpu::new(&pool))
            .into_iter()
            .map(|(name, o)| {
                let v = o.unwrap_or_else(|e| panic!("{name}: the cpu backend failed: {e}"));
                (name, v)
            })
            .collect();
        return write_outputs(&path, &outs);
    }
    let reference = outputs_on(Isa::Scalar);
    assert!(reference.len() > 100, "{} cases", reference.len());
    for (name, v) in &reference {
        assert!(
            v.iter().all(|x| x.is_finite()),
            "{name}: non-finite reference output"
        );
    }
    let mut failures = Vec::new();
    let mut not_run = Vec::new();
    for isa in Isa::ALL.into_iter().filter(|i| *i != Isa::Scalar) {
        if !isa.is_available() {
            not_run.push(isa.name());
            continue;
        }
        let got = outputs_on(isa);
        // op → (cases, worst relative difference, tolerance)
        let mut per_op: BTreeMap<&str, (usize, f32, f32)> = BTreeMap::new();
        for (name, want) in &reference {
            let (op, tol) = tolerance(name);
            let have = &got[name];
            let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-30);
            let worst = want
                .iter()
                .zip(have)
                .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()))
                / scale;
            let e = per_op.entry(op).or_insert((0, 0.0, tol));
            e.0 += 1;
            e.1 = e.1.max(worst);
            if worst.is_nan() || worst > tol || have.len() != want.len() {
                failures.push(format!(
                    "{} {name}: relative difference {worst:.2e} > {tol:.0e}",
                    isa.name()
                ));
            }
        }
        for (op, (n, worst, tol)) in per_op {
            println!(
                "conformance {:>8} vs scalar  {op:<16} {n:>4} cases  max rel diff {worst:.2e}  (tolerance {tol:.0e})",
                isa.name()
            );
        }
    }
    println!(
        "conformance: not run (this CPU lacks them): {}",
        not_run.join(", ")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
