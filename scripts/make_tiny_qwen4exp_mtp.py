"""The MTP layer of a tiny qwen4exp checkpoint as GGUF tensors (used by make_tiny_qwen4exp.py).

llama.cpp's converter drops `mtp.*` (conversion/qwen4exp.py: no_mtp) and the vendored qwen4exp
graph has no MTP, so this writes the layout that upstream llama.cpp's qwen4exp MTP uses:
block_count = n_layer + 1, `qwen4exp.nextn_predict_layers` = 1, per-layer arrays with one more
entry, and the MTP layer as `blk.<n_layer>.*`:
  - the decoder layer's tensors under the trunk names (hc_attn_*, attn_*, indexer.*, hc_ffn_*,
    ffn_*), converted by convert_hf_to_gguf.py itself: the layer is appended to a temporary copy
    of the checkpoint as layer n_layer, a "full_attention" (QSA) layer without PLE;
  - nextn.eh_proj  [2*n_embd, n_embd]: [fc_embedding | fc_hidden], embedding half first;
  - nextn.enorm    [n_embd]:          pre_fc_norm_embedding, folded to (1 + w);
  - nextn.hnorm    [n_embd*hc]:       pre_fc_norm_hidden, folded to (1 + w), one norm over the
                                      whole hc-wide row;
  - nextn.hc_head_{norm,down,up}:     the MTP's own final mixer (converted as the trunk's
                                      output_hc_* are).
Only F32 is written here; other types come from llama.cpp's quantizer.
"""
import json, pathlib, shutil, sys, tempfile

import numpy as np


def _gguf():
    import make_tiny_models as mtm
    sys.path.insert(0, str(mtm.LLAMA_CPP / "gguf-py"))
    import gguf
    return gguf


def _with_mtp_as_last_layer(hf, dst):
    """A copy of the checkpoint whose layer n_layer is the MTP decoder layer and whose final
    mixer is the MTP's, so the converter names and folds them as it does the trunk's."""
    from safetensors.numpy import load_file, save_file
    cfg = json.loads((hf / "config.json").read_text())
    n = cfg["num_hidden_layers"]
    cfg["num_hidden_layers"] = n + 1
    cfg["layer_types"] = cfg["layer_types"] + ["full_attention"]
    dst.mkdir(parents=True)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(hf / f, dst / f)
    st = load_file(str(hf / "model.safetensors"))
    mtp = load_file(str(hf / "mtp.safetensors"))
    for k, v in mtp.items():
        if k.startswith("mtp.layers.0."):
            st[f"model.layers.{n}." + k[len("mtp.layers.0."):]] = v
        elif k.startswith("mtp.hyper_connection_mixer."):
            st["model." + k[len("mtp."):]] = v
    save_file(st, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return n, mtp


def _copy_kv(reader, writer, gguf, replace):
    for key, f in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key in replace:
            continue
        vtype = gguf.GGUFValueType(f.types[0])
        sub = gguf.GGUFValueType(f.types[-1]) if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, f.contents(), vtype, sub_type=sub)


def write_mtp_gguf(hf, trunk_gguf, out, convert_python):
    import make_tiny_qwen4exp as q
    gguf = _gguf()
    with tempfile.TemporaryDirectory() as t:
        t = pathlib.Path(t)
        n, mtp = _with_mtp_as_last_layer(hf, t / "hf")
        q.convert(t / "hf", t / "all.gguf", "F32", convert_python)
        full = gguf.GGUFReader(str(t / "all.gguf"))
        trunk = gguf.GGUFReader(str(trunk_gguf))
        w = gguf.GGUFWriter(str(out), "qwen4exp")
        arch = "qwen4exp"
        per_layer = [f"{arch}.attention.compress_ratios", f"{arch}.attention.recurrent_layers"]
        _copy_kv(trunk, w, gguf, {f"{arch}.block_count", "general.name", *per_layer})
        w.add_name(out.stem)
        w.add_block_count(n + 1)
        w.add_nextn_predict_layers(1)
        for key in per_layer:
            f = full.fields[key]
            w.add_key_value(key, f.contents(), gguf.GGUFValueType.ARRAY,
                            sub_type=gguf.GGUFValueType(f.types[-1]))
        for tn in trunk.tensors:
            w.add_tensor(tn.name, np.array(tn.data))
        for tn in full.tensors:
            if tn.name.startswith(f"blk.{n}."):
                w.add_tensor(tn.name, np.array(tn.data))
            elif tn.name.startswith("output_hc_"):
                w.add_tensor(f"blk.{n}.nextn.hc_head_" + tn.name[len("output_hc_"):], np.array(tn.data))
        eh = np.concatenate([mtp["mtp.fc_embedding.weight"], mtp["mtp.fc_hidden.weight"]], axis=1)
        w.add_tensor(f"blk.{n}.nextn.eh_proj.weight", np.ascontiguousarray(eh, dtype=np.float32))
        w.add_tensor(f"blk.{n}.nextn.enorm.weight", mtp["mtp.pre_fc_norm_embedding.weight"] + 1)
        w.add_tensor(f"blk.{n}.nextn.hnorm.weight", mtp["mtp.pre_fc_norm_hidden.weight"] + 1)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
