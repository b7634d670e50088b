//! `strata inspect MODEL`: print a GGUF model's files, metadata and tensor directory.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::anyhow;
use strata_gguf::{Array, GgufError, GgufModel, Value};

/// Array elements shown before "…".
const ARRAY_PREVIEW: usize = 8;
/// Longest string value shown in full (in chars).
const STRING_PREVIEW: usize = 120;

/// Prints the model at `path` (one file, or all parts of a `*-00001-of-0000N.gguf` split):
/// each file with its version and alignment, all metadata (long arrays abbreviated to type,
/// length and the first items), the tensor table (name, ggml type, shape in ggml order,
/// bytes, MiB, data-section offset) and a summary (tensor count, total bytes, count per type).
///
/// Errors: any [`GgufError`] from opening the model, as one line naming the file.
pub fn run(path: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let model = GgufModel::open(path).map_err(|e| with_path(path, e))?;
    let files = model.files();
    for (i, (f, p)) in files.iter().zip(model.paths()).enumerate() {
        writeln!(
            out,
            "file {}/{}: {} ({} bytes)",
            i + 1,
            files.len(),
            p.display(),
            f.file_len()
        )?;
        writeln!(
            out,
            "  version {}, alignment {}, {} metadata keys, {} tensors, data at byte {}",
            f.version(),
            f.alignment(),
            f.metadata().len(),
            f.tensors().len(),
            f.data_offset()
        )?;
    }

    writeln!(out, "\nsummary:")?;
    summary(&model, out)?;
    let md = model.metadata();
    writeln!(out, "\nmetadata ({} keys):", md.len())?;
    let key_width = md.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in md.iter() {
        let note = match md.opt_u64(k) {
            Ok(Some(t)) if k == "general.file_type" => format!(" ({})", file_type_name(t)),
            _ => String::new(),
        };
        writeln!(out, "  {k:key_width$} = {}{note}", show_value(v))?;
    }

    print_tensors(&model, out)?;
    print_experts(&model, out)?;
    Ok(())
}

fn print_tensors(model: &GgufModel, out: &mut dyn Write) -> anyhow::Result<()> {
    let split = model.files().len() > 1;
    let name_width = model
        .tensors()
        .map(|t| t.info.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(out, "\ntensors ({}):", model.tensor_count())?;
    let part = if split { "  part" } else { "" };
    writeln!(
        out,
        "  {:name_width$}  {:7}  {:24}  {:>14}  {:>10}  {:>14}{part}",
        "name", "type", "shape", "bytes", "MiB", "offset"
    )?;
    let mut per_type: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    let mut total = 0u64;
    for (i, f) in model.files().iter().enumerate() {
        for t in f.tensors() {
            let shape = format!("{:?}", t.shape);
            let mib = t.size_bytes as f64 / (1024.0 * 1024.0);
            let part = if split {
                format!("  {:>4}", i + 1)
            } else {
                String::new()
            };
            writeln!(
                out,
                "  {:name_width$}  {:7}  {shape:24}  {:>14}  {mib:>10.3}  {:>14}{part}",
                t.name,
                t.ggml_type.name(),
                t.size_bytes,
                t.offset
            )?;
            let e = per_type.entry(t.ggml_type.name()).or_default();
            e.0 += 1;
            e.1 += t.size_bytes;
            total += t.size_bytes;
        }
    }

    writeln!(out, "\nby type:")?;
    let gib = total as f64 / (1024.0 * 1024.0 * 1024.0);
    writeln!(
        out,
        "  all     {:>6} tensors  {total:>14} bytes ({gib:.3} GiB)",
        model.tensor_count()
    )?;
    for (ty, (n, bytes)) in per_type {
        writeln!(out, "  {ty:7} {n:>6} tensors  {bytes:>14} bytes")?;
    }
    Ok(())
}

/// llama.cpp's name of a `general.file_type` value (`llama_ftype`: 15 is `Q4_K_M`).
pub fn file_type_name(t: u64) -> String {
    let name = match t {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return format!("file type {t}"),
    };
    name.to_string()
}

/// The short description `strata show` prints and `strata inspect` starts with: name,
/// architecture, file type, parameters, size, context, layers, width, heads, experts, vocabulary
/// and whether the file has a chat template.
pub fn summary(model: &GgufModel, out: &mut dyn Write) -> anyhow::Result<()> {
    let md = model.metadata();
    let arch = md
        .opt_str("general.architecture")
        .ok()
        .flatten()
        .unwrap_or("?");
    let num = |k: &str| md.opt_u64(&format!("{arch}.{k}")).ok().flatten();
    if let Some(name) = md.opt_str("general.name").ok().flatten() {
        writeln!(out, "  name            {name}")?;
    }
    writeln!(out, "  architecture    {arch}")?;
    let params: u64 = model.tensors().map(|t| t.info.n_elements()).sum();
    let bytes: u64 = model.tensors().map(|t| t.info.size_bytes).sum();
    if let Some(t) = md.opt_u64("general.file_type").ok().flatten() {
        writeln!(out, "  file type       {}", file_type_name(t))?;
    }
    writeln!(
        out,
        "  parameters      {:.2} B ({:.1} bits per weight)",
        params as f64 / 1e9,
        8.0 * bytes as f64 / params.max(1) as f64
    )?;
    writeln!(
        out,
        "  size            {:.1} MiB",
        bytes as f64 / (1024.0 * 1024.0)
    )?;
    if let Some(c) = num("context_length") {
        writeln!(out, "  context length  {c}")?;
    }
    if let (Some(l), Some(e)) = (num("block_count"), num("embedding_length")) {
        writeln!(out, "  layers, width   {l}, {e}")?;
    }
    if let Some(h) = num("attention.head_count") {
        let kv = num("attention.head_count_kv").unwrap_or(h);
        writeln!(out, "  heads (KV)      {h} ({kv})")?;
    }
    if let Some(n) = num("expert_count") {
        let used = num("expert_used_count").unwrap_or(0);
        writeln!(out, "  experts         {n}, {used} used per token")?;
    }
    if let Some(v) = md.opt_string_array("tokenizer.ggml.tokens").ok().flatten() {
        writeln!(out, "  vocabulary      {}", v.len())?;
    }
    let template = md.contains("tokenizer.chat_template");
    writeln!(
        out,
        "  chat template   {}",
        match template {
            true => "yes",
            false => "no (a base model: `strata chat` falls back to plain User:/Assistant: turns)",
        }
    )?;
    Ok(())
}

/// The routed experts of one layer: types of gate/up/down (`ffn_*_exps`), expert count,
/// expert FFN width, bytes per expert and in all, and the shared expert's bytes and types.
#[derive(Clone, PartialEq)]
struct ExpertLayer {
    n_expert: u64,
    n_ff_exp: u64,
    types: [&'static str; 3],
    per_expert: u64,
    shared: Option<(u64, [&'static str; 3])>,
}

impl ExpertLayer {
    /// `blk.{il}.ffn_{gate,up,down}_exps.weight` (ggml shapes `[embd, ff, n]`, `[embd, ff, n]`,
    /// `[ff, embd, n]`) and the `_shexp` matrices, if the layer has them.
    fn of(model: &GgufModel, il: usize) -> Option<ExpertLayer> {
        let t =
            |part: &str, kind: &str| model.tensor(&format!("blk.{il}.ffn_{part}_{kind}.weight"));
        let exps = [t("gate", "exps")?, t("up", "exps")?, t("down", "exps")?];
        let n_expert = exps[0].info.shape.get(2).copied().unwrap_or(1).max(1);
        let shexp = [t("gate", "shexp"), t("up", "shexp"), t("down", "shexp")];
        let shared = match shexp {
            [Some(g), Some(u), Some(d)] => Some((
                g.info.size_bytes + u.info.size_bytes + d.info.size_bytes,
                [
                    g.info.ggml_type.name(),
                    u.info.ggml_type.name(),
                    d.info.ggml_type.name(),
                ],
            )),
            _ => None,
        };
        Some(ExpertLayer {
            n_expert,
            n_ff_exp: exps[0].info.shape.get(1).copied().unwrap_or(0),
            types: exps.each_ref().map(|e| e.info.ggml_type.name()),
            per_expert: exps.iter().map(|e| e.info.size_bytes).sum::<u64>() / n_expert,
            shared,
        })
    }
}

/// For MoE files: the expert layout per layer (runs of identical layers on one line) and the
/// split of tensor bytes between routed experts and everything else ("dense": attention,
/// norms, router, shared expert, embeddings), plus the bytes one token reads. Prints nothing
/// for a dense model.
fn print_experts(model: &GgufModel, out: &mut dyn Write) -> anyhow::Result<()> {
    let n_layer = crate::bench::roofline::trunk_layers(model);
    let n_mtp = model.arch_u64("block_count").unwrap_or(0) as usize - n_layer;
    let layers: Vec<(usize, ExpertLayer)> = (0..n_layer)
        .filter_map(|il| ExpertLayer::of(model, il).map(|e| (il, e)))
        .collect();
    if layers.is_empty() {
        return Ok(());
    }
    let key = |k: &str| model.arch_u64(k);
    let used = key("expert_used_count");
    let show = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
    writeln!(
        out,
        "\nexperts: {} of {n_layer} layers routed{}, {} experts per layer, {} used per token, expert FFN width {}, shared expert FFN width {}",
        layers.len(),
        match n_mtp {
            0 => String::new(),
            n => format!(" (+ {n} MTP draft layer{})", if n > 1 { "s" } else { "" }),
        },
        show(key("expert_count")),
        show(used),
        show(key("expert_feed_forward_length")),
        key("expert_shared_feed_forward_length").map_or("none".to_string(), |v| v.to_string()),
    )?;
    writeln!(
        out,
        "  {:8}  {:>7}  {:>6}  {:6}  {:6}  {:6}  {:>12}  {:>14}  shared (bytes, gate/up/down)",
        "layers", "experts", "ff", "gate", "up", "down", "bytes/expert", "bytes/layer"
    )?;
    let mut i = 0;
    while i < layers.len() {
        let (first, e) = &layers[i];
        let mut j = i;
        while j + 1 < layers.len() && layers[j + 1].1 == *e && layers[j + 1].0 == layers[j].0 + 1 {
            j += 1;
        }
        let range = match layers[j].0 {
            last if last == *first => first.to_string(),
            last => format!("{first}-{last}"),
        };
        let shared = e
            .shared
            .map_or("-".to_string(), |(b, ty)| format!("{b}, {}", ty.join("/")));
        writeln!(
            out,
            "  {range:8}  {:>7}  {:>6}  {:6}  {:6}  {:6}  {:>12}  {:>14}  {shared}",
            e.n_expert,
            e.n_ff_exp,
            e.types[0],
            e.types[1],
            e.types[2],
            e.per_expert,
            e.per_expert * e.n_expert
        )?;
        i = j + 1;
    }
    let is_mtp =
        |name: &str| crate::bench::roofline::layer_of(name).is_some_and(|il| il >= n_layer);
    let mtp_bytes: u64 = (model.tensors().filter(|t| is_mtp(&t.info.name)))
        .map(|t| t.info.size_bytes)
        .sum();
    let total: u64 = model.tensors().map(|t| t.info.size_bytes).sum::<u64>() - mtp_bytes;
    let experts: u64 = layers.iter().map(|(_, e)| e.per_expert * e.n_expert).sum();
    let dense = total - experts;
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    writeln!(
        out,
        "  routed expert bytes: {experts} ({:.3} GiB, {:.1}% of tensor bytes); dense bytes: {dense} ({:.3} GiB)",
        gib(experts),
        100.0 * experts as f64 / total.max(1) as f64,
        gib(dense)
    )?;
    if n_mtp > 0 {
        writeln!(
            out,
            "  MTP draft layer bytes: {mtp_bytes} ({:.3} GiB; not in the totals here, read only when drafting)",
            gib(mtp_bytes)
        )?;
    }
    let ple = crate::bench::roofline::ple_table(model);
    if let Some(p) = ple {
        writeln!(
            out,
            "  PLE n-gram table: {} rows x {}, {} bytes a row, {} bytes ({:.3} GiB, {:.1}% of tensor bytes, counted in dense); {} rows a token",
            p.rows,
            p.row_len,
            p.row_bytes,
            p.bytes,
            gib(p.bytes),
            100.0 * p.bytes as f64 / total.max(1) as f64,
            p.heads
        )?;
    }
    if let Some(used) = used {
        let active = crate::bench::roofline::bytes_per_token(model);
        if let Some(p) = ple {
            let rows = p.heads * p.row_bytes;
            let routed: u64 = layers
                .iter()
                .map(|(_, e)| e.per_expert * used.min(e.n_expert))
                .sum();
            writeln!(
                out,
                "  bytes read per token: dense {} + {used} experts per layer {routed} + {} PLE rows {rows} = {active}",
                active - routed - rows,
                p.heads
            )?;
        }
        writeln!(
            out,
            "  bytes read per token (one embedding row unless it is the LM head, + {used} experts per layer): {active} ({:.3} GiB)",
            gib(active)
        )?;
    }
    Ok(())
}

/// One line naming the file; I/O and split errors already name it.
fn with_path(path: &Path, e: GgufError) -> anyhow::Error {
    match e {
        GgufError::Io { .. } | GgufError::InPart { .. } | GgufError::Split { .. } => anyhow!("{e}"),
        e => anyhow!("{}: {e}", path.display()),
    }
}

fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => show_string(s),
        Value::Array(a) => show_array(a),
        Value::F32(x) => format!("{x:?}"),
        Value::F64(x) => format!("{x:?}"),
        Value::Bool(b) => b.to_string(),
        v => match v.as_integer() {
            Some(n) => format!("{n} ({})", v.value_type()),
            None => format!("{v:?}"),
        },
    }
}

fn show_string(s: &str) -> String {
    let n = s.chars().count();
    if n <= STRING_PREVIEW {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(STRING_PREVIEW).collect();
        format!("{head:?}… ({n} chars)")
    }
}

fn show_array(a: &Array) -> String {
    let items: Vec<String> = (0..a.len().min(ARRAY_PREVIEW))
        .filter_map(|i| a.get(i))
        .map(|v| match v {
            Value::Array(inner) => format!("[{}; {}]", inner.elem_type(), inner.len()),
            // The element type is already in the array's header.
            v => match v.as_integer() {
                Some(n) => n.to_string(),
                None => show_value(&v),
            },
        })
        .collect();
    let more = if a.len() > ARRAY_PREVIEW { ", …" } else { "" };
    format!(
        "[{}; {}] [{}{more}]",
        a.elem_type(),
        a.len(),
        items.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_gguf::{GgmlType, GgufWriter};

    #[test]
    fn prints_metadata_tensors_and_summary() {
        let dir = std::env::temp_dir().join(format!("strata-inspect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tiny.gguf");
        let mut w = GgufWriter::new();
        w.set("general.architecture", "llama");
        w.set("llama.block_count", 2u32);
        w.set("general.file_type", 15u32);
        let vocab: Vec<String> = (0..1000).map(|i| format!("tok{i}")).collect();
        w.set("tokenizer.ggml.tokens", vocab);
        w.add_tensor("output_norm.weight", GgmlType::F32, &[8], &[0; 32])
            .unwrap();
        w.add_tensor("blk.0.ffn_down.weight", GgmlType::Q8_0, &[32, 4], &[0; 136])
            .unwrap();
        w.write_to_path(&path).unwrap();

        let mut out = Vec::new();
        run(&path, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        for want in [
            "version 3, alignment 32",
            "general.architecture  = \"llama\"",
            "llama.block_count     = 2 (u32)",
            "[string; 1000] [\"tok0\", \"tok1\"",
            "blk.0.ffn_down.weight  Q8_0     [32, 4]",
            "all          2 tensors             168 bytes",
            "Q8_0         1 tensors",
            "general.file_type     = 15 (u32) (Q4_K_M)",
            "file type       Q4_K_M",
            "chat template   no",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        // The summary comes before the metadata and the tensor table.
        let at = |s: &str| text.find(s).unwrap();
        assert!(at("summary:") < at("metadata (") && at("metadata (") < at("tensors (2)"));
        assert!(!text.contains("tok9\""), "long arrays are abbreviated");
    }

    #[test]
    fn errors_name_the_file_once() {
        let e = run(Path::new("/nonexistent/m.gguf"), &mut Vec::new()).unwrap_err();
        assert_eq!(
            e.to_string().matches("/nonexistent/m.gguf").count(),
            1,
            "{e}"
        );
    }
}
