//! The element-wise kernels against strata-engine's CPU ops (rms_norm, add, scale, silu,
//! SwiGLU/GeGLU, RoPE in both pair layouts). Measure: max |Δ| / max |y|.

mod common;

use strata_engine::ops::rope::{Rope, RopeStyle};
use strata_engine::ops::{activation, gate, norm};
use strata_engine::pool;
use strata_vulkan::{transfer, Buffer, Device, GluAct, Kernels, Location, Recorder, RopePairs};

fn up(dev: &Device, v: &[f32]) -> Buffer {
    transfer::upload_f32(dev, v).expect("upload")
}

fn down(dev: &Device, b: &Buffer, n: usize) -> Vec<f32> {
    transfer::read_f32(dev, b, n).expect("read back")
}

fn run<'a>(dev: &Device, f: impl FnOnce(&mut Recorder<'a>)) {
    let mut rec = Recorder::new(dev).expect("recorder");
    f(&mut rec);
    rec.submit().expect("submit");
}

fn check(op: &str, got: &[f32], want: &[f32], tol: f32) {
    let err = common::rel_err(got, want);
    eprintln!("{op}: max|Δ|/max|y| = {err:.2e} (tolerance {tol:e})");
    assert!(err <= tol, "{op}: {err:e} > {tol:e}");
}

#[test]
fn rms_norm_matches_cpu_per_row_per_head_grouped_and_in_place() {
    let Some(dev) = common::device() else { return };
    let k = Kernels::new(&dev);
    let (t, d, eps) = (5, 200, 1e-6f32);
    let x: Vec<f32> = common::values(t * d, 1).iter().map(|v| v * 3.0).collect();
    let w = common::values(d, 2);
    let (xb, wb) = (up(&dev, &x), up(&dev, &w));
    let out = Buffer::new(&dev, 4 * (t * d) as u64, Location::Device).expect("alloc");

    // Token rows, one weight per element of a row.
    let mut want = vec![0.0; t * d];
    norm::rms_norm_rows(pool::global(), &x, &w, eps, &mut want);
    run(&dev, |r| {
        k.rms_norm(r, &xb, &wb, d, &out, t, d, eps).expect("record")
    });
    check("rms_norm rows", &down(&dev, &out, t * d), &want, 1e-5);

    // Heads of 40 (per-head q/k norm): one weight vector of head_dim, in place.
    let hw = &w[..40];
    let hwb = up(&dev, hw);
    let mut want = x.clone();
    norm::rms_norm_rows_in_place(pool::global(), &mut want, hw, eps);
    let xi = up(&dev, &x);
    run(&dev, |r| {
        k.rms_norm(r, &xi, &hwb, 40, &xi, t * d / 40, 40, eps)
            .expect("record")
    });
    check(
        "rms_norm heads in place",
        &down(&dev, &xi, t * d),
        &want,
        1e-5,
    );

    // Grouped: every 50-wide stream of a row normed on its own, one weight per row element.
    let mut want = vec![0.0; t * d];
    norm::rms_norm_groups(pool::global(), &x, &w, 50, eps, &mut want);
    run(&dev, |r| {
        k.rms_norm(r, &xb, &wb, d, &out, t * d / 50, 50, eps)
            .expect("record")
    });
    check("rms_norm grouped", &down(&dev, &out, t * d), &want, 1e-5);
}

#[test]
fn add_scale_silu_and_glu_match_cpu() {
    let Some(dev) = common::device() else { return };
    let k = Kernels::new(&dev);
    let n = 1000;
    let a: Vec<f32> = common::values(n, 3).iter().map(|v| v * 8.0).collect();
    let b = common::values(n, 4);

    let mut want = a.clone();
    strata_engine::ops::add_in_place(pool::global(), &mut want, &b);
    let (ab, bb) = (up(&dev, &a), up(&dev, &b));
    run(&dev, |r| k.add(r, &ab, &bb, n).expect("record"));
    check("add", &down(&dev, &ab, n), &want, 0.0);

    let want: Vec<f32> = a.iter().map(|v| v * 0.37).collect();
    let ab = up(&dev, &a);
    run(&dev, |r| k.scale(r, &ab, n, 0.37).expect("record"));
    check("scale", &down(&dev, &ab, n), &want, 0.0);

    let mut want = a.clone();
    gate::silu_in_place(pool::global(), &mut want);
    let ab = up(&dev, &a);
    run(&dev, |r| k.silu(r, &ab, n).expect("record"));
    check("silu", &down(&dev, &ab, n), &want, 1e-6);

    let mut want = a.clone();
    activation::swiglu(pool::global(), &mut want, &b);
    let ab = up(&dev, &a);
    run(&dev, |r| {
        k.glu(r, GluAct::SwiGlu, &ab, &bb, n).expect("record")
    });
    check("swiglu", &down(&dev, &ab, n), &want, 1e-6);

    // GELU at f16 precision on both sides; the GPU's tanh may round the f16 result the
    // other way: one f16 ulp (2^-11 relative) at most.
    let mut want = a.clone();
    activation::geglu_tanh(pool::global(), &mut want, &b);
    let ab = up(&dev, &a);
    run(&dev, |r| {
        k.glu(r, GluAct::GegluTanh, &ab, &bb, n).expect("record")
    });
    check("geglu_tanh", &down(&dev, &ab, n), &want, 1e-3);
}

#[test]
fn rope_matches_cpu_in_normal_and_neox_layouts() {
    let Some(dev) = common::device() else { return };
    let k = Kernels::new(&dev);
    // 3 tokens at positions far apart, 4 heads of 32, 24 rotated dims (partial rotary).
    let (n_t, heads, head_dim, n_rot) = (3, 4, 32, 24);
    let row = heads * head_dim;
    let pos = [0usize, 17, 4000];
    for (style, pairs) in [
        (RopeStyle::Normal, RopePairs::Normal),
        (RopeStyle::Neox, RopePairs::Neox),
    ] {
        let rope = Rope {
            style,
            n_rot,
            freq_base: 10000.0,
            freq_scale: 1.0,
        };
        let mut cs = vec![0.0f32; n_t * n_rot];
        for (t, p) in pos.iter().enumerate() {
            rope.angles(*p, &mut cs[t * n_rot..(t + 1) * n_rot]);
        }
        let x = common::values(n_t * row, 5);
        let mut want = x.clone();
        rope.apply_rows(pool::global(), &mut want, row, head_dim, &cs);
        let (xb, csb) = (up(&dev, &x), up(&dev, &cs));
        run(&dev, |r| {
            k.rope(r, pairs, &xb, &csb, n_t, row, head_dim, n_rot)
                .expect("record")
        });
        check(
            &format!("rope {style:?}"),
            &down(&dev, &xb, n_t * row),
            &want,
            1e-6,
        );
    }
}

#[test]
fn a_batch_sees_earlier_results_and_device_buffers_round_trip() {
    let Some(dev) = common::device() else { return };
    let k = Kernels::new(&dev);
    let x: Vec<f32> = (0..300).map(|i| i as f32).collect();
    let xb = up(&dev, &x);
    // Three dependent dispatches in one submit: (x·2 + x·2)·0.25 = x.
    let twice = up(&dev, &x);
    run(&dev, |r| {
        k.scale(r, &xb, 300, 2.0).expect("record");
        k.scale(r, &twice, 300, 2.0).expect("record");
        k.add(r, &xb, &twice, 300).expect("record");
        k.scale(r, &xb, 300, 0.25).expect("record");
    });
    assert_eq!(down(&dev, &xb, 300), x);
    // A byte length that is not whole words comes back as written.
    let bytes: Vec<u8> = (0..37).collect();
    let b = transfer::upload(&dev, &bytes).expect("upload");
    assert_eq!(transfer::read(&dev, &b, 37).expect("read"), bytes);
    let info = dev.info();
    eprintln!("device: {info}");
    assert!(info.subgroup_size >= 1);
}

#[test]
fn large_batches_and_large_grids_run_whole() {
    let Some(dev) = common::device() else { return };
    let k = Kernels::new(&dev);
    // 1500 dispatches in one submit: more descriptor sets than one pool holds (1024).
    let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let xb = up(&dev, &x);
    let mut rec = Recorder::new(&dev).expect("recorder");
    for i in 0..1500 {
        let s = if i % 2 == 0 { 2.0 } else { 0.5 };
        k.scale(&mut rec, &xb, 64, s).expect("record");
    }
    rec.submit().expect("submit");
    // The recorder is reusable after a submit.
    k.scale(&mut rec, &xb, 64, 3.0).expect("record");
    rec.submit().expect("submit again");
    let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
    assert_eq!(down(&dev, &xb, 64), want);

    // More elements than 65 535 workgroups of 64 cover: the grid's second dimension.
    let n = 65_535 * 64 + 1000;
    let big: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let bb = up(&dev, &big);
    run(&dev, |r| k.scale(r, &bb, n, -1.0).expect("record"));
    let got = down(&dev, &bb, n);
    assert!(
        got.iter().zip(&big).all(|(g, b)| *g == -b),
        "an element was missed"
    );
}
