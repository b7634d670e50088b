//! The public entry points: argument checking, unsupported types, unaligned input, and that
//! the row functions never allocate.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::Rng;
use strata_quant::{
    dequantize, dot_f32, quantize, supports_dequantize, supports_quantize, vec_dot, vec_dot_type,
    GgmlType, Op, QuantError,
};

/// Counts allocations made by the current thread, so tests running in parallel do not interfere.
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only bumps a thread-local counter, which
// neither allocates nor unwinds (`try_with` tolerates thread teardown).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(|c| c.get());
    f();
    ALLOCATIONS.with(|c| c.get()) - before
}

fn row_len(ty: GgmlType, n: usize) -> usize {
    ty.row_bytes(n as u64).unwrap() as usize
}

#[test]
fn row_functions_do_not_allocate() {
    let n = 1024;
    let x = Rng::new(1).normals(n, 1.0);
    let mut out = vec![0.0f32; n];
    let mut bytes = vec![0u8; row_len(GgmlType::F32, n)];
    // The widest activation row: BF16's (Q8_K's is the widest quantized one).
    let mut act = vec![0u8; row_len(GgmlType::BF16, n)];
    for ty in strata_gguf::ALL_TYPES
        .into_iter()
        .filter(|&t| supports_dequantize(t))
    {
        let row = &mut bytes[..row_len(ty, n)];
        if supports_quantize(ty) {
            assert_eq!(
                allocations_during(|| quantize(ty, &x, row).unwrap()),
                0,
                "quantize {ty}"
            );
        }
        assert_eq!(
            allocations_during(|| dequantize(ty, row, &mut out).unwrap()),
            0,
            "{ty}"
        );
        assert_eq!(
            allocations_during(|| {
                std::hint::black_box(dot_f32(ty, row, &x).unwrap());
            }),
            0,
            "dot_f32 {ty}"
        );
        if let Some(act_ty) = vec_dot_type(ty) {
            let act = &mut act[..row_len(act_ty, n)];
            quantize(act_ty, &x, act).unwrap();
            assert_eq!(
                allocations_during(|| {
                    std::hint::black_box(vec_dot(ty, row, act).unwrap());
                }),
                0,
                "{ty}"
            );
        }
    }
}

#[test]
fn lengths_are_checked_before_anything_is_written() {
    let mut out = [7.0f32; 64];
    assert_eq!(
        dequantize(GgmlType::Q4_0, &[0u8; 35], &mut out),
        Err(QuantError::LengthMismatch {
            ty: GgmlType::Q4_0,
            what: "quantized row (bytes)",
            expected: 36,
            got: 35
        })
    );
    assert_eq!(
        dequantize(GgmlType::Q4_K, &[0u8; 144], &mut out[..48]),
        Err(QuantError::PartialBlock {
            ty: GgmlType::Q4_K,
            elements: 48,
            block_size: 256
        })
    );
    assert!(out.iter().all(|&v| v == 7.0));

    let mut row = [0xAAu8; 34];
    let err = quantize(GgmlType::Q8_0, &[1.0; 31], &mut row).unwrap_err();
    assert!(
        matches!(err, QuantError::PartialBlock { elements: 31, .. }),
        "{err}"
    );
    assert!(quantize(GgmlType::Q8_0, &[1.0; 32], &mut row[..33]).is_err());
    assert!(row.iter().all(|&b| b == 0xAA));

    assert!(matches!(
        dot_f32(GgmlType::F16, &[0u8; 6], &[1.0; 4]),
        Err(QuantError::LengthMismatch {
            expected: 8,
            got: 6,
            ..
        })
    ));
    let err = vec_dot(GgmlType::Q4_K, &[0u8; 144], &[0u8; 290]).unwrap_err();
    assert_eq!(
        err,
        QuantError::LengthMismatch {
            ty: GgmlType::Q8_K,
            what: "activation row (bytes)",
            expected: 292,
            got: 290
        }
    );
    assert!(vec_dot(GgmlType::Q4_0, &[0u8; 17], &[0u8; 34]).is_err());
}

#[test]
fn unsupported_types_are_refused_with_the_operation_named() {
    for ty in [
        GgmlType::TQ1_0,
        GgmlType::TQ2_0,
        GgmlType::MXFP4,
        GgmlType::I8,
        GgmlType::F64,
    ] {
        assert!(!supports_dequantize(ty) && !supports_quantize(ty) && vec_dot_type(ty).is_none());
        let err = dequantize(ty, &[], &mut []).unwrap_err();
        assert_eq!(
            err,
            QuantError::Unsupported {
                ty,
                op: Op::Dequantize
            }
        );
        assert_eq!(
            err.to_string(),
            format!("dequantize is not implemented for {ty} in strata-quant")
        );
        assert_eq!(
            dot_f32(ty, &[], &[]),
            Err(QuantError::Unsupported { ty, op: Op::DotF32 })
        );
    }
    let ty = GgmlType::IQ2_XXS;
    assert!(supports_dequantize(ty) && !supports_quantize(ty));
    assert_eq!(
        quantize(ty, &[], &mut []),
        Err(QuantError::Unsupported {
            ty,
            op: Op::Quantize
        })
    );
    let ty = GgmlType::F16;
    assert_eq!(
        vec_dot(ty, &[], &[]),
        Err(QuantError::Unsupported { ty, op: Op::VecDot })
    );
}

#[test]
fn every_quantizable_type_is_dequantizable() {
    for ty in strata_gguf::ALL_TYPES {
        assert!(!supports_quantize(ty) || supports_dequantize(ty), "{ty}");
        if let Some(act) = vec_dot_type(ty) {
            assert!(supports_dequantize(ty) && supports_quantize(act), "{ty}");
        }
    }
}

/// Rows inside an mmapped file start at any byte offset; blocks have alignment 1.
#[test]
fn rows_at_odd_addresses_read_the_same() {
    let x = Rng::new(2).normals(512, 1.0);
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q8_K,
        GgmlType::F16,
        GgmlType::Q5_0,
    ] {
        let len = row_len(ty, 512);
        let mut buf = vec![0u8; len + 1];
        quantize(ty, &x, &mut buf[1..]).unwrap();
        let (mut a, mut b) = (vec![0.0f32; 512], vec![0.0f32; 512]);
        dequantize(ty, &buf[1..], &mut a).unwrap();
        let aligned = buf[1..].to_vec();
        dequantize(ty, &aligned, &mut b).unwrap();
        assert_eq!(a, b, "{ty}");
    }
}
