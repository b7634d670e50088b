#!/usr/bin/env python3
"""Tiny random qwen4exp (Qwen3.8-Flash-Next) checkpoints, their GGUFs and transformers reference
logits, for the engine's reference tests. docs/qwen4exp.md describes the architecture.

For each variant in VARIANTS this builds, under OUT/<name>/ (default ~/.cache/strata/tiny):
  hf/                          transformers 5.23 Qwen4ExpForCausalLM checkpoint (safetensors, the
                               tiny byte-level BPE tokenizer of make_tiny_models.py) plus the
                               `mtp.*` tensors of one MTP layer, which transformers does not model;
  <name>-{F32,F16,BF16,Q8_0}.gguf     llama.cpp's convert_hf_to_gguf.py (it drops `mtp.*`);
  <name>-{Q4_K_M,IQ3_XXS}.gguf        llama.cpp's quantizer, from the F32 file;
  <name>-mtp-{F32,Q8_0}.gguf           the trunk plus the MTP layer as `blk.<n_layer>.*` and
                                       `blk.<n_layer>.nextn.*` (layout of upstream llama.cpp's
                                       qwen4exp MTP; the vendored llama.cpp cannot load it);
  ref/                          transformers float32 reference logits (see ref/README.md).
A stamp holds this script's sha256; an up-to-date variant is not rebuilt.

Weights come from make_tiny_models.py's counter-based hash (not torch's RNG), so every machine
gets the same files. Python: run under a venv with transformers==5.23.0 (the modelling code);
conversion runs under --convert-python, whose transformers must NOT be 5.x: 5.23's config class
rewrites layer_types "full_attention" -> "indexed_attention" and the converter then writes
compress ratio 0 (no QSA). scripts/make_tiny_qwen4exp.sh sets all of this up.
"""
import argparse, hashlib, json, math, os, pathlib, shutil, subprocess, sys, tempfile, time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_tiny_models as mtm  # noqa: E402  (tokenizer, hash init, convert snippet)

EOS = mtm.N_BASE  # <|endoftext|>
CONVERTED = ["F32", "F16", "BF16", "Q8_0"]
QUANTIZED = {"Q4_K_M": 15, "IQ3_XXS": 23}  # llama_ftype values
IMATRIX_FTYPES = {23}
MTP_TYPES = {"F32": None, "Q8_0": 7}

# One tiny shape for every variant: 4 layers (3 Gated DeltaNet + 1 gated attention), 4
# hyper-connection streams, 8 experts top-2 + shared expert, k != v heads in the DeltaNet (the
# converter reorders V heads), partial RoPE (32 of 64 dims, interleaved M-RoPE sections 6/5/5).
BASE = dict(
    vocab_size=mtm.N_VOCAB, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, head_dim=64, hidden_act="silu", max_position_embeddings=4096,
    rms_norm_eps=1e-6, tie_word_embeddings=False,
    rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.5,
                         mrope_section=[6, 5, 5], mrope_interleaved=True),
    linear_conv_kernel_dim=4, linear_key_head_dim=32, linear_value_head_dim=32,
    linear_num_key_heads=2, linear_num_value_heads=4,
    moe_intermediate_size=128, shared_expert_intermediate_size=128, num_experts=8,
    num_experts_per_tok=2, norm_topk_prob=True,
    layer_types=["linear_attention"] * 3 + ["indexed_attention"],
    hc_count=4, hc_lowrank=32,
    # QSA: 2 indexer heads of 32, blocks of 4 tokens, a budget of 16 tokens (4 blocks).
    indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=32, indexer_budget=16,
    indexer_compress_ratio=4,
    # PLE on layer 1 (0-based): 2- and 3-grams, 2 hashed heads each, 64-wide rows. ple_embed_dim
    # stays hidden_size (the default, as in the real model): llama.cpp assumes it.
    ple_layer_ids=[2], ple_embed_dim=256, ple_conv_kernel_size=4, ngram_size=3, heads_per_ngram=2,
    ngram_vocab_size_base=1000, make_ngram_vocab_size_divisible_by=128, seed=1234,
    split_ngram_parts=2,
    # The real model's DeltaNet output gate is a sigmoid; unset, transformers uses hidden_act
    # (silu), while llama.cpp always applies a sigmoid (there is no GGUF key for it).
    output_gate_type="sigmoid",
    bos_token_id=None, eos_token_id=EOS, pad_token_id=None,
)
VARIANTS = {
    # PLE + QSA (the real model's feature set).
    "qwen4exp-tiny": dict(BASE),
    # No PLE: no ple.* keys or tensors in the GGUF.
    "qwen4exp-tiny-nople": dict(BASE, ple_layer_ids=[]),
    # No QSA: transformers always builds the indexer, so its budget covers every prompt (dense
    # attention) and config.json keeps "indexed_attention", which the converter writes as
    # compress ratio 0 (llama.cpp's dense path). The indexer tensors are still in the file.
    "qwen4exp-tiny-noidx": dict(BASE, indexer_budget=4096),
}


def prompts():
    """Three token-id prompts: short; one with an EOS at 9 (the PLE window resets); one of 64
    tokens, well past the indexer budget (16 tokens + a 3-token tail), with an EOS at 40."""
    ids = lambda key, n: [int(x) for x in (mtm.uniform(key, n, 0, EOS - 1e-3)).astype(np.int64)]
    p0 = ids("qwen4exp-p0", 7)
    p1 = ids("qwen4exp-p1", 20)
    p1[9] = EOS
    p2 = ids("qwen4exp-p2", 64)
    p2[40] = EOS
    return [p0, p1, p2]


def init_state(model):
    """Deterministic values for every floating parameter; integer buffers (PLE hash constants)
    keep their computed values."""
    import torch
    state = {}
    for k, v in model.state_dict().items():
        if not v.is_floating_point():
            state[k] = v
            continue
        vals = mtm.init_values(k, tuple(v.shape), zero_centered_norms=True)
        state[k] = torch.from_numpy(vals.reshape(tuple(v.shape)))
    return state


def text_config(spec):
    from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig
    cfg = Qwen4ExpTextConfig(**spec)
    cfg.architectures = ["Qwen4ExpForCausalLM"]
    return cfg


def mtp_modules(cfg):
    """The MTP layer as the vLLM / SGLang qwen4_exp MTP models define it, built from transformers'
    own Qwen4Exp modules: pre_fc_norm_embedding [H], pre_fc_norm_hidden [hc*H] (one RMS over the
    whole hc-wide row), fc_embedding / fc_hidden [H, H], one full-attention (QSA) decoder layer
    without PLE, and its own final hyper-connection mixer."""
    import copy
    import torch
    from transformers.models.qwen4_exp import modeling_qwen4_exp as m
    mc = copy.deepcopy(cfg)
    mc.layer_types = ["indexed_attention"]
    mc.num_hidden_layers = 1
    mc.ple_layer_ids = []
    H = cfg.hidden_size
    mods = torch.nn.ModuleDict(dict(
        pre_fc_norm_embedding=m.Qwen4ExpTextRMSNorm(H, eps=cfg.rms_norm_eps),
        pre_fc_norm_hidden=m.Qwen4ExpTextRMSNorm(H * cfg.hc_count, eps=cfg.rms_norm_eps),
        fc_embedding=torch.nn.Linear(H, H, bias=False),
        fc_hidden=torch.nn.Linear(H, H, bias=False),
        layers=torch.nn.ModuleList([m.Qwen4ExpTextDecoderLayer(mc, 0)]),
        hyper_connection_mixer=m.Qwen4ExpTextGatedResidual(mc, use_combine=False),
    ))
    return mods, mc


def mtp_to_checkpoint(sd):
    """transformers' fused expert tensors -> the checkpoint's per-expert `mtp.*` names (the
    layout save_pretrained writes for the trunk and the converter reads)."""
    st = {}
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            base, inter = k[: -len("gate_up_proj")], v.shape[1] // 2
            for e in range(v.shape[0]):
                st[f"mtp.{base}{e}.gate_proj.weight"] = v[e, :inter].contiguous()
                st[f"mtp.{base}{e}.up_proj.weight"] = v[e, inter:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            base = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                st[f"mtp.{base}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            st[f"mtp.{k}"] = v.contiguous()
    return st


def mtp_from_checkpoint(st, n_experts):
    import torch
    sd = {k[len("mtp."):]: v for k, v in st.items() if ".mlp.experts." not in k}
    base = "layers.0.mlp.experts."
    g = [st[f"mtp.{base}{e}.gate_proj.weight"] for e in range(n_experts)]
    u = [st[f"mtp.{base}{e}.up_proj.weight"] for e in range(n_experts)]
    sd[base + "gate_up_proj"] = torch.stack([torch.cat([a, b]) for a, b in zip(g, u)])
    sd[base + "down_proj"] = torch.stack([st[f"mtp.{base}{e}.down_proj.weight"] for e in range(n_experts)])
    return sd


def build_hf(spec, dst):
    import torch
    from safetensors.torch import save_file
    from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpForCausalLM
    torch.manual_seed(0)  # module construction only; every value is overwritten
    cfg = text_config(spec)
    model = Qwen4ExpForCausalLM(cfg).to(torch.float32)
    model.load_state_dict(init_state(model), strict=True)
    dst.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dst, safe_serialization=True)
    mtm.write_tokenizer(dst)
    # The real checkpoint names QSA layers "full_attention"; transformers 5.23 renames them on
    # load and saves its own name, which the converter reads as "no indexer".
    if spec["indexer_budget"] < 4096:
        p = dst / "config.json"
        c = json.loads(p.read_text())
        c["layer_types"] = ["full_attention" if t == "indexed_attention" else t for t in c["layer_types"]]
        p.write_text(json.dumps(c, indent=2) + "\n")
    mtp, _ = mtp_modules(cfg)
    vals = {k: torch.from_numpy(mtm.init_values(f"mtp.{k}", tuple(v.shape), True)
                                .reshape(tuple(v.shape))) for k, v in mtp.state_dict().items()}
    save_file(mtp_to_checkpoint(vals), str(dst / "mtp.safetensors"), metadata={"format": "pt"})


def load_hf(hf):
    import torch
    from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpForCausalLM
    model = Qwen4ExpForCausalLM.from_pretrained(hf, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    from safetensors.torch import load_file
    mtp, _ = mtp_modules(model.config)
    sd = mtp_from_checkpoint(load_file(str(hf / "mtp.safetensors")), model.config.num_experts)
    mtp.load_state_dict(sd, strict=True)
    mtp.eval()
    return model, mtp


def mtp_draft_logits(model, mtp, tokens, hidden):
    """Draft logits of the MTP layer for positions 0..T-2: row p takes the trunk's last
    hyper-connection residual h_p ([hc*H], before the final mixer) and token x_{p+1} at position
    p (vLLM's convention: the hidden's position), and predicts x_{p+2}. The layer attends
    causally over its own K/V of rows 0..p."""
    import torch
    from transformers.masking_utils import create_causal_mask
    cfg = model.config
    hc, H = cfg.hc_count, cfg.hidden_size
    T = len(tokens) - 1
    ids = torch.tensor([tokens[1:]])
    e = mtp.fc_embedding(mtp.pre_fc_norm_embedding(model.model.embed_tokens(ids)))  # [1,T,H]
    h = mtp.pre_fc_norm_hidden(hidden[:, :T]).unflatten(-1, (hc, H))
    x = (e.unsqueeze(-2) + mtp.fc_hidden(h)).flatten(-2)  # [1,T,hc*H]
    pos = torch.arange(T).view(1, 1, -1).expand(3, 1, -1)
    cos_sin = model.model.rotary_emb(x, pos)
    _, mc = mtp_modules(cfg)
    mc._attn_implementation = "eager"
    mask = create_causal_mask(config=mc, inputs_embeds=e, attention_mask=None, past_key_values=None,
                              position_ids=torch.arange(T).view(1, -1), allow_is_causal_skip=False)
    layer = mtp.layers[0]
    layer.self_attn.config._attn_implementation = "eager"
    x = layer(x, position_embeddings=cos_sin, attention_mask=mask, conv_mask=None,
              past_key_values=None, ple_input_ids=None)
    return model.lm_head(mtp.hyper_connection_mixer(x))[0]


def write_refs(hf, dst):
    """Reference logits from transformers (float32, eager attention, no cache)."""
    import torch
    model, mtp = load_hf(hf)
    dst.mkdir(parents=True, exist_ok=True)
    captured = {}
    hook = model.model.hyper_connection_mixer.register_forward_hook(
        lambda mod, inp, out: captured.__setitem__("h", inp[0]))
    summary = []
    with torch.no_grad():
        for i, toks in enumerate(prompts()):
            out = model(torch.tensor([toks]), use_cache=False)
            logits = out.logits[0].float().numpy()
            np.save(dst / f"prompt{i}.tokens.npy", np.array(toks, dtype=np.int32))
            np.save(dst / f"prompt{i}.logits.npy", logits.astype(np.float32))
            mtp_l = mtp_draft_logits(model, mtp, toks, captured["h"]).float().numpy()
            np.save(dst / f"prompt{i}.mtp_logits.npy", mtp_l.astype(np.float32))
            seq = list(toks)
            for _ in range(16):  # greedy by full re-forward: no cache path involved
                nxt = int(model(torch.tensor([seq]), use_cache=False).logits[0, -1].argmax())
                seq.append(nxt)
            np.save(dst / f"prompt{i}.greedy16.npy", np.array(seq[len(toks):], dtype=np.int32))
            top2 = np.sort(logits, axis=-1)[:, -2:]
            summary.append(dict(prompt=i, n_tokens=len(toks), max_abs=float(np.abs(logits).max()),
                                min_top2_margin=float((top2[:, 1] - top2[:, 0]).min())))
    hook.remove()
    (dst / "README.md").write_text(REF_README)
    (dst / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


REF_README = """# transformers reference outputs (float32)

numpy .npy files (little-endian; `np.load`, or a 128-byte-aligned header then raw data):
- `promptI.tokens.npy`     int32 [T]      the prompt's token ids (EOS = 765);
- `promptI.logits.npy`     float32 [T, V] logits of every position (row p predicts token p+1);
- `promptI.greedy16.npy`   int32 [16]     greedy continuation (argmax, full re-forward per step);
- `promptI.mtp_logits.npy` float32 [T-1, V] MTP draft logits: row p takes the trunk's last
  hyper-connection residual at p (before the final mixer) and token p+1 at position p, and
  predicts token p+2 (formula in docs/qwen4exp.md, "MTP layer").
prompt0: 7 tokens; prompt1: 20 tokens with an EOS at 9; prompt2: 64 tokens with an EOS at 40,
longer than the indexer budget (16 tokens + tail), so QSA really drops blocks.
`summary.json`: per prompt, max |logit| and the smallest top-2 margin.
"""


def convert(hf, out, outtype, convert_python):
    args = [str(hf), "--outfile", str(out), "--outtype", outtype.lower(), "--model-name", out.stem]
    code = mtm.CONVERT.format(src=str(mtm.LLAMA_CPP), args=args)
    r = subprocess.run([convert_python, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"convert_hf_to_gguf.py {' '.join(args)} failed:\n{r.stderr[-4000:]}")


QUANTIZE = """
import ctypes, sys
sys.path.insert(0, {gguf_py!r})
import gguf, llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = {ftype}; p.nthread = 1
keep = []
if {uniform_imatrix!r}:
    # A uniform importance matrix (every column weighs 1): the i-quants refuse to run without
    # one, and the tiny tests need a valid file, not the best rounding.
    ents = []
    for t in gguf.GGUFReader({src!r}).tensors:
        if len(t.shape) >= 2:
            n = int(t.shape[0]) * (int(t.shape[2]) if len(t.shape) == 3 else 1)
            buf = (ctypes.c_float * n)(*([1.0] * n))
            keep.append(buf)
            ents.append((t.name.encode(), buf, n))
    arr = (llama_cpp.llama_model_imatrix_data * (len(ents) + 1))()
    for i, (name, buf, n) in enumerate(ents):
        arr[i].name = name; arr[i].data = ctypes.cast(buf, ctypes.POINTER(ctypes.c_float)); arr[i].size = n
    p.imatrix = ctypes.cast(arr, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
rc = llama_cpp.llama_model_quantize({src!r}.encode(), {dst!r}.encode(), ctypes.byref(p))
sys.exit(rc)
"""


def quantize(src, dst, ftype, quant_python):
    code = QUANTIZE.format(gguf_py=str(mtm.LLAMA_CPP / "gguf-py"), ftype=ftype, src=str(src),
                           dst=str(dst), uniform_imatrix=ftype in IMATRIX_FTYPES)
    r = subprocess.run([quant_python, "-c", code], capture_output=True, text=True)
    if r.returncode != 0 or not dst.exists():
        sys.exit(f"quantize {src.name} -> {dst.name} failed:\n{r.stderr[-3000:]}")


def build(name, spec, out_dir, a, stamp):
    d = out_dir / name
    if (d / "stamp").exists() and (d / "stamp").read_text() == stamp:
        print(f"{name}: up to date in {d}", file=sys.stderr)
        return
    t0 = time.time()
    tmp = out_dir / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    build_hf(spec, tmp / "hf")
    write_refs(tmp / "hf", tmp / "ref")
    t1 = time.time()
    for t in CONVERTED:
        convert(tmp / "hf", tmp / f"{name}-{t}.gguf", t, a.convert_python)
    t2 = time.time()
    for t, ftype in QUANTIZED.items():
        quantize(tmp / f"{name}-F32.gguf", tmp / f"{name}-{t}.gguf", ftype, a.quant_python)
    t3 = time.time()
    import make_tiny_qwen4exp_mtp as mtpgguf
    mtpgguf.write_mtp_gguf(tmp / "hf", tmp / f"{name}-F32.gguf", tmp / f"{name}-mtp-F32.gguf",
                           a.convert_python)
    for t, ftype in MTP_TYPES.items():
        if ftype is not None:
            quantize(tmp / f"{name}-mtp-F32.gguf", tmp / f"{name}-mtp-{t}.gguf", ftype, a.quant_python)
    t4 = time.time()
    sums = {p.name: mtm.sha256(p) for p in sorted(tmp.glob("*.gguf"))}
    (tmp / "sha256.json").write_text(json.dumps(sums, indent=1) + "\n")
    (tmp / "timings.json").write_text(json.dumps(dict(
        hf_and_refs_s=round(t1 - t0, 1), convert_s=round(t2 - t1, 1), quantize_s=round(t3 - t2, 1),
        mtp_s=round(t4 - t3, 1)), indent=1) + "\n")
    (tmp / "stamp").write_text(stamp)
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    print(f"{name}: built in {d} ({time.time() - t0:.0f} s)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/strata/tiny"))
    ap.add_argument("--convert-python", required=True,
                    help="interpreter for convert_hf_to_gguf.py: torch + transformers 4.x")
    ap.add_argument("--quant-python", default="python3", help="interpreter with llama_cpp")
    ap.add_argument("--only", help="build just this variant")
    a = ap.parse_args()
    h = hashlib.sha256()
    for f in ("make_tiny_qwen4exp.py", "make_tiny_qwen4exp_mtp.py", "make_tiny_models.py"):
        h.update((HERE / f).read_bytes())
    stamp = h.hexdigest()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, spec in VARIANTS.items():
        if a.only and name != a.only:
            continue
        build(name, spec, out, a, stamp)


if __name__ == "__main__":
    main()
