#!/usr/bin/env python3
"""Tiny random checkpoints and their GGUFs, bit-identical on every machine: the MoE
architectures qwen3moe and qwen3next, and the dense qwen3, qwen2, llama and gemma3 (text-only).

For each model in SPECS this builds, under OUT/<name>/ (default ~/.cache/strata/tiny):
  hf/                      a Hugging Face checkpoint (transformers' Qwen3Moe / Qwen3Next / Qwen3 /
                           Qwen2 / Llama / Gemma3ForCausalLM classes, safetensors, a real
                           byte-level BPE tokenizer);
  <name>-{F32,F16,BF16,Q8_0}.gguf  by llama.cpp's convert_hf_to_gguf.py (`--no-mtp` for qwen3next);
  <name>-{Q4_0,Q4_K_M,Q6_K}.gguf   quantized from the F32 file by llama.cpp (the dense models:
                                   Q4_K_M only).
A stamp file holds this script's sha256; a model whose stamp matches is not rebuilt.

Weights do not come from torch's RNG (whose streams may change between versions) but from a
counter-based hash (splitmix64 of sha256(tensor name) + index) whose 24-bit outputs map exactly to
f32, so the same file appears on every machine; `--check` rebuilds into a temporary folder and
compares sha256s.

Tokenizer: the first N_BASE (765) tokens (256 bytes + the earliest merges) of the Qwen2 vocabulary
(llama.cpp's models/ggml-vocab-qwen2.gguf) with the merges among them, plus Qwen's special tokens;
small enough that every MoE model stays under 20 MB in F32 and every dense one under 10 MB.

Usage: python3 scripts/make_tiny_models.py [--out DIR] [--check]   (scripts/make_tiny_models.sh
installs the pinned torch/transformers into a venv and runs this).
"""
import argparse, hashlib, json, os, pathlib, shutil, subprocess, sys, tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
LLAMA_CPP = pathlib.Path(os.environ.get("STRATA_LLAMA_CPP_SRC", os.path.expanduser(
    "~/.cache/strata/src/llama_cpp_python-0.3.36/vendor/llama.cpp")))
VOCAB_GGUF = pathlib.Path(os.environ.get("STRATA_LLAMA_VOCAB_DIR", os.path.expanduser(
    "~/.cache/strata/llama-vocab"))) / "ggml-vocab-qwen2.gguf"
N_BASE = 765
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
N_VOCAB = N_BASE + len(SPECIALS)
CONVERTED = ["F32", "F16", "BF16", "Q8_0"]
QUANTIZED = {"Q4_0": 2, "Q4_K_M": 15, "Q6_K": 18}  # llama_ftype values
DENSE_QUANTIZED = ["Q4_K_M"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

COMMON = dict(vocab_size=N_VOCAB, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, max_position_embeddings=4096, rms_norm_eps=1e-6,
              rope_theta=1000000.0, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128,
              norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], intermediate_size=512,
              tie_word_embeddings=False, hidden_act="silu", bos_token_id=None,
              eos_token_id=N_BASE, torch_dtype="float32")
SPECS = {
    "qwen3moe-tiny": dict(COMMON, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe"),
    "qwen3next-tiny": dict(
        COMMON, architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next",
        full_attention_interval=4, partial_rotary_factor=0.25, linear_conv_kernel_dim=4,
        linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=2,
        linear_num_value_heads=4, shared_expert_intermediate_size=128,
        layer_types=["linear_attention"] * 3 + ["full_attention"]),
}
# Dense models: weight rows are multiples of 256 wide, so k-quants apply (gemma3-tiny's
# attn_output, 128 wide, takes llama.cpp's fallback type).
DENSE = dict(vocab_size=N_VOCAB, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, intermediate_size=256,
             max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=1000000.0,
             tie_word_embeddings=False, hidden_act="silu", bos_token_id=None,
             eos_token_id=N_BASE, torch_dtype="float32")
DENSE_SPECS = {
    # Per-head q/k RMS norms.
    "qwen3-tiny": dict(DENSE, architectures=["Qwen3ForCausalLM"], model_type="qwen3"),
    # q/k/v biases.
    "qwen2-tiny": dict(DENSE, architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                       use_sliding_window=False),
    # The GGUF conversion permutes q/k rows for llama.cpp's NORM (interleaved) RoPE.
    "llama-tiny": dict(DENSE, architectures=["LlamaForCausalLM"], model_type="llama",
                       rope_theta=10000.0, attention_bias=False, mlp_bias=False),
    # Text-only Gemma 3: 6 layers so layer 5 is global (pattern 6) and layers 0-4 windowed; a
    # window of 8 < the test prompts; zero-centred (1 + w) norms; GeGLU; head_dim (64) differs
    # from n_embd / n_head (128), and 2 heads keep it under 10 MB. Untied: with random tied
    # embeddings the √n_embd-scaled input dominates the residual and every token predicts itself
    # (logits ~50, greedy repeats one token); the tied path is covered by the real gemma3-270m.
    "gemma3-tiny": dict(DENSE, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
                        num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1,
                        sliding_window=8,
                        sliding_window_pattern=6, query_pre_attn_scalar=64,
                        rope_local_base_freq=10000.0, hidden_activation="gelu_pytorch_tanh",
                        hidden_act="gelu_pytorch_tanh", final_logit_softcapping=None,
                        attn_logit_softcapping=None, tie_word_embeddings=False,
                        pad_token_id=N_BASE),
}
SPECS.update(DENSE_SPECS)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def uniform(key, n, lo, hi):
    """n f32 values in [lo, hi) from splitmix64(seed(key) + i); platform- and version-free."""
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return (lo + (hi - lo) * u).astype(np.float32)


def init_values(name, shape, zero_centered_norms):
    """Values of one parameter: scales chosen so logits spread (top-2 margins) and routing is decisive."""
    n = int(np.prod(shape))
    fan_in = shape[-1] if len(shape) > 1 else 1
    if name.endswith("A_log"):
        return uniform(name, n, 0.0, np.log(16.0))
    if name.endswith("dt_bias"):
        return uniform(name, n, 0.5, 1.5)
    if "norm" in name:
        centred = zero_centered_norms and not name.endswith("linear_attn.norm.weight")
        lo = -0.2 if centred else 0.8
        return uniform(name, n, lo, lo + 0.4)
    if "conv1d" in name:
        std = 0.5
    elif name.endswith("embed_tokens.weight"):
        std = 1.0
    elif name == "lm_head.weight":
        std = 4.0 / np.sqrt(fan_in)
    elif name.endswith("mlp.gate.weight"):
        std = 3.0 / np.sqrt(fan_in)
    else:
        std = 1.0 / np.sqrt(fan_in)
    a = float(np.sqrt(3.0) * std)
    return uniform(name, n, -a, a)


def write_tokenizer(dst):
    """tokenizer.json (+ config) holding the first N_BASE Qwen2 tokens and their merges."""
    sys.path.insert(0, str(LLAMA_CPP / "gguf-py"))
    import gguf
    r = gguf.GGUFReader(str(VOCAB_GGUF))
    toks, merges = r.fields["tokenizer.ggml.tokens"], r.fields["tokenizer.ggml.merges"]
    vocab = {toks.contents(i): i for i in range(N_BASE)}
    kept = []
    for i in range(len(merges.data)):
        a, b = merges.contents(i).split(" ")
        if a in vocab and b in vocab and a + b in vocab:
            kept.append(f"{a} {b}")
        if len(kept) >= N_BASE - 256:
            break
    added = [{"id": N_BASE + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": kept},
    }
    (dst / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    cfg = {"tokenizer_class": "Qwen2Tokenizer", "add_bos_token": False, "add_prefix_space": False,
           "bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
           "unk_token": None, "model_max_length": 4096, "clean_up_tokenization_spaces": False,
           "errors": "replace", "split_special_tokens": False,
           "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added}}
    (dst / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1))


def build_hf(name, spec, dst):
    import torch
    import transformers
    torch.manual_seed(0)  # only module construction; every value is overwritten below
    cfg_cls = transformers.CONFIG_MAPPING[spec["model_type"]]
    cfg = cfg_cls(**{k: v for k, v in spec.items() if k not in ("model_type", "architectures")})
    cfg.architectures = spec["architectures"]
    model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
    zero_centered = spec["model_type"] in ("qwen3_next", "gemma3_text")
    state = {k: torch.from_numpy(init_values(k, tuple(v.shape), zero_centered).reshape(tuple(v.shape)))
             for k, v in model.state_dict().items()}
    model.load_state_dict(state, strict=True)
    dst.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dst, safe_serialization=True)
    write_tokenizer(dst)


CONVERT = """
import sys
sys.path.insert(0, {src!r}); sys.path.insert(0, {src!r} + '/gguf-py')
sys.argv = ['convert_hf_to_gguf.py'] + {args!r}
import conversion.base as base
# The truncated vocabulary hashes differently from Qwen2's; its pre-tokenizer is Qwen2's.
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: 'qwen2'
import convert_hf_to_gguf
convert_hf_to_gguf.main()
"""


def convert(hf, out, outtype, no_mtp):
    args = [str(hf), "--outfile", str(out), "--outtype", outtype.lower(), "--model-name", out.stem]
    if no_mtp:
        args.append("--no-mtp")
    code = CONVERT.format(src=str(LLAMA_CPP), args=args)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"convert_hf_to_gguf.py {' '.join(args)} failed:\n{r.stderr[-4000:]}")


def quantize(src, dst, ftype, quant_python):
    exe = shutil.which("llama-quantize")
    if exe:
        name = next(k for k, v in QUANTIZED.items() if v == ftype)
        subprocess.run([exe, str(src), str(dst), name, "1"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return
    code = (
        "import ctypes, sys, llama_cpp\n"
        "p = llama_cpp.llama_model_quantize_default_params()\n"
        f"p.ftype = {ftype}; p.nthread = 1\n"
        f"rc = llama_cpp.llama_model_quantize({str(src).encode()!r}, {str(dst).encode()!r}, ctypes.byref(p))\n"
        "sys.exit(rc)\n")
    subprocess.run([quant_python, "-c", code], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def build(name, spec, out_dir, quant_python, stamp):
    d = out_dir / name
    if (d / "stamp").exists() and (d / "stamp").read_text() == stamp:
        print(f"{name}: up to date in {d}", file=sys.stderr)
        return
    tmp = out_dir / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    build_hf(name, spec, tmp / "hf")
    no_mtp = spec["model_type"] == "qwen3_next"
    for t in CONVERTED:
        convert(tmp / "hf", tmp / f"{name}-{t}.gguf", t, no_mtp)
    for t, ftype in QUANTIZED.items():
        if name in DENSE_SPECS and t not in DENSE_QUANTIZED:
            continue
        quantize(tmp / f"{name}-F32.gguf", tmp / f"{name}-{t}.gguf", ftype, quant_python)
    sums = {p.name: sha256(p) for p in sorted(tmp.glob("*.gguf"))}
    (tmp / "sha256.json").write_text(json.dumps(sums, indent=1) + "\n")
    (tmp / "stamp").write_text(stamp)
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    print(f"{name}: built in {d}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/strata/tiny"))
    ap.add_argument("--quant-python", default="python3",
                    help="interpreter with llama_cpp (used when llama-quantize is not on PATH)")
    ap.add_argument("--check", action="store_true", help="rebuild in a temp dir and compare sha256s")
    a = ap.parse_args()
    stamp = sha256(__file__)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, spec in SPECS.items():
        build(name, spec, out, a.quant_python, stamp)
    if a.check:
        with tempfile.TemporaryDirectory() as t:
            for name, spec in SPECS.items():
                build(name, spec, pathlib.Path(t), a.quant_python, stamp)
                want = (out / name / "sha256.json").read_text()
                got = (pathlib.Path(t) / name / "sha256.json").read_text()
                if want != got:
                    sys.exit(f"{name}: rebuild differs:\n{want}\n{got}")
                print(f"{name}: rebuild is bit-identical", file=sys.stderr)


if __name__ == "__main__":
    main()
